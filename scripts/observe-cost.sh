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
wall=()
cpu=()
for ((i = 1; i <= rounds; i++)); do
  read -r a_wall a_cpu < <("$off" "$tasks" "$millis")
  read -r b_wall b_cpu < <("$on" "$tasks" "$millis")
  w=$(python3 -c "print(f'{$b_wall / $a_wall:.3f}')")
  c=$(python3 -c "print(f'{$b_cpu / $a_cpu:.3f}')")
  echo "round $i: appends/s off $a_wall on $b_wall ($w); per CPU second off $a_cpu on $b_cpu ($c)"
  wall+=("$w")
  cpu+=("$c")
done
summary='import statistics,sys
name, r = sys.argv[1], sorted(map(float, sys.argv[2:]))
print(f"{name}: median ratio (on/off) {statistics.median(r):.3f}, min {r[0]:.3f}, max {r[-1]:.3f}")'
python3 -c "$summary" "appends/s" "${wall[@]}"
python3 -c "$summary" "appends per CPU second" "${cpu[@]}"
