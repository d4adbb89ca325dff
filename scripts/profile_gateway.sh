#!/usr/bin/env bash
# Profile a loaded gateway end to end with py-spy: a gateway on 127.0.0.1, N loadgen publishers (320x240@15
# by default), py-spy sampling every thread of the gateway for SECONDS, then the split by category
# (scripts/profile_split.py). Bounded: loadgen runs SECONDS+8 s, the gateway is stopped at the end.
#   pip install py-spy          # a profiling tool, not a project dependency
#   scripts/profile_gateway.sh 4 20 reports/profile [extra gateway flags...]
set -euo pipefail
N=${1:-4}; SECONDS_=${2:-20}; OUT=${3:-reports/profile}; shift 3 || shift $#
PY=${PYTHON:-python}
RES=${RESOLUTION:-320x240}
command -v py-spy >/dev/null || { echo "py-spy not found: pip install py-spy" >&2; exit 2; }
mkdir -p "$OUT"
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PY" -m gateway.cli --host 127.0.0.1 --port "$PORT" --ice-loopback-only --no-degradation --log-level warning \
    --event-log none "$@" > "$OUT/gateway.log" 2>&1 &
GW=$!
trap 'kill -TERM $GW 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do curl -sf "http://127.0.0.1:$PORT/readyz" > /dev/null && break; sleep 0.5; done
"$PY" -m loadgen.cli --url "http://127.0.0.1:$PORT" --concurrent-jobs "$N" --duration $((SECONDS_ + 8)) \
    --resolution "$RES" --fps 15 --no-live --output-report "$OUT/loadgen.json" > "$OUT/loadgen.log" 2>&1 &
LG=$!
sleep 6
py-spy record --pid "$GW" --duration "$SECONDS_" --rate 200 --format raw --threads --nonblocking \
    -o "$OUT/gateway.pyspy" > "$OUT/py-spy.log" 2>&1 || true
wait "$LG" || true
"$PY" "$(dirname "$0")/profile_split.py" "$OUT/gateway.pyspy" | tee "$OUT/split.txt"
