# Python frames (tests/test_python.sh, bench/): functions that allocate known amounts from
# known lines, each under two levels of Python callers. Every block is above pymalloc's 512
# bytes, so that malloc sees them all. Modes (argv[1]):
#   three    bytes objects, dict copies and the strings a C extension makes (json.loads),
#            160 MB each, dropped at once; prints "truth FUNCTION BYTES" for each; with
#            argv[2] == "wait" it says "ready" and starts at a line on stdin
#   keep     five lines keep 64, 40, 24, 12 and 6 MB; with argv[2] == "tracemalloc" prints
#            tracemalloc's five top lines ("top<TAB>FILE:LINE<TAB>BYTES") instead
#   threads  8 threads, thread i allocating in its own function t<i>
#   loop     an allocation loop (the bench): argv[2] million bytes(1000) (malloc and free),
#            prints its ns per pair
#   serve    an http.server on 127.0.0.1:argv[2] whose handler allocates (handle_alloc)
#   subinterp  (3.12+) a subinterpreter, run in the main thread, allocates in sub_alloc while
#            the main interpreter allocates in main_alloc before and after it
import json
import sys
import threading

KEYS = ["key%d" % i for i in range(2000)]
DICT = dict.fromkeys(KEYS)
DOC = json.dumps(["x" * 3000] * 50)
MB = 1 << 20


def make_bytes(n):
    for _ in range(n):
        bytes(4000)  # LINE bytes


def make_dicts(n):
    for _ in range(n):
        DICT.copy()  # LINE dicts


def parse_json(n):
    for _ in range(n):
        json.loads(DOC)  # LINE json


def alloc_loop(n):
    for _ in range(n):
        bytes(1000)  # LINE loop


def middle(f, n):
    return f(n)  # LINE middle


def outer(f, n):
    return middle(f, n)  # LINE outer


def three():
    sizes = {
        "make_bytes": sys.getsizeof(bytes(4000)),
        "make_dicts": sys.getsizeof(DICT) - sys.getsizeof({}),
        "parse_json": 50 * sys.getsizeof("x" * 3000),
    }
    for f in (make_bytes, make_dicts, parse_json):
        n = 160 * MB // sizes[f.__name__]
        outer(f, n)
        print("truth %s %d" % (f.__name__, n * sizes[f.__name__]), flush=True)


def keep():
    a = [bytes(4000) for _ in range(64 * MB // 4033)]  # LINE keep64
    b = [bytearray(5000) for _ in range(40 * MB // 5057)]  # LINE keep40
    c = [DICT.copy() for _ in range(24 * MB // 54000)]  # LINE keep24
    d = [bytes(2000) for _ in range(12 * MB // 2033)]  # LINE keep12
    e = [bytearray(1500) for _ in range(6 * MB // 1557)]  # LINE keep6
    return a, b, c, d, e


# t0 .. t7, one function per thread, each at its own line
for _i in range(8):
    exec("def t%d(n):\n    for _ in range(n):\n        bytearray(%d)\n" % (_i, 3000 + 64 * _i))


def threads(n):
    ts = [threading.Thread(target=globals()["t%d" % i], args=(n,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def serve(port):
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def handle_alloc(self):
            return [bytes(8000) for _ in range(64)]  # LINE handler

        def do_GET(self):
            body = b"%d\n" % len(self.handle_alloc())
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", port), Handler)
    print("serving", flush=True)
    srv.serve_forever()


SUB = """
def sub_alloc(n):
    for _ in range(n):
        bytes(6000)
sub_alloc(%d)
"""


def main_alloc(n):
    for _ in range(n):
        bytes(7000)  # LINE main_alloc


def subinterp(n):
    try:
        import _interpreters as si  # 3.13
    except ImportError:
        import _xxsubinterpreters as si  # 3.12
    main_alloc(n)
    interp = si.create()
    si.run_string(interp, SUB % n)
    main_alloc(n)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "three"
    if mode == "three":
        if len(sys.argv) > 2 and sys.argv[2] == "wait":  # for -p: starts at a line on stdin
            print("ready", flush=True)
            sys.stdin.readline()
        three()
    elif mode == "keep":
        if len(sys.argv) > 2 and sys.argv[2] == "tracemalloc":
            import tracemalloc
            tracemalloc.start()
            kept = keep()
            top = tracemalloc.take_snapshot().statistics("lineno")[:5]
            for s in top:
                print("top\t%s:%d\t%d" % (s.traceback[0].filename, s.traceback[0].lineno, s.size))
            del kept
        else:
            kept = keep()
            print("kept", flush=True)
    elif mode == "threads":
        threads(int(sys.argv[2]) if len(sys.argv) > 2 else 4000)
    elif mode == "loop":
        import time
        n = int(float(sys.argv[2]) * 1000000) if len(sys.argv) > 2 else 1000000
        t0 = time.perf_counter_ns()
        outer(alloc_loop, n)
        print("loop_ns_per_pair %.1f" % ((time.perf_counter_ns() - t0) / n), flush=True)
    elif mode == "subinterp":
        subinterp(int(sys.argv[2]) if len(sys.argv) > 2 else 20000)
    elif mode == "serve":
        serve(int(sys.argv[2]))
    print("done", flush=True)


if __name__ == "__main__":
    main()
