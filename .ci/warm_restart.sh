#!/usr/bin/env bash
# A warm restart of examples/web_service.rs over loopback: serve with --state, request 50
# objects, stop it with SIGTERM (it saves), start it again (it restores), request them
# again, and check from its /metrics that the objects came back and were served without
# the origin. Needs curl.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v curl >/dev/null || { echo "warm_restart.sh needs curl (Debian package curl)"; exit 1; }

cargo build --release --example web_service
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
pid=""
trap '[ -z "$pid" ] || kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT

start() {
    ./target/release/examples/web_service --port "$port" --state "$work/state" >>"$work/log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" >/dev/null && return; sleep 0.1; done
    echo "web_service did not start:"; cat "$work/log"; exit 1
}
stop() {
    kill -TERM "$pid"
    wait "$pid" || { echo "web_service did not exit cleanly:"; cat "$work/log"; exit 1; }
    pid=""
}
metric() { curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" | awk -v n="cuckoo_gate_cache_$1{name=\"web\"}" '$1 == n { print $2 }'; }
# Ids 4k + 3 live 4 s (and 2 s more served stale): time enough on a slow machine.
request_all() { for id in $(seq 103 4 299); do curl -s --max-time 5 "http://127.0.0.1:$port/obj/$id" >/dev/null; done; }

start
request_all
stop
[ -s "$work/state" ] || { echo "no state file after SIGTERM:"; cat "$work/log"; exit 1; }
start
restored=$(metric restored_entries_total)
request_all
loads=$(metric loads_total)
hits=$(metric hits_total)
stop
cat "$work/log"
# All 50 are back, and the second pass is served from the cache (a stale object's reload
# is an origin call behind the answer, so loads may be a few).
[ "$restored" = 50 ] || { echo "restored $restored objects, expected 50"; exit 1; }
[ "$hits" = 50 ] || { echo "$hits of 50 requests after the restart hit the cache"; exit 1; }
echo "warm restart passed: 50 objects restored, 50 hits after the restart, $loads origin calls (reloads)"
