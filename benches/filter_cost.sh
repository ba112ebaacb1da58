#!/usr/bin/env bash
# Instructions per filter operation, by callgrind: examples/filter_cost.rs in
# `bulk_insert_and_query 200000`'s shape (fixed capacity 1.46 x 200,000, ε = 0.1%, 13-bit
# slots), run at two counts of operations; the difference over the operations added is
# the cost of one (setup cancels out). Each is printed beside its budget, rounded to whole instructions; with
# --check the script fails when one is over. With --windows, the same filter in the windowed
# layout, without budgets. Needs valgrind.
#   bash benches/filter_cost.sh [--check | --windows]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "filter_cost.sh needs valgrind (Debian package valgrind)"; exit 1; }
check=0
layout=
[ "${1:-}" = --check ] && check=1
[ "${1:-}" = --windows ] && layout=windows
cargo build --release --example filter_cost
count() { # instructions of one run
    valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/filter_cost "$1" "$2" $layout 2>&1 \
        | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
over=0
# op, N and 2N, budget: lookups of absent keys (one by one, and through contains_batch)
# and of keys in their first bucket (at 65% load); the mean insert of a fill from empty to 60% (N = 0 and 600 per mille: the
# reference benchmark's fill), and inserts from 57.5% to 62.5% load (no budget); a
# SeenBefore gate's check_and_record of a first sighting and of a key seen in its current
# generation (bucket layout only).
for row in "absent 524288 1048576 103" "batch 524288 1048576 109" "present 524288 1048576 65" "fill 0 600 151" "insert 15000 30000 -" \
    "record 262144 524288 362" "seen 262144 524288 240"; do
    read -r op n1 n2 budget <<<"$row"
    case "$op" in record | seen) [ -z "$layout" ] || continue ;; esac
    one=$(count "$op" "$n1")
    two=$(count "$op" "$n2")
    [ -z "$layout" ] || budget=-
    ops=$(target/release/examples/filter_cost "$op" "$n2" $layout | sed -n 's/.* of \([0-9]*\) found.*/\1/p')
    ops=$((ops - n1))
    per=$(python3 -c "print(f'{($two - $one) / $ops:.2f}')")
    if [ "$budget" = - ]; then
        verdict="no budget"
    else
        verdict=$(python3 -c "print('ok' if round($per) <= $budget else 'OVER')")
    fi
    echo "$op: $per instructions per operation; budget $budget: $verdict"
    [ "$verdict" != OVER ] || over=1
done
[ "$check" -eq 0 ] || [ "$over" -eq 0 ] || { echo "an operation is over its budget"; exit 1; }
