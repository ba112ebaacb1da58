"""Checks scraped /metrics text: every documented series is there with sane values, and
counters never go backwards between two scrapes; after quiescence, the gauges equal the
len() values the example printed."""
import re
import sys

FILTER = ["items", "slots", "load_ratio", "memory_bytes", "false_positive_ratio", "fingerprint_width",
          "inserts_total", "failed_inserts_total", "removes_total", "relocations_total", "doublings_total"]
CACHE = ["hits_total", "misses_total", "admitted_total", "rejected_total", "evictions_total", "expirations_total",
         "entries", "weight", "capacity", "loads_total", "loads_coalesced_total", "load_failures_total", "load_waiters",
         "refreshes_total", "refresh_failures_total", "stale_served_total", "failures_shared_total",
         "failures_cached_total", "failures_kept", "restored_entries_total", "restore_expired_total", "restore_dropped_total",
         "saved_bytes_total", "restored_bytes_total", "last_save_seconds", "last_restore_seconds"]
GATE = ["rotations_total", "memory_bytes"]
LINE = re.compile(r'^(cuckoo_gate_\w+)\{name="(\w+)"\} (\S+)$')


def parse(path):
    series = {}
    for line in open(path):
        m = LINE.match(line.strip())
        if m:
            series[(m.group(1), m.group(2))] = float(m.group(3))
    return series


first, second, quiesced = (parse(p) for p in sys.argv[1:4])
expected = [(f"cuckoo_gate_filter_{n}", "visitors") for n in FILTER]
expected += [(f"cuckoo_gate_cache_{n}", "edge") for n in CACHE]
expected += [(f"cuckoo_gate_gate_{n}", "edge") for n in GATE]
for snapshot in (first, second, quiesced):
    missing = [k for k in expected if k not in snapshot]
    assert not missing, f"missing series: {missing}"
    load = snapshot[("cuckoo_gate_filter_load_ratio", "visitors")]
    assert 0.0 <= load <= 1.0, f"load ratio {load} outside [0, 1]"
    fpr = snapshot[("cuckoo_gate_filter_false_positive_ratio", "visitors")]
    assert 0.0 <= fpr < 1.0, f"false-positive ratio {fpr}"
    assert snapshot[("cuckoo_gate_cache_entries", "edge")] <= snapshot[("cuckoo_gate_cache_capacity", "edge")]
for key in expected:
    if key[0].endswith("_total"):
        assert second[key] >= first[key], f"counter {key} went backwards: {first[key]} -> {second[key]}"
assert second[("cuckoo_gate_cache_hits_total", "edge")] > first[("cuckoo_gate_cache_hits_total", "edge")], \
    "the workload did not run between the scrapes"
assert second[("cuckoo_gate_cache_loads_total", "edge")] > first[("cuckoo_gate_cache_loads_total", "edge")], \
    "the workload's misses ran no loader between the scrapes"
printed = dict(kv.split("=") for kv in sys.argv[4].split()[1:])
assert quiesced[("cuckoo_gate_filter_items", "visitors")] == float(printed["filter_items"]), (quiesced, printed)
assert quiesced[("cuckoo_gate_cache_entries", "edge")] == float(printed["cache_entries"]), (quiesced, printed)
print(f"metrics check passed: {len(expected)} series, counters monotonic, gauges match len() at quiescence")
