#!/usr/bin/env bash
# The main job on a bundled demo. Until the tracer lands: the format tools on a bundled trace.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
trace=tests/data/memtrace/v2-lists-r1e-4.ctf
echo "== memtrace-dump --summary-only $trace"
"$BUILD"/bin/memtrace-dump --summary-only "$trace"
