"""Checks that every cuckoo-gate series the Grafana dashboard and the alert rules query is
one the prometheus example serves, so that neither can drift from the code.

    python3 .ci/check_dashboard.py SCRAPE DASHBOARD.json ALERTS.yml

SCRAPE is a /metrics exposition from examples/prometheus.rs. Exits 1 naming each series
that is queried but not served."""
import json
import re
import sys

SERIES = re.compile(r"\bcuckoo_gate_[a-z_]+\b")


def exprs(node):
    """Every query string in a dashboard: panel targets' `expr` and variables' `query`."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "query", "definition") and isinstance(value, str):
                yield value
            else:
                yield from exprs(value)
    elif isinstance(node, list):
        for item in node:
            yield from exprs(item)


scrape, dashboard, alerts = sys.argv[1:4]
served = {line.split("{")[0].split(" ")[0] for line in open(scrape) if line.startswith("cuckoo_gate_")}
queried = {}
for query in exprs(json.load(open(dashboard))):
    for name in SERIES.findall(query):
        queried.setdefault(name, dashboard)
for line in open(alerts):
    if line.strip().startswith("expr:"):
        for name in SERIES.findall(line):
            queried.setdefault(name, alerts)
missing = sorted((name, where) for name, where in queried.items() if name not in served)
for name, where in missing:
    print(f"{where} queries {name}, which the prometheus example does not serve")
if missing:
    sys.exit(1)
print(f"dashboard check passed: {len(queried)} series queried, all served")
