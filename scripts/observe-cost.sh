#!/usr/bin/env bash
# The cost of the `tracing` and `metrics` features on group commit: appends/s of
# the observe_cost bench built without and with them (no subscriber, no recorder),
# run alternately so that both sides see the same disk, and the median of the
# per-round ratios (with / without).
#
#   bash scripts/observe-cost.sh [ROUNDS] [TASKS] [MILLIS]
#
# WALCODEC_BENCH_DIR picks the directory (a real disk: on tmpfs syncs are free and
# the rounds measure the CPU path instead, which is the stricter test of the
# instrumentation's cost).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
tasks=${2:-16}
millis=${3:-1000}

build() {
  cargo bench -p walcodec-benches --bench observe_cost --no-run --message-format=json "$@" 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "observe_cost":
        print(m["executable"])' | tail -1
}
off=$(build)
on=$(build --features observe)
echo "rounds=$rounds tasks=$tasks millis=$millis dir=${WALCODEC_BENCH_DIR:-system temp}"
ratios=()
for ((i = 1; i <= rounds; i++)); do
  a=$("$off" "$tasks" "$millis")
  b=$("$on" "$tasks" "$millis")
  r=$(python3 -c "print(f'{$b / $a:.3f}')")
  echo "round $i: off $a/s, on $b/s, ratio $r"
  ratios+=("$r")
done
python3 -c "import statistics,sys; r=sorted(map(float, sys.argv[1:])); print(f'median ratio (on/off): {statistics.median(r):.3f}  min {r[0]:.3f}  max {r[-1]:.3f}')" "${ratios[@]}"
