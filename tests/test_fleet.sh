#!/usr/bin/env bash
# Running memtraced as a host service (issue 24, step 4): `make install` puts the systemd unit
# and its options file in place; `systemd-analyze verify` accepts the unit with nothing to say;
# the command the unit runs, with the options file as shipped (its selection pointed at a test
# program), traces, serves and snapshots into the state directory, and a SIGTERM (systemd's
# stop) ends it with status 0 and a final snapshot; the Prometheus scrape configuration in
# docs/fleet/ passes promtool.
source "$(dirname "$0")/lib/test.sh"

SITES=$TARGETS/sites
PY=/usr/bin/python3
if ! command -v systemd-analyze >/dev/null || ! command -v promtool >/dev/null; then
	fail fleet_tools "systemd-analyze (systemd) and promtool (prometheus) are needed (make deps installs them)"
	exit 0
fi
if ! make -s -C "$TOP" install BUILD="$BUILD" PREFIX="$TMP/prefix" SYSCONFDIR="$TMP/etc" >"$TMP/install.log" 2>&1; then
	fail fleet_make_install "$(tail -n 3 "$TMP/install.log")"
	exit 0
fi
UNIT=$TMP/prefix/lib/systemd/system/memtraced.service
ENVF=$TMP/etc/default/memtraced
check fleet_unit_installed test -s "$UNIT"
check fleet_options_installed test -s "$ENVF"
check fleet_unit_names_the_binary grep -q "^ExecStart=$TMP/prefix/bin/memtraced " "$UNIT"
check fleet_unit_hardened grep -q '^ProtectSystem=strict' "$UNIT"
check fleet_unit_state_directory grep -q '^StateDirectory=memtraced' "$UNIT"
check fleet_unit_restarts grep -q '^Restart=on-failure' "$UNIT"
systemd-analyze verify --man=no "$UNIT" >"$TMP/verify.out" 2>&1
rc=$?
check fleet_unit_verifies test "$rc" = 0 -a ! -s "$TMP/verify.out"
[ -s "$TMP/verify.out" ] && sed 's/^/# /' "$TMP/verify.out"
sed 's/^ProtectSystem=strict/ProtectSystem=bogus/' "$UNIT" >"$TMP/bad.service"
systemd-analyze verify --man=no "$TMP/bad.service" >"$TMP/verify_bad.out" 2>&1
check fleet_verify_sees_a_bad_unit test -s "$TMP/verify_bad.out"
promtool check config "$TOP/docs/fleet/prometheus.yml" >"$TMP/promtool.out" 2>&1
check fleet_prometheus_config_valid test $? = 0

if ! bpf_ready; then
	skip fleet_service_runs "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
# the unit's command as systemd runs it: the options file's variables, %S the state directory
cp "$SITES" "$TMP/fleetsvc"
mkdir -p "$TMP/w" "$TMP/state/memtraced"
"$TMP/fleetsvc" wait "$TMP/w" >/dev/null 2>&1 &
t=$!
wait_file "$TMP/w/ready" 100
P=$(free_port)
exec_line=$(sed -n 's/^ExecStart=//p' "$UNIT")
(
	set -a
	. "$ENVF"
	set +a
	MEMTRACED_SELECT="--match fleetsvc"  # the shipped file selects redis-server
	MEMTRACED_LISTEN=127.0.0.1:$P
	cmd=${exec_line//%S/$TMP/state}
	cmd=${cmd//\$\{MEMTRACED_LISTEN\}/$MEMTRACED_LISTEN}
	eval "exec $cmd" # $MEMTRACED_SELECT and $MEMTRACED_OPTS split on white space, as systemd does
) >"$TMP/svc.out" 2>"$TMP/svc.err" &
svc=$!
for _ in $(seq 100); do grep -q "pid=\"$t\"" <(curl -s "http://127.0.0.1:$P/metrics") && break; sleep 0.1; done
check fleet_service_serves grep -q "pid=\"$t\"" <(curl -s "http://127.0.0.1:$P/metrics")
sleep 1
kill -TERM "$svc"
wait "$svc"
check fleet_service_stops_cleanly test $? = 0
check fleet_final_snapshot_in_state_dir test -n "$(ls "$TMP/state/memtraced/" | grep "memtrace-$t-.*\.ctf")"
touch "$TMP/w/stop"
wait 2>/dev/null
