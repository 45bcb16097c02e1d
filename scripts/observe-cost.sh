#!/usr/bin/env bash
# The cost of the `tracing` and `metrics` features on group commit: appends/s of
# the observe_cost bench built without and with them (no subscriber, no recorder),
# run alternately (in turns, which goes first alternating too) so that both sides
# see the same disk, and the median of the per-round ratios (with / without).
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
reports=()
best_off=0
best_on=0
for ((i = 1; i <= rounds; i++)); do
  # Which side goes first alternates, so neither gains from its place.
  if ((i % 2)); then
    read -r a_wall a_cpu a_report a_batch < <("$off" "$tasks" "$millis")
    read -r b_wall b_cpu b_report b_batch < <("$on" "$tasks" "$millis")
  else
    read -r b_wall b_cpu b_report b_batch < <("$on" "$tasks" "$millis")
    read -r a_wall a_cpu a_report a_batch < <("$off" "$tasks" "$millis")
  fi
  w=$(python3 -c "print(f'{$b_wall / $a_wall:.3f}')")
  c=$(python3 -c "print(f'{$b_cpu / $a_cpu:.3f}')")
  echo "round $i: appends/s off $a_wall on $b_wall ($w); per CPU second off $a_cpu on $b_cpu ($c); report per batch off $a_report ns on $b_report ns, batch $b_batch ns"
  reports+=("$(python3 -c "print(($b_report - $a_report) / $b_batch)")")
  wall+=("$w")
  cpu+=("$c")
  best_off=$(python3 -c "print(max($best_off, $a_wall))")
  best_on=$(python3 -c "print(max($best_on, $b_wall))")
done
summary='import statistics,sys
name, r = sys.argv[1], sorted(map(float, sys.argv[2:]))
print(f"{name}: median ratio (on/off) {statistics.median(r):.3f}, min {r[0]:.3f}, max {r[-1]:.3f}")'
python3 -c "$summary" "appends/s" "${wall[@]}"
python3 -c "$summary" "appends per CPU second" "${cpu[@]}"
# The instrumentation's own time per batch (on minus off), as a share of a batch.
python3 -c "import statistics,sys; r=sorted(map(float, sys.argv[1:])); print(f'report cost per batch: median {statistics.median(r) * 100:.4f}% of a batch, max {r[-1] * 100:.4f}%')" "${reports[@]}"
# The best round of each side: what each build does when the neighbours leave it
# alone, the steadiest figure on a shared machine.
python3 -c "print(f'best round: off {$best_off:.0f}/s, on {$best_on:.0f}/s, ratio {$best_on / $best_off:.3f}')"
