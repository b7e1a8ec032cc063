# A Python program whose memory is mostly not malloc'ed blocks: pymalloc's arenas (anonymous
# mmap) hold its small objects. For tests/test_mmap.sh: builds about 150 MB of objects (small
# ones in arenas, 1 MiB buffers that glibc maps), says "peak" and waits for a line on stdin,
# drops two thirds of both (whole arenas and the buffers' mappings go back to the system),
# says "end", waits again.
import sys

rows = [(i, str(i) * 3, float(i)) for i in range(600000)]
blobs = [bytearray(1 << 20) for _ in range(60)]
print("peak", flush=True)
sys.stdin.readline()
del rows[: 400000]
del blobs[: 40]
print("end", flush=True)
sys.stdin.readline()
