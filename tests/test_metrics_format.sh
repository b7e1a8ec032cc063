#!/usr/bin/env bash
# The /metrics exposition memtraced renders (core/export/metrics.h), read by Prometheus's own
# Python client parser (Debian's python3-prometheus-client): every family parses, with its type,
# and the samples carry the values and the labels (an odd process name included) as rendered;
# promtool check metrics has nothing to say.
source "$(dirname "$0")/lib/test.sh"

UNIT=$TOP/$BUILD/tests/unit/test_metrics
PY=/usr/bin/python3 # Debian's, where python3-prometheus-client is installed
if [ ! -x "$UNIT" ]; then
	fail metrics_format_built "missing $UNIT (run make)"
	exit 0
fi
if ! "$PY" -c 'import prometheus_client.parser' 2>/dev/null; then
	fail metrics_format_parser "python3-prometheus-client is missing (make deps installs it)"
	exit 0
fi
"$UNIT" "$TMP/metrics.txt" >/dev/null
"$PY" - "$TMP/metrics.txt" >"$TMP/parsed.txt" 2>"$TMP/parse.err" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
for fam in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in fam.samples:
        labels = ",".join("%s=%r" % kv for kv in sorted(s.labels.items()))
        print(fam.name, fam.type, s.name, labels, s.value)
PY
rc=$?
check metrics_format_parses test "$rc" = 0
check metrics_format_live_bytes grep -q -F "memtraced_live_bytes gauge memtraced_live_bytes comm='redis-server',exe='/usr/bin/redis-check-rdb',pid='42',service='redis-server.service' 1048576.0" "$TMP/parsed.txt"
check metrics_format_counter_typed grep -q -F "memtraced_allocated_bytes counter memtraced_allocated_bytes_total comm='redis-server',exe='/usr/bin/redis-check-rdb',pid='42',service='redis-server.service' 5000000000.0" "$TMP/parsed.txt"
check metrics_format_odd_name_round_trips grep -q -F "comm='we\"ird\\\\na\\nme'" "$TMP/parsed.txt"
check metrics_format_drop_reasons test "$(grep -c '^memtraced_dropped_samples counter' "$TMP/parsed.txt")" = 6
check metrics_format_process_metrics grep -q -F "process_resident_memory_bytes gauge process_resident_memory_bytes  41943040.0" "$TMP/parsed.txt"
check metrics_format_build_info grep -q -F "memtraced_build_info gauge memtraced_build_info attach_mode='perf',kernel='6.1.0-57-amd64',version='0.1' 1.0" "$TMP/parsed.txt"
# Prometheus's own linter (promtool, Debian's prometheus): no finding (names, units, HELP, TYPE)
if command -v promtool >/dev/null; then
	promtool check metrics <"$TMP/metrics.txt" >"$TMP/promtool.out" 2>&1
	rc=$?
	check metrics_format_promtool_clean test "$rc" = 0 -a ! -s "$TMP/promtool.out"
	if [ -s "$TMP/promtool.out" ]; then sed 's/^/# /' "$TMP/promtool.out"; fi
else
	fail metrics_format_promtool_clean "promtool is missing (make deps installs prometheus)"
fi
