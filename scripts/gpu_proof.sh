#!/usr/bin/env bash
# The GPU proof, one command on a fresh NVIDIA machine without network (README "GPU proof"):
#   1. installs the carried wheels (make gpu-wheels) offline into a private site directory;
#   2. runs tests/gpu (each test skipped only for what it needs: torch+CUDA, TensorRT, onnxruntime-gpu,
#      NVENC): the models, the swap and enhancer image ops on CUDA, NVENC's H.264;
#   3. the offline pipeline benchmark at 1280x720, batch 1/4/16/64: torch CUDA fp16 vs ONNX Runtime CPU,
#      and the per-face image ops (numpy/OpenCV vs torch CPU vs torch CUDA);
#   4. a live capacity series: `loadgen run --concurrent-jobs N` at 1280x720@30 against a gateway on the GPU
#      ($PROOF_GATEWAY_ARGS, default --engine torch --providers cuda --fp16), N from $PROOF_JOBS;
#   5. writes $OUT/summary.json (every figure), nvidia-smi samples, the test log and the logs: 5 files.
# Budget: about 8 minutes (each step has its own timeout; a step that fails is recorded, the rest still run).
#   OUT=/somewhere bash scripts/gpu_proof.sh        (default OUT: reports/gpu-proof)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-reports/gpu-proof}
CARRY=${GPU_CARRY:-.gpu-carry}
PY=${PYTHON:-python3}
JOBS=${PROOF_JOBS:-"8 24 40"}
LIVE_S=${PROOF_LIVE_S:-20}
GATEWAY_ARGS=${PROOF_GATEWAY_ARGS:-"--engine torch --providers cuda --fp16 --max-batch 32"}
WORK=$(mktemp -d /tmp/livefuse-proof.XXXXXX)
mkdir -p "$OUT"
exec > >(tee "$OUT/proof.log") 2>&1
step() { echo "== $(date -u +%H:%M:%S) $*"; }
fetch() {  # fetch URL [FILE]: GET, body to FILE (or discarded); fails on anything but 200
    "$PY" -c 'import sys, urllib.request as u
body = u.urlopen(sys.argv[1], timeout=5).read()
if len(sys.argv) > 2: open(sys.argv[2], "wb").write(body)' "$@" 2>/dev/null
}
START=$(date +%s)

if [ "${PROOF_SKIP_INSTALL:-0}" = 1 ]; then  # everything installed and provisioned already (a dry run)
    step "using the installed packages and provisioned caches"
    export PYTHONPATH="$PWD"
else
    step "install carried wheels ($CARRY/wheels) offline"
    if [ ! -d "$CARRY/wheels" ]; then echo "no $CARRY/wheels: run 'make gpu-wheels' where pip can download"; exit 2; fi
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WORK/site" \
        "$CARRY"/wheels/*.whl || { echo "wheel install failed"; exit 2; }
    export PYTHONPATH="$WORK/site:$PWD"
    cp -r "$CARRY/cache/models" "$WORK/models" && cp -r "$CARRY/cache/media" "$WORK/media"
    export LIVEFUSE_MODEL_DIR="$WORK/models" LIVEFUSE_MEDIA_DIR="$WORK/media"
fi
"$PY" -c 'import av, aiortc, onnxruntime as o; from engines.backends.torch_engine import import_torch
torch, _ = import_torch(); print("torch", torch.__version__, "cuda",
torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-", "| av",
av.__version__, "| aiortc", aiortc.__version__, "| onnxruntime", o.__version__, o.get_available_providers())'

command -v nvidia-smi > /dev/null || echo "no nvidia-smi on this machine"
nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used,power.draw,clocks.sm \
    --format=csv -l 1 > "$OUT/nvidia-smi.csv" 2>&1 &
SMI=$!
trap 'kill $SMI 2>/dev/null; rm -rf "$WORK"' EXIT

step "tests/gpu"
timeout 180 "$PY" -m pytest tests/gpu -q -rs -p no:cacheprovider -o addopts="" --timeout 170 \
    > "$OUT/gpu-tests.log" 2>&1
echo "tests/gpu exit $?"; tail -n 15 "$OUT/gpu-tests.log"

BENCH=(-m bench.benchmark --test-cases single_face --resolutions 1280x720 --durations 5 --warmup 2
       --batch-sizes 1 4 16 64 --no-progress)
step "offline benchmark: torch CUDA fp16"
timeout 150 "$PY" "${BENCH[@]}" --engine torch --providers cuda --fp16 --output "$WORK/bench-torch.json" \
    | tail -n 12
step "offline benchmark: ONNX Runtime CPU"
timeout 120 "$PY" "${BENCH[@]}" --engine onnxruntime --providers cpu --output "$WORK/bench-ort.json" \
    | tail -n 12
step "image ops: numpy/OpenCV vs torch CPU vs torch CUDA"
timeout 60 "$PY" -m bench.tensor_ops --rounds 20 --output "$WORK/bench-ops.json" | tail -n 16

step "live series at 1280x720@30 (gateway $GATEWAY_ARGS)"
PORT=8089
# shellcheck disable=SC2086  # the gateway's flags, word-split on purpose
"$PY" -m gateway.cli --host 127.0.0.1 --port $PORT $GATEWAY_ARGS --log-level warning > "$WORK/gateway.log" 2>&1 &
GW=$!
READY=0
for _ in $(seq 1 150); do  # models load and CUDA graphs are captured before /readyz turns 200
    if fetch "http://127.0.0.1:$PORT/readyz"; then READY=1; break; fi
    kill -0 $GW 2>/dev/null || break
    sleep 1
done
if [ $READY = 1 ]; then
    fetch "http://127.0.0.1:$PORT/api/stats" "$WORK/stats-start.json"
else
    echo "gateway not ready, no live series:"; tail -n 20 "$WORK/gateway.log"; JOBS=""
fi
for N in $JOBS; do
    step "live: $N publishers"
    timeout $((LIVE_S + 60)) "$PY" -m loadgen.cli run --url "http://127.0.0.1:$PORT" --concurrent-jobs "$N" \
        --duration "$LIVE_S" --resolution 1280x720 --fps 30 --ramp-up-rate 8 --no-live \
        --output "$WORK/live-$N.json" | tail -n 4
done
fetch "http://127.0.0.1:$PORT/api/stats" "$WORK/stats-end.json" || true
kill $GW 2>/dev/null; wait $GW 2>/dev/null
cp "$WORK/gateway.log" "$OUT/gateway.log"

step "summary"
"$PY" - "$WORK" "$OUT/summary.json" "$START" <<'EOF'
import json, sys, time
from pathlib import Path

work, out, start = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])


def load(name):
    p = work / name
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def runs(report):
    return {r.get("name"): {"frames_per_s": r.get("frames_per_s"), "latency_ms": r.get("latency_ms"),
                            "stages_ms": r.get("stages_ms")} for r in (report or {}).get("runs", [])}


live = {}
for p in sorted(work.glob("live-*.json")):
    rep = json.loads(p.read_text())
    for r in rep.get("runs", []):
        f = r.get("frames", {})
        sent = f.get("sent") or 0
        processed = (f.get("received", 0) - f.get("repeated", 0)) / sent if sent else None
        live[p.stem.split("-")[1]] = {"p95_ms": r.get("latency_ms", {}).get("p95"),
                                      "p50_ms": r.get("latency_ms", {}).get("p50"), "frames": f,
                                      "processed_ratio": None if processed is None else round(processed, 4),
                                      "received_ratio": r.get("received_ratio"), "fps_per_job": r.get("fps_per_job"),
                                      "slo_met": r.get("slo_met"), "gateway": r.get("gateway")}
stats = load("stats-end.json") or {}
summary = {"wall_s": round(time.time() - start, 1),
           "offline_torch_cuda_fp16": runs(load("bench-torch.json")),
           "offline_ort_cpu": runs(load("bench-ort.json")),
           "image_ops": (load("bench-ops.json") or {}),
           "live_1280x720_30fps": live,
           "gateway_decoder": stats.get("decoder") or (load("stats-start.json") or {}).get("decoder"),
           "gateway_stats_end": {k: stats.get(k) for k in ("stages_ms", "scheduler", "gpu", "process")
                                 if k in stats}}
out.write_text(json.dumps(summary, indent=1))
print(json.dumps({k: summary[k] for k in ("wall_s", "live_1280x720_30fps")}, indent=1)[:3000])
EOF
step "done in $(( $(date +%s) - START )) s; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
