# Reads `memtrace-dump` output of a traced tests/targets/py_frames.py for tests/test_python.sh.
# Stacks in the dump are outermost first: "FILE:LINE:C-C DEFNAME | ...".
#   py_stacks.py DUMP RATE SOURCE three    per function of "three": its estimated bytes, the
#                                          share of its samples whose Python chain is whole
#                                          (outer, middle, the function, at their lines), and
#                                          for parse_json the share whose C extension's frames
#                                          lie inside json's raw_decode frame
#   py_stacks.py DUMP RATE SOURCE top      the five lines of the innermost Python frames that
#                                          allocated most: "top<TAB>FILE:LINE<TAB>BYTES"
#   py_stacks.py DUMP RATE SOURCE threads  "threads N BAD": samples of t0..t7's sizes in threads,
#                                          and those whose innermost Python frame is not their
#                                          thread's function
#   py_stacks.py DUMP RATE SOURCE subinterp  "subinterp N BAD": samples of sub_alloc's and
#                                          main_alloc's sizes, those not in their function
#   py_stacks.py DUMP RATE SOURCE find NAME LINE  samples with a frame NAME at SOURCE:LINE
import re
import sys

dump, rate, source, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
lines = {}
for i, text in enumerate(open(source), 1):
    m = re.search(r"# LINE (\w+)", text)
    if m:
        lines[m.group(1)] = i

FRAME = re.compile(r"^(.*?):(\d+):\d+-\d+ (.*)$")
allocs = []
for text in open(dump):
    m = re.match(r"\S+ alloc id=\d+ len=(\d+) nsamples=(\d+) .*?bt=\d+: (.*)$", text.rstrip("\n"))
    if not m:
        continue
    frames = []
    for f in m.group(3).split(" | "):
        fm = FRAME.match(f.strip())
        frames.append((fm.group(1), int(fm.group(2)), fm.group(3)) if fm else (f, 0, ""))
    allocs.append((int(m.group(1)), int(m.group(2)), frames))

per_sample = 8 / rate


def ours(f):
    return f[0].endswith("/py_frames.py")


def innermost_python(frames):
    # a Python file, frozen or exec'd code ("<frozen ...>", "<string>"), not memtraced's
    # own markers
    for f in reversed(frames):
        if f[0].endswith(".py") or (f[0].startswith("<") and
                                    f[0] not in ("<unknown>", "<truncated>", "<python>")):
            return f
    return None


def innermost_is(sizes, mine):
    """Samples of the sizes (in words: the function they should be in) that mine(function,
    frames) keeps, and those whose innermost Python frame is not that function."""
    n = bad = 0
    for words, _, frames in allocs:
        if words in sizes and mine(sizes[words], frames):
            n += 1
            f = innermost_python(frames)
            if not f or f[2] != sizes[words]:
                bad += 1
    return n, bad


if mode == "three":
    want = {"make_bytes": "bytes", "make_dicts": "dicts", "parse_json": "json"}
    for fn, tag in want.items():
        est = whole = native_ok = n = 0
        for _, ns, frames in allocs:
            mine = [f for f in frames if ours(f)]
            if not mine or mine[-1][2] != fn:
                continue
            n += 1
            est += ns * per_sample
            tail = [(f[2], f[1]) for f in mine[-3:]]
            if tail == [("outer", lines["outer"]), ("middle", lines["middle"]), (fn, lines[tag])]:
                whole += 1
            if fn == "parse_json":
                names = [f[2] for f in frames]
                files = [f[0] for f in frames]
                rd = max((i for i, x in enumerate(names) if x.endswith("raw_decode")), default=-1)
                ext = [i for i, x in enumerate(files) if "_json" in x.rsplit("/", 1)[-1]]
                if rd >= 0 and ext and min(ext) > rd:
                    native_ok += 1
        print("%s %d %.3f %.3f" % (fn, est, whole / max(n, 1), native_ok / max(n, 1)))
elif mode == "top":
    by = {}
    for _, ns, frames in allocs:
        f = innermost_python(frames)
        if f:
            key = "%s:%d" % (f[0], f[1])
            by[key] = by.get(key, 0) + ns * per_sample
    for key, b in sorted(by.items(), key=lambda kv: -kv[1])[:5]:
        print("top\t%s\t%d" % (key, b))
elif mode == "threads":
    # bytearray(3000 + 64 * i): a buffer of 3001 + 64 * i bytes; a thread's samples (the
    # program's other blocks of these sizes are not)
    sizes = {(3001 + 64 * i + 7) // 8: "t%d" % i for i in range(8)}
    n, bad = innermost_is(sizes, lambda fn, frames: any(f[2] == "Thread.run" for f in frames))
    print("threads %d %d" % (n, bad))
elif mode == "subinterp":
    # bytes(6000) in the subinterpreter's sub_alloc, bytes(7000) in the main one's main_alloc
    # The subinterpreter's samples are those under interp_run_string (the module's C function
    # that runs it); the main interpreter's, those of subinterp() that are not: other blocks
    # of these sizes (the interpreter's own, while it makes the subinterpreter) are neither.
    def mine(fn, frames):
        in_sub = any(f[2].endswith("run_string") and "interpreters" in f[0] for f in frames)
        in_main = any(ours(f) and f[2] == "subinterp" for f in frames) and not in_sub
        return in_sub if fn == "sub_alloc" else in_main
    sizes = {(6033 + 7) // 8: "sub_alloc", (7033 + 7) // 8: "main_alloc"}
    n, bad = innermost_is(sizes, mine)
    print("subinterp %d %d" % (n, bad))
elif mode == "find":
    name, line = sys.argv[5], int(sys.argv[6])
    print(sum(1 for _, _, frames in allocs
              if any(ours(f) and f[2].endswith(name) and f[1] == line for f in frames)))
