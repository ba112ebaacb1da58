#!/usr/bin/env bash
# Shuffled rounds of `cache_report --only`: each round runs every named cache once, alone
# in its own process, in a random order, so that a noisy machine's slow spells fall on all
# of them alike. Prints each run, then per cache the median, lower quartile and fastest
# time, and the first cache's time divided by each other's, by round (median, and in how
# many rounds the first was faster).
#
#   benches/only_rounds.sh [ROUNDS] [WORKLOAD] [CACHE...]
#   benches/only_rounds.sh 30                       # cuckoo-gate and quick_cache, get-heavy
#   benches/only_rounds.sh 20 mixed cuckoo-gate quick_cache-0.7 moka-0.12
#
# Needs python3 for the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null || { echo "only_rounds.sh needs python3 for its summary" >&2; exit 1; }

rounds=${1:-20}
workload=${2:-get-heavy}
shift $(($# < 2 ? $# : 2))
caches=("$@")
[ ${#caches[@]} -gt 0 ] || caches=(cuckoo-gate quick_cache-0.7)

cargo build --release --quiet --example cache_report
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for round in $(seq "$rounds"); do
    for cache in $(printf '%s\n' "${caches[@]}" | shuf); do
        line=$(./target/release/examples/cache_report --only "$cache" --workload "$workload")
        ms=$(grep -oE '[0-9.]+ms' <<<"$line" | head -1)
        echo "$round $cache ${ms%ms}" | tee -a "$log"
    done
done

python3 - "$log" "${caches[@]}" <<'EOF'
import statistics, sys
log, caches = sys.argv[1], sys.argv[2:]
runs = {}
for line in open(log):
    round_, cache, ms = line.split()
    runs.setdefault(int(round_), {})[cache] = float(ms)
rounds = [r for r in runs.values() if len(r) == len(caches)]
for cache in caches:
    times = sorted(r[cache] for r in rounds)
    q1 = statistics.quantiles(times, method="inclusive")[0] if len(times) > 1 else times[0]
    print(f"{cache}: median {statistics.median(times):.1f} ms, "
          f"lower quartile {q1:.1f}, fastest {times[0]:.1f}")
first = caches[0]
for other in caches[1:]:
    ratios = [r[first] / r[other] for r in rounds]
    faster = sum(x < 1 for x in ratios)
    print(f"{first} / {other}, time by round: median {statistics.median(ratios):.3f}, "
          f"{first} faster in {faster} of {len(ratios)}")
EOF
