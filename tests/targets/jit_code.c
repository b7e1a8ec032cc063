/* Frames in code that no object on disk names (issue 21): two pieces of "JIT code" in anonymous
 * executable memory, each a frame (push rbp; mov rbp, rsp; call rsi; pop rbp; ret) that calls
 * malloc, one of them listed in /tmp/perf-PID.map as "JS:named_jit_fn"; and a function of this
 * executable called through a second mapping of the executable's own file far from the first
 * (as node maps its builtins again), which must be named as that function. Sizes tell them
 * apart: 1111 (named JIT), 2222 (unnamed JIT), 3333 (the copy), 4444 (the function itself).
 * Prints the anonymous region's name as the maps show it. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

typedef void *(*alloc_fn)(size_t);
typedef void *(*frame_fn)(size_t, alloc_fn);

/* Calls fn through the pointer given (no call relative to this file: it runs in the copy too). */
__attribute__((noinline)) void *copied_alloc(size_t n, alloc_fn fn)
{
	void *p = fn(n);
	__asm__ volatile("" : : "r"(p) : "memory"); /* no tail call: this frame stays */
	return p;
}

/* Maps the pages of this file that hold copied_alloc a second time; its address there. */
static frame_fn copy_of_function(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	uintptr_t at = (uintptr_t)copied_alloc, start, end, off;
	frame_fn fn = NULL;
	while (f && fgets(line, sizeof line, f)) {
		if (sscanf(line, "%lx-%lx %*s %lx", &start, &end, &off) != 3 || at < start || at >= end)
			continue;
		uintptr_t file_off = off + (at - start), page = file_off & ~(uintptr_t)4095;
		int fd = open("/proc/self/exe", O_RDONLY);
		void *m = mmap(NULL, 8192, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, (off_t)page);
		close(fd);
		if (m != MAP_FAILED)
			fn = (frame_fn)((char *)m + (file_off - page));
		break;
	}
	if (f)
		fclose(f);
	return fn;
}

int main(void)
{
	static const unsigned char frame[] = {0x55, 0x48, 0x89, 0xe5, 0xff, 0xd6, 0x5d, 0xc3};
	unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED)
		return 1;
	memcpy(code, frame, sizeof frame);
	memcpy(code + 256, frame, sizeof frame);
	if (mprotect(code, 4096, PROT_READ | PROT_EXEC) != 0)
		return 1;
	char name[64] = "[anon:jit]";
	if (prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)code, 4096,
		  (unsigned long)"test-jit") == 0)
		snprintf(name, sizeof name, "[anon:test-jit]");
	printf("region %s\n", name);

	char path[64];
	snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
	FILE *pm = fopen(path, "w");
	if (!pm)
		return 1;
	fprintf(pm, "%lx 8 JS:named_jit_fn /srv/app.js:12\n", (unsigned long)(uintptr_t)code);
	fclose(pm);

	frame_fn named = (frame_fn)code, unnamed = (frame_fn)(code + 256), copy = copy_of_function();
	if (!copy)
		return 1;
	for (int i = 0; i < 50; i++) {
		free(named(1111, malloc));
		free(unnamed(2222, malloc));
		free(copy(3333, malloc));
		free(copied_alloc(4444, malloc));
	}
	fflush(stdout);
	return 0;
}
