#!/usr/bin/env bash
# Instructions per hit through `get`, through `get_or_insert_with`, and through `get` with a
# time to live and with a time to idle, by callgrind: each call runs examples/hit_cost.rs at
# N and 2N hits, and the difference over N is the cost of one hit (setup cancels out).
# Needs valgrind.
#   bash benches/hit_cost.sh [N]      (default N = 1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "hit_cost.sh needs valgrind (Debian package valgrind)"; exit 1; }
n=${1:-1000000}
cargo build --release --example hit_cost
count() { # instructions of one run
    valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/hit_cost "$1" "$2" 2>&1 \
        | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
declare -A per
for call in get get-or-insert get-ttl get-tti; do
    one=$(count "$call" "$n")
    two=$(count "$call" $((2 * n)))
    per[$call]=$(python3 -c "print(f'{($two - $one) / $n:.2f}')")
    echo "$call: ${per[$call]} instructions per hit ($one at N=$n, $two at 2N)"
done
for call in get-or-insert get-ttl get-tti; do
    python3 -c "print(f'$call / get: {${per[$call]} / ${per[get]}:.3f}')"
done
