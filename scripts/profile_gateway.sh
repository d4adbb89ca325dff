#!/usr/bin/env bash
# Profile a loaded gateway end to end with py-spy: a gateway on 127.0.0.1, N loadgen publishers (320x240@15
# by default), py-spy sampling every thread of the gateway for SECONDS, then the split by category
# (bench/profile_split.py) and the gateway's CPU ms per processed frame over that window. Bounded: loadgen
# runs SECONDS+8 s, the gateway is stopped at the end.
#   pip install py-spy          # a profiling tool, not a project dependency
#   scripts/profile_gateway.sh 4 20 reports/profile [extra gateway flags...]
set -euo pipefail
N=${1:-4}; SECONDS_=${2:-20}; OUT=${3:-reports/profile}; shift 3 || shift $#
PY=${PYTHON:-python}
RES=${RESOLUTION:-320x240}
command -v py-spy >/dev/null || { echo "py-spy not found: pip install py-spy" >&2; exit 2; }
mkdir -p "$OUT"
PORT=$("$PY" -c 'from loadgen.embedded import free_port; print(free_port())')
"$PY" -m gateway.cli --host 127.0.0.1 --port "$PORT" --ice-loopback-only --no-degradation --log-level warning \
    --event-log none "$@" > "$OUT/gateway.log" 2>&1 &
GW=$!
trap 'kill -TERM $GW 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do curl -sf "http://127.0.0.1:$PORT/readyz" > /dev/null && break; sleep 0.5; done
"$PY" -m loadgen.cli run --url "http://127.0.0.1:$PORT" --concurrent-jobs "$N" --duration $((SECONDS_ + 8)) \
    --resolution "$RES" --fps 15 --no-live --output "$OUT/loadgen.json" > "$OUT/loadgen.log" 2>&1 &
LG=$!
cpu_frames() {  # the gateway's CPU seconds (user+system, all threads) and its processed-frame counter, now
    "$PY" -c 'import json, os, sys, urllib.request as u
f = open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")", 1)[1].split()
s = json.load(u.urlopen(f"http://127.0.0.1:{sys.argv[2]}/api/stats", timeout=5))
print((int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"), s["frames"]["processed"])' "$GW" "$PORT"
}
sleep 6
BEFORE=$(cpu_frames)
py-spy record --pid "$GW" --duration "$SECONDS_" --rate 200 --format raw --threads --nonblocking \
    -o "$OUT/gateway.pyspy" > "$OUT/py-spy.log" 2>&1 || true
AFTER=$(cpu_frames)
wait "$LG" || true
# CPU per processed frame over the sampled window (py-spy's own sampling cost included, the same every run)
echo "$BEFORE $AFTER" | awk '{printf "gateway CPU %.1f ms per processed frame (%d frames, %.1f CPU s)\n",
    ($3 - $1) * 1000 / ($4 - $2), $4 - $2, $3 - $1}' | tee "$OUT/cpu.txt"
"$PY" -m bench.profile_split "$OUT/gateway.pyspy" | tee "$OUT/split.txt"
