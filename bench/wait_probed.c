/* wait_probed: waits until a tracer has put uprobes on a running process's malloc and free.
 *
 *   wait_probed -p PID [-t TIMEOUT_S]
 *
 * Finds where the process's malloc and free are (allocsyms.h: the definitions the dynamic
 * linker binds, e.g. libjemalloc's for redis), snapshots their first bytes through
 * /proc/PID/mem (from the entry to past the probe site memtraced uses), prints "ready",
 * then polls until both have changed (a uprobe writes its int3
 * into the process's copy of the page) and exits 0; exits 1 at the timeout. Start it before
 * the tracer, wait for "ready", then start the tracer. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>

#include "sites/allocsyms.h"

/* From the entry to past the probe site: free-likes are probed after their NULL test (up to
 * ~48 bytes in, jemalloc), other tracers (memleak) probe the entry. */
#define WATCH_BYTES 128

/* The address in PID where file offset `off` of object `path` is mapped, or 0. */
static uint64_t file_offset_to_addr(int pid, const char *path, uint64_t off)
{
	char maps[64], line[4096 + 256];
	snprintf(maps, sizeof maps, "/proc/%d/maps", pid);
	FILE *f = fopen(maps, "r");
	if (!f) return 0;
	uint64_t addr = 0;
	while (!addr && fgets(line, sizeof line, f)) {
		unsigned long long start, end, moff;
		char *p = strchr(line, '/');
		if (!p || sscanf(line, "%llx-%llx %*s %llx", &start, &end, &moff) != 3) continue;
		p[strcspn(p, "\n")] = 0;
		size_t lp = strlen(p), lpath = strlen(path);
		/* path may be reached through /proc/PID/root: compare the tail */
		if (lpath < lp || strcmp(path + lpath - lp, p)) continue;
		if (off >= moff && off < moff + (end - start)) addr = start + (off - moff);
	}
	fclose(f);
	return addr;
}

int main(int argc, char **argv)
{
	int pid = 0;
	double timeout_s = 60;
	for (int c; (c = getopt(argc, argv, "p:t:")) != -1;) {
		if (c == 'p') pid = atoi(optarg);
		else if (c == 't') timeout_s = atof(optarg);
		else pid = -1;
	}
	if (pid <= 0) {
		fprintf(stderr, "usage: wait_probed -p PID [-t TIMEOUT_S]\n");
		return 2;
	}
	static struct alloc_sites as;
	char err[512];
	if (alloc_sites_for_pid(pid, &as, err, sizeof err)) {
		fprintf(stderr, "wait_probed: finding the allocator of %d: %s\n", pid, err);
		return 1;
	}
	char mem_path[64];
	snprintf(mem_path, sizeof mem_path, "/proc/%d/mem", pid);
	int mem = open(mem_path, O_RDONLY);
	if (mem < 0) { fprintf(stderr, "wait_probed: cannot open %s: %s\n", mem_path, strerror(errno)); return 1; }
	uint64_t addr[2] = { 0, 0 };
	unsigned char before[2][WATCH_BYTES], now[WATCH_BYTES];
	for (int i = 0; i < as.n; i++) {
		int k = as.sites[i].fn == AF_MALLOC ? 0 : as.sites[i].fn == AF_FREE ? 1 : -1;
		if (k >= 0) addr[k] = file_offset_to_addr(pid, as.sites[i].path, as.sites[i].entry_offset);
	}
	for (int k = 0; k < 2; k++)
		if (!addr[k] || pread(mem, before[k], WATCH_BYTES, addr[k]) != WATCH_BYTES) {
			fprintf(stderr, "wait_probed: cannot read %s of %d (allocator %s)\n", k ? "free" : "malloc", pid, as.allocator);
			return 1;
		}
	printf("ready allocator=%s\n", as.allocator);
	fflush(stdout);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int changed = 0;
		for (int k = 0; k < 2; k++)
			if (pread(mem, now, WATCH_BYTES, addr[k]) == WATCH_BYTES && memcmp(now, before[k], WATCH_BYTES)) changed++;
		clock_gettime(CLOCK_MONOTONIC, &t);
		double el = (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
		if (changed == 2) { printf("probed_after_s=%.2f\n", el); return 0; }
		if (el > timeout_s) {
			fprintf(stderr, "wait_probed: malloc and free of %d not probed after %.0f s\n", pid, timeout_s);
			return 1;
		}
		if (kill(pid, 0)) { fprintf(stderr, "wait_probed: process %d is gone\n", pid); return 1; }
		usleep(20 * 1000);
	}
}
