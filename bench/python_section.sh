# bench/run.sh's python section (sourced): what Python frames cost (issue 25).
#   python_pair_ns_none, python_pair_ns_no, python_pair_ns_auto
#       an allocation loop in Debian's python3.11 (tests/targets/py_frames.py loop: bytes(1000)
#       made and freed, under two Python callers), ns per pair as the program times its loop:
#       untraced, under memtraced --python=no and under memtraced (Python frames) at the
#       default rate; medians of interleaved rounds
#   python_pair_ratio  auto over no, median of per-round ratios (goal: within 10 %, <= 1.10)
#   python_frames_us_per_sample
#       the same loop at --rate 1 (every allocation sampled): the difference of the two modes'
#       ns per pair, in microseconds, is what the BPF walk of the Python frames adds to a sample
python_section() {
	local py=/usr/bin/python3.11 prog=$TOP/tests/targets/py_frames.py d=$TMP/python
	[ "$have_memtraced" = 1 ] && [ -x "$py" ] || { na python_pair_ratio "memtraced or Debian's python3.11 is missing"; return; }
	mkdir -p "$d"
	local r mode v
	: >"$d/no"; : >"$d/auto"; : >"$d/none"; : >"$d/no1"; : >"$d/auto1"
	for r in $(seq "$ROUNDS"); do
		v=$("$py" "$prog" loop 1 </dev/null | sed -n 's/^loop_ns_per_pair //p')
		echo "${v:-x}" >>"$d/none"
		for mode in no auto; do
			v=$("$MEMTRACED" -q --python=$mode -o "$d/t.ctf" -- "$py" "$prog" loop 1 </dev/null 2>>"$d/err" |
				sed -n 's/^loop_ns_per_pair //p')
			echo "${v:-x}" >>"$d/$mode"
			v=$("$MEMTRACED" -q --rate 1 --python=$mode -o "$d/t.ctf" -- "$py" "$prog" loop 0.05 </dev/null 2>>"$d/err" |
				sed -n 's/^loop_ns_per_pair //p')
			echo "${v:-x}" >>"$d/${mode}1"
		done
		log "python round $r: none $(tail -1 "$d/none") no $(tail -1 "$d/no") auto $(tail -1 "$d/auto") ns; rate 1: no $(tail -1 "$d/no1") auto $(tail -1 "$d/auto1")"
	done
	# shellcheck disable=SC2046
	set_result python_pair_ns_none "$(median $(cat "$d/none"))"
	# shellcheck disable=SC2046
	set_result python_pair_ns_no "$(median $(cat "$d/no"))"
	# shellcheck disable=SC2046
	set_result python_pair_ns_auto "$(median $(cat "$d/auto"))"
	set_result python_pair_ratio "$(median_ratio "$d/auto" "$d/no")"
	note python_pair_ratio "py_frames.py loop (bytes(1000) under two Python callers) in Debian's python3.11 at the default rate: Python frames over --python=no, median of per-round ratios (goal <= 1.10)"
	local diffs
	diffs=$(paste -d' ' "$d/auto1" "$d/no1" | awk 'NF == 2 && $1 != "x" && $2 != "x" { printf "%.3f\n", ($1 - $2) / 1000 }')
	# shellcheck disable=SC2086
	set_result python_frames_us_per_sample "$(median $diffs)"
	note python_frames_us_per_sample "the same loop at --rate 1: (ns per pair with Python frames - with --python=no) / 1000, median of per-round differences; the stack copy and the ring buffer are paid by both"
}
