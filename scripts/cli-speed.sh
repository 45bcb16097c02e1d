#!/usr/bin/env bash
# `walcodec verify` on a page-cached 1 GiB log beside LevelDB 1.23's C++ reader and
# `cat FILE > /dev/null`, in the same run, taking turns, several times.
#
#   scripts/cli-speed.sh [REPS]       # default 7 repetitions
#
# The log is the file bench's (benches/peers, examples/file_log.rs: 50 B–70 KB
# records), written once to $CLI_SPEED_LOG (default /tmp/walcodec-cli-speed.log,
# $CLI_SPEED_MIB MiB, default 1024) and read from the page cache. Each tool runs
# once per round, in turn; the table gives each one's median and best wall time and
# the ratios of the medians. The LevelDB peer needs `apt-get install
# libleveldb-dev` (1.23); without it that row is left out.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
reps=${1:-7}
log=${CLI_SPEED_LOG:-/tmp/walcodec-cli-speed.log}
mib=${CLI_SPEED_MIB:-1024}

cargo build --release --features cli --bin walcodec
cli=$root/target/release/walcodec
(cd benches/peers && CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/benches/peers/target} \
  cargo build --release --example file_log)
peer=${CARGO_TARGET_DIR:-$root/benches/peers/target}/release/examples/file_log

if [ ! -s "$log" ]; then
  "$peer" write "$log" "$mib"
fi
cat "$log" > /dev/null # into the page cache
"$cli" verify --jobs 1 "$log" | head -1
have_leveldb=1
"$peer" leveldb-read "$log" || have_leveldb=0

names=("cat" "walcodec verify --jobs 1" "walcodec verify --jobs 2")
commands=("cat $log" "$cli verify --jobs 1 $log" "$cli verify --jobs 2 $log")
if [ "$have_leveldb" = 1 ]; then
  names+=("LevelDB C++ log::Reader")
  commands+=("$peer leveldb-read $log")
fi

times=()
for ((round = 1; round <= reps; round++)); do
  for i in "${!commands[@]}"; do
    start=$(date +%s.%N)
    ${commands[$i]} > /dev/null
    end=$(date +%s.%N)
    times[$i]+="$(echo "$end - $start" | bc) "
  done
done

echo
echo "$(stat -c %s "$log") bytes, $reps rounds, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$have_leveldb" "${names[@]}" -- "${times[@]}" <<'EOF'
import statistics, sys
args = sys.argv[1:]
have_leveldb = args.pop(0) == "1"
split = args.index("--")
names, samples = args[:split], [list(map(float, s.split())) for s in args[split + 1:]]
medians = [statistics.median(s) for s in samples]
print(f"| {'what':<28} | median s | best s | vs cat | vs LevelDB |")
print(f"|{'-' * 30}|---------:|-------:|-------:|-----------:|")
leveldb = medians[names.index("LevelDB C++ log::Reader")] if have_leveldb else None
for name, s, m in zip(names, samples, medians):
    vs_leveldb = f"{leveldb / m:.2f}x" if leveldb else "-"
    print(f"| {name:<28} | {m:8.3f} | {min(s):6.3f} | {m / medians[0]:5.2f}x | {vs_leveldb:>10} |")
print("\n'vs cat': time over cat's (1.00x is the read bound); 'vs LevelDB': LevelDB's time over this one's (above 1 is faster than LevelDB)")
EOF
