"""Dependencies point one way: no package imports one that imports it back, and the layers keep their
direction (engines imports neither gateway nor loadgen; the WebRTC extensions import no other gateway
package; only `gateway.webrtc` names aiortc's private attributes, and only its `compat` and `chain` read or
write one)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = ("gateway", "engines", "loadgen", "bench")


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package_of(module: str) -> str:
    """gateway.<x> for a gateway sub-package or a module of gateway's own, else the top name."""
    parts = module.split(".")
    if parts[0] == "gateway" and len(parts) > 1:
        return f"gateway.{parts[1]}"
    return parts[0]


def _imports(path: Path, typing: bool = True) -> set[str]:
    """The names of our packages that `path` imports (`typing=False`: not those under `if TYPE_CHECKING:`)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    if not typing:
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.If)
                and isinstance(node.test, ast.Name)
                and node.test.id == "TYPE_CHECKING"
            ):
                node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] in TOP}


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for top in TOP:
        for path in (ROOT / top).rglob("*.py"):
            package = _package_of(_module_of(path))
            targets = {_package_of(name) for name in _imports(path)} - {package}
            graph.setdefault(package, set()).update(targets)
    return graph


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return False


def _is_package(name: str) -> bool:
    return (ROOT / name.replace(".", "/")).is_dir()


# The one edge against the direction left: the configuration takes its rate-limit and public-URL types
# from gateway.http, whose handlers read the configuration.
KNOWN_BACK_EDGES = {("gateway.config", "gateway.http")}


def test_no_package_imports_one_that_imports_it_back() -> None:
    graph = _graph()
    for source, target in KNOWN_BACK_EDGES:
        graph[source].discard(target)
    assert {"gateway.webrtc", "gateway.media", "gateway.scheduler", "engines", "loadgen"} <= set(graph)
    packages = [name for name in graph if _is_package(name)]
    cycles = sorted(f"{a} <-> {b}" for a in packages for b in packages if a != b and _reaches(graph, a, b)
                    and _reaches(graph, b, a))  # fmt: skip
    assert cycles == []


def test_layers_keep_their_direction() -> None:
    graph = _graph()
    assert not any(target.startswith(("gateway", "loadgen")) for target in graph["engines"])
    assert graph["gateway.webrtc"] == set()
    users = ("loadgen", "bench")
    assert not any(target == "loadgen" for source, targets in graph.items() if source not in users
                   for target in targets)  # fmt: skip
    # bench/ is not in the wheel: nothing the wheel ships may import it
    assert not any("bench" in targets for source, targets in graph.items() if source != "bench")


def test_engine_backends_and_onnx_rewrites_sit_below_the_pipeline() -> None:
    """A backend knows the Engine protocol, the ONNX rewrites and its fellow backends; an ONNX rewrite knows
    the other rewrites and the model store; neither reaches up into the pipeline or the face processors."""
    allowed = {
        "backends": ("engines.engine", "engines.backends", "engines.onnx"),
        "onnx": ("engines.onnx", "engines.models"),
    }
    offenders = []
    for sub, prefixes in allowed.items():
        paths = sorted((ROOT / "engines" / sub).rglob("*.py"))
        assert paths, sub
        for path in paths:
            for name in _imports(path):
                module = name.split(".")
                if module[0] == "engines" and not any(
                    ".".join(module[: len(p.split("."))]) == p for p in prefixes
                ):
                    offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offenders == []


def test_the_source_preparation_sits_below_the_per_frame_processors() -> None:
    """engines/source (run once per source) knows the frame contract, the detected face's type and FaceMesh's
    landmark sets, and no per-frame processor; those it reads import nothing of it back (no cycle)."""
    shared = ("engines.frames", "engines.processors.face_detector", "engines.processors.masks")
    paths = sorted((ROOT / "engines" / "source").rglob("*.py"))
    assert paths
    offenders = []
    for path in paths:
        for name in _imports(path):
            if name.startswith("engines.") and not name.startswith(("engines.source", *shared)):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    for module in shared:
        path = ROOT / (module.replace(".", "/") + ".py")
        runtime = _imports(path, typing=False)  # frames names PreparedSource for its types only
        offenders += [f"{module} imports {name}" for name in runtime if name.startswith("engines.source")]
    assert offenders == []


def test_only_the_webrtc_package_names_aiortc_privates() -> None:
    private = re.compile(
        r"_RTC[A-Za-z]+__\w+|(?<!self)\._(?:send_rtcp|handle_rtcp_packet|codecs|ssrc|queue)\b|\bget_decoder\b"
    )
    offenders = []
    for top in TOP:
        for path in (ROOT / top).rglob("*.py"):
            if path.is_relative_to(ROOT / "gateway" / "webrtc"):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if private.search(line) and not line.lstrip().startswith("#"):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


# A reach into aiortc: getattr / setattr with a `compat` name as the attribute (its first argument may span
# lines and hold one level of parentheses: `getattr(f(a, b), compat.X)`), or a `compat` name assigned.
_REACH = re.compile(r"\b(?:get|set)attr\((?:[^(),]|\([^()]*\))*,\s*compat\.|\bcompat\.\w+\s*=[^=]")


def test_only_compat_and_chain_reach_aiortc_privates() -> None:
    """Every read or write of a private aiortc name is made by `compat` (the state behind the names) or
    `chain` (the layers on methods); a feature asks them, never `getattr(x, compat.NAME)` itself."""
    webrtc = ROOT / "gateway" / "webrtc"
    allowed = {webrtc / "compat.py", webrtc / "chain.py", Path(__file__).resolve()}
    offenders = []
    for path in [p for top in (*TOP, "tests") for p in (ROOT / top).rglob("*.py")]:
        if path in allowed:
            continue
        text = path.read_text()
        for found in _REACH.finditer(text):
            number = text.count("\n", 0, found.start()) + 1
            offenders.append(f"{path.relative_to(ROOT)}:{number}: {found.group(0).strip()}")
    assert offenders == []
    seen = ("getattr(\n sender, compat.SSRC)", "setattr(f(a, b), compat.SENDER_LSR, 1)", "compat.A = 1")
    assert all(_REACH.search(line) for line in seen)  # the check can see each form


def test_module_docstrings_say_what_and_why_in_twelve_lines_at_most() -> None:
    """A module's docstring is what it is and why; figures and history live in docs/BENCHMARKS.md."""
    long: list[str] = []
    for top in (*TOP, "scripts", "tests"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "node_modules" in path.parts:
                continue
            doc = ast.get_docstring(ast.parse(path.read_text(), str(path)), clean=False)
            if doc is not None and doc.count("\n") + 1 > 12:
                long.append(f"{path.relative_to(ROOT)}: {doc.count(chr(10)) + 1} lines")
    assert not long, long
