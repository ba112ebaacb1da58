#!/usr/bin/env bash
# Lookups and inserts beside the C++ reference implementation of cuckoo filters
# (github.com/efficient/cuckoofilter, its benchmarks/bulk-insert-and-query.cc, `Cuckoo12`):
# its benchmark and examples/bulk_insert_and_query.rs (one key at a time, then through
# insert_batch and contains_batch) run in alternating rounds of processes, and each ratio is the median of the per-round ratios.
# The reference is not on crates.io: give the path of a checkout of it (917583d was
# measured). Needs g++, make and libssl-dev (the reference links OpenSSL).
#   bash benches/vs_reference.sh PATH_TO_CUCKOOFILTER [N] [ROUNDS]    (N = 5000000, 3 rounds)
set -euo pipefail
reference=${1:?usage: vs_reference.sh PATH_TO_CUCKOOFILTER [N] [ROUNDS]}
[ -f "$reference/benchmarks/bulk-insert-and-query.cc" ] \
    || { echo "$reference is not a checkout of efficient/cuckoofilter"; exit 1; }
reference=$(cd "$reference" && pwd)
cd "$(dirname "$0")/.."
n=${2:-5000000}
rounds=${3:-3}
for tool in g++ make; do
    command -v $tool >/dev/null || { echo "vs_reference.sh needs $tool"; exit 1; }
done
[ -f /usr/include/openssl/evp.h ] || { echo "vs_reference.sh needs libssl-dev (the reference links OpenSSL)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The reference's benchmark, stopped after its first filter (`Cuckoo12`). Its keys come
# from std::random_device, one system call each on a VM (minutes for 5M keys); a
# mt19937 seeded from it gives the same 32-bit values, and keys are made before the timing.
cp -r "$reference/src" "$reference/benchmarks" "$work/"
sed -i '/cout << setw(NAME_WIDTH) << "Cuckoo12" << cf << endl;/a\  return 0;' "$work/benchmarks/bulk-insert-and-query.cc"
sed -i 's/::std::random_device random;/::std::mt19937 random{::std::random_device{}()};/' "$work/benchmarks/random.h"
grep -q "mt19937 random" "$work/benchmarks/random.h" || { echo "the reference's random.h is not the one this script patches"; exit 1; }
make -s -C "$work/benchmarks" bulk-insert-and-query.exe
cargo build --release --example bulk_insert_and_query
ours=target/release/examples/bulk_insert_and_query
for round in $(seq "$rounds"); do
    "$work/benchmarks/bulk-insert-and-query.exe" "$n" | grep Cuckoo12
    "$ours" "$n" | grep "fixed 1.46N"
    "$ours" "$n" --batch | grep "fixed, batch"
done | tee "$work/rows"
python3 - "$work/rows" <<'PY'
import sys, statistics
rows = [line.split() for line in open(sys.argv[1])]
# Columns after the name: adds, find 0%, 25%, 50%, 75%, 100% (million per second).
def numbers(row, skip):
    return [float(x) for x in row[skip:skip + 6]]
reference = [numbers(r, 1) for r in rows if r[0] == "Cuckoo12"]
single = [numbers(r, 2) for r in rows if r[:2] == ["fixed", "1.46N"]]
batch = [numbers(r, 2) for r in rows if r[:2] == ["fixed,", "batch"]]
names = ["adds", "find 0%", "25%", "50%", "75%", "100%"]
print("| ours ÷ reference, median of %d rounds | %s |" % (len(reference), " | ".join(names)))
print("|---" * (len(names) + 1) + "|")
for label, ours in (("`insert`, `contains`", single), ("`insert_batch`, `contains_batch`", batch)):
    ratios = [statistics.median(o[i] / r[i] for o, r in zip(ours, reference)) for i in range(6)]
    print("| %s | %s |" % (label, " | ".join("%.2f" % x for x in ratios)))
PY
