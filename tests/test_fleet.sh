#!/usr/bin/env bash
# Running memtraced as a host service (issue 24, step 4): `make install` puts the systemd unit
# and its options file in place; `systemd-analyze verify` accepts the unit with nothing to say;
# the command the unit runs, with the options file as shipped (its selection pointed at a test
# program), traces, serves and snapshots into the state directory, and a SIGTERM (systemd's
# stop) ends it with status 0 and a final snapshot; the Prometheus scrape configuration in
# docs/fleet/ passes promtool. The unit's confinement (issue 36): `systemd-analyze security` rates
# it 3.0 or below, and the service runs under its capability bounding set, no_new_privs and its
# SystemCallFilter (the calls of its groups fail with EPERM, as systemd makes them), tracing,
# sampling, serving and snapshotting as without.
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
check fleet_unit_notify_watchdog test "$(grep -c -E '^(Type=notify|WatchdogSec=[0-9]+s)$' "$UNIT")" = 2
systemd-analyze verify --man=no "$UNIT" >"$TMP/verify.out" 2>&1
rc=$?
check fleet_unit_verifies test "$rc" = 0 -a ! -s "$TMP/verify.out"
[ -s "$TMP/verify.out" ] && sed 's/^/# /' "$TMP/verify.out"
sed 's/^ProtectSystem=strict/ProtectSystem=bogus/' "$UNIT" >"$TMP/bad.service"
systemd-analyze verify --man=no "$TMP/bad.service" >"$TMP/verify_bad.out" 2>&1
check fleet_verify_sees_a_bad_unit test -s "$TMP/verify_bad.out"
promtool check config "$TOP/docs/fleet/prometheus.yml" >"$TMP/promtool.out" 2>&1
check fleet_prometheus_config_valid test $? = 0
# --offline: the unit's own settings, whatever this machine runs as PID 1
score=$(systemd-analyze security --offline=yes "$UNIT" 2>/dev/null | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p')
if [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }'; then pass fleet_unit_exposure_at_most_3
else fail fleet_unit_exposure_at_most_3 "systemd-analyze security: '${score}' (goal <= 3.0)"; fi
for k in NoNewPrivileges=yes PrivateDevices=yes IPAddressAllow=localhost IPAddressDeny=any MemoryMax= CPUQuota= \
	SystemCallErrorNumber=EPERM; do
	check "fleet_unit_sets_${k%%=*}" grep -q "^$k" "$UNIT"
done
check fleet_unit_no_sys_admin_no_dac_override test -z "$(grep '^CapabilityBoundingSet=' "$UNIT" | grep -E 'CAP_SYS_ADMIN|CAP_DAC_OVERRIDE')"

if ! bpf_ready; then
	skip fleet_service_runs "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
# the unit's command as systemd runs it: the options file's variables, %S the state directory,
# its bounding set, no_new_privs and system call filter
cp "$TARGETS/service_leak" "$TMP/fleetsvc"
mkdir -p "$TMP/w" "$TMP/state/memtraced"
"$TMP/fleetsvc" "$TMP/w" 120 10000 >/dev/null 2>&1 &
t=$!
wait_file "$TMP/w/ready" 100
touch "$TMP/w/go"
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$UNIT" | tr 'A-Z' 'a-z' | sed 's/cap_/+/g; s/ /,/g')
groups=$(sed -n 's/^SystemCallFilter=~//p' "$UNIT")
# shellcheck disable=SC2086 # the groups are words
denied=$(systemd-analyze syscall-filter --no-pager $groups | grep -E '^    [a-z_0-9]+$' | tr -d ' ' | tr '\n' ' ')
check fleet_filter_has_calls test "$(wc -w <<<"$denied")" -ge 40
P=$(free_port)
# systemd's notification socket (Type=notify, WatchdogSec=): what memtraced says there
python3 - "$TMP/notify.sock" "$TMP/notify.log" <<'PYEOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as f:
    while True:
        f.write(s.recv(4096).decode().replace("\n", " ") + "\n")
PYEOF
notifier=$!
for _ in $(seq 50); do [ -S "$TMP/notify.sock" ] && break; sleep 0.1; done
exec_line=$(sed -n 's/^ExecStart=//p' "$UNIT")
check fleet_unit_reads_options_file grep -q -- "--options-file $TMP/etc/default/memtraced " <<<"$exec_line"
check fleet_unit_reloads grep -q '^ExecReload=/bin/kill -HUP $MAINPID$' "$UNIT"
# the installed options file as shipped but what it selects (redis-server) and the port
sed -i "s|^MEMTRACED_SELECT=.*|MEMTRACED_SELECT=\"--match fleetsvc\"|; s|^MEMTRACED_LISTEN=.*|MEMTRACED_LISTEN=127.0.0.1:$P|" "$ENVF"
(
	export NOTIFY_SOCKET=$TMP/notify.sock WATCHDOG_USEC=1000000 # WatchdogSec=1s
	cmd=${exec_line//%S/$TMP/state}
	eval "exec setpriv --bounding-set -all,$caps --inh-caps -all --no-new-privs $TARGETS/seccomp_deny $denied -- $cmd"
) >"$TMP/svc.out" 2>"$TMP/svc.err" &
svc=$!
for _ in $(seq 100); do grep -q "pid=\"$t\"" <(curl -s "http://127.0.0.1:$P/metrics") && break; sleep 0.1; done
check fleet_service_serves grep -q "pid=\"$t\"" <(curl -s "http://127.0.0.1:$P/metrics")
check fleet_service_confined grep -q "seccomp_deny: [0-9]* system calls fail with EPERM" "$TMP/svc.err"
samples=""
for _ in $(seq 50); do
	samples=$(curl -s "http://127.0.0.1:$P/metrics" | awk -v p="pid=\"$t\"" 'index($0, "memtraced_samples_total{") == 1 && index($0, p) { print $2 }')
	[ "${samples:-0}" -gt 0 ] && break; sleep 0.1
done
check fleet_service_samples_when_confined test "${samples:-0}" -gt 0
sleep 2
check fleet_notify_ready grep -q '^READY=1 STATUS=tracing 1 process$' "$TMP/notify.log"
check fleet_notify_watchdog test "$(grep -c '^WATCHDOG=1$' "$TMP/notify.log")" -ge 3
check fleet_notify_not_inherited_by_parser test -z "$(tr '\0' '\n' <"/proc/$(parser_of "$svc")/environ" 2>/dev/null | grep NOTIFY_SOCKET)"

# systemctl reload (SIGHUP): the options file read again. A file with an error changes
# nothing; a new selection, rate and port: the old process's trace ends with its final
# snapshot, the newly selected one is traced and served on the new port
cp "$ENVF" "$TMP/env.good"
echo 'MEMTRACED_OPTS="--rate nonsense"' >>"$ENVF"
kill -HUP "$svc"
for _ in $(seq 50); do grep -q 'SIGHUP: invalid rate' "$TMP/svc.err" && break; sleep 0.1; done
if grep -q "SIGHUP: invalid rate 'nonsense'.*: the options stay as they were" "$TMP/svc.err"; then pass fleet_reload_bad_file_changes_nothing
else fail fleet_reload_bad_file_changes_nothing "$(grep -m2 SIGHUP "$TMP/svc.err")"; fi
check fleet_reload_bad_file_still_serves grep -q "pid=\"$t\"" <(curl -s "http://127.0.0.1:$P/metrics")
cp "$TARGETS/service_leak" "$TMP/fleetsvc2"
mkdir -p "$TMP/w2"
"$TMP/fleetsvc2" "$TMP/w2" 120 10000 >/dev/null 2>&1 &
t2=$!
wait_file "$TMP/w2/ready" 100
touch "$TMP/w2/go"
P2=$(free_port)
sed "s|^MEMTRACED_SELECT=.*|MEMTRACED_SELECT=\"--match fleetsvc2\"|; s|^MEMTRACED_LISTEN=.*|MEMTRACED_LISTEN=127.0.0.1:$P2|; s|--rate [^ \"]*|--rate 2e-5|" "$TMP/env.good" >"$ENVF"
kill -HUP "$svc"
for _ in $(seq 100); do grep -q "pid=\"$t2\"" <(curl -s "http://127.0.0.1:$P2/metrics") && break; sleep 0.1; done
if grep -q "pid=\"$t2\"" <(curl -s "http://127.0.0.1:$P2/metrics"); then pass fleet_reload_new_selection_served
else fail fleet_reload_new_selection_served "$(grep -E "PID $t2|SIGHUP|error" "$TMP/svc.err" | head -5 | tr '\n' ' ')"; fi
check fleet_reload_old_port_closed test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/metrics")" = 000
check fleet_reload_said grep -q "SIGHUP: options read again from $ENVF: every process is traced anew, served on 127.0.0.1:$P2" "$TMP/svc.err"
check fleet_reload_old_trace_ended grep -q "PID $t: its trace ends with the options it was traced with" "$TMP/svc.err"
check fleet_reload_old_not_traced test -z "$(curl -s "http://127.0.0.1:$P2/metrics" | grep "pid=\"$t\"")"
check fleet_reload_daemon_lives kill -0 "$svc"
n_old=$(ls "$TMP/state/memtraced/" | grep -c "memtrace-$t-.*\.ctf")
kill -TERM "$svc"
wait "$svc"
check fleet_service_stops_cleanly test $? = 0
check fleet_notify_stopping grep -q '^STOPPING=1$' "$TMP/notify.log"
kill "$notifier" 2>/dev/null
check fleet_final_snapshot_in_state_dir test -n "$(ls "$TMP/state/memtraced/" | grep "memtrace-$t2-.*\.ctf")"
check fleet_reload_old_final_snapshot test "${n_old:-0}" -ge 1
touch "$TMP/w/stop" "$TMP/w2/stop"
wait 2>/dev/null
