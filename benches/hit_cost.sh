#!/usr/bin/env bash
# Instructions per call, by callgrind: hits through `get` and the loaders, on caches without
# expiry, with a time to live and with a time to idle; writes of new keys into a full
# cache (each evicting one), ours and quick_cache's (the peer's, for comparison: no
# budget); and a read-through request from a cold start. Each call runs
# examples/hit_cost.rs at N and 2N calls (read-through: at 0 and N requests, so that the
# fill is counted), and the difference over N is the cost of one call (setup cancels
# out). Each is printed beside its budget, rounded to whole instructions; the script fails
# when one is over. Needs valgrind.
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
# The budgets: an absolute count, or `xR of CALL` (R times that call's count). An async
# hit is measured as a handler makes it, awaited inside a running task;
# `get-or-insert-async-alone` builds, polls and drops a future per call (about 17 more
# instructions: the future's state written to the stack, the context, the frame) and has
# no budget, as it measures the harness as much as the cache.
budget() {
    case "$1" in
        get) echo 107 ;;
        get-or-insert) echo "x1.05 of get" ;;
        get-or-insert-async) echo "x1.05 of get" ;;
        get-ttl) echo 113 ;;
        get-or-insert-ttl) echo "x1.05 of get-ttl" ;;
        get-or-insert-fresh) echo "x1.15 of get" ;;
        insert) echo 531 ;;
        insert-ttl) echo 576 ;;
        get-or-insert-miss) echo 1425 ;;
        read-through) echo 212 ;;
        *) echo "" ;;
    esac
}
declare -A per
over=0
for call in get get-or-insert get-or-insert-async get-or-insert-async-alone get-ttl get-or-insert-ttl get-or-insert-fresh get-tti \
    insert insert-ttl get-or-insert-miss quick-cache-insert read-through; do
    if [ "$call" = read-through ]; then
        one=$(count "$call" 0)
        two=$(count "$call" "$n")
    else
        one=$(count "$call" "$n")
        two=$(count "$call" $((2 * n)))
    fi
    per[$call]=$(python3 -c "print(f'{($two - $one) / $n:.2f}')")
    limit=$(budget "$call")
    case "$limit" in
        "") verdict="no budget" ;;
        x*) read -r _ ratio _ of <<<"${limit/x/x }"
            max=$(python3 -c "print(f'{${per[$of]} * $ratio:.2f}')")
            verdict=$(python3 -c "print('ok' if round(${per[$call]}) <= $max else 'OVER')")
            limit="$limit ($max)" ;;
        *) verdict=$(python3 -c "print('ok' if round(${per[$call]}) <= $limit else 'OVER')") ;;
    esac
    echo "$call: ${per[$call]} instructions per call; budget ${limit:-none}: $verdict"
    [ "$verdict" != OVER ] || over=1
done
[ "$over" -eq 0 ] || { echo "a call is over its budget"; exit 1; }
