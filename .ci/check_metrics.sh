#!/usr/bin/env bash
# Starts examples/prometheus.rs, scrapes /metrics, validates the exposition with promtool,
# and checks the documented series (see .ci/check_metrics.py). Installs promtool (Debian's
# `prometheus` package) if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null; then
    echo "installing promtool (Debian package prometheus)"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

cargo build --release --example prometheus
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
./target/release/examples/prometheus --port "$port" --seconds 90 --quiesce-after 8 >"$work/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT

scrape() { curl -sf --max-time 5 "http://127.0.0.1:$port/metrics"; }
for _ in $(seq 100); do scrape >/dev/null 2>&1 && break; sleep 0.2; done
sleep 1
scrape >"$work/first"
sleep 2
scrape >"$work/second"
promtool check metrics <"$work/first"
promtool check rules examples/alerts.yml
for _ in $(seq 100); do grep -q '^quiesced' "$work/log" && break; sleep 0.2; done
sleep 1
scrape >"$work/quiesced"
python3 .ci/check_metrics.py "$work/first" "$work/second" "$work/quiesced" "$(grep '^quiesced' "$work/log")"

# The Grafana dashboard and the alert rules query only series the example serves; a
# dashboard naming a series that does not exist must be caught.
python3 .ci/check_dashboard.py "$work/first" examples/grafana/cuckoo-gate.json examples/alerts.yml
sed 's/cuckoo_gate_cache_hits_total/cuckoo_gate_cache_hit_total/' examples/grafana/cuckoo-gate.json >"$work/wrong.json"
if python3 .ci/check_dashboard.py "$work/first" "$work/wrong.json" examples/alerts.yml; then
    echo "the dashboard check passed a dashboard naming a series that does not exist"
    exit 1
fi
echo "the dashboard check caught a deliberately wrong series name"
