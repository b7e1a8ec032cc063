/* A plugin unloaded under memtraced --inject and another object mapped at its address
 * (issue 34): the agent's code cave may lie in the first plugin.
 *   inject_cave DIR PLUGIN1 PLUGIN2
 * Fills the tail of the executable segment's last page (a cave) of every object it starts with
 * (itself, libc, ld.so) with int3 bytes, so that the only cave left is in PLUGIN1, dlopens
 * PLUGIN1, prints
 * "ready"; when DIR/swap appears, dlcloses it and dlopens PLUGIN2 (a copy: it lands at the same
 * address), prints "swapped SAME|MOVED"; when DIR/stop appears, calls PLUGIN2 and exits 0 with
 * "result ok". A stub run in the old cave would run PLUGIN2's bytes: SIGSEGV or SIGILL. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void wait_file(const char *dir, const char *name)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	while (access(p, F_OK) != 0) usleep(2000);
}

static int spoil_caves(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	int *spoiled = data;
	if (strstr(info->dlpi_name, "vdso")) return 0;
	long page = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
		uintptr_t end = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		uintptr_t pg = end & ~(uintptr_t)(page - 1);
		if (end == pg) continue;
		if (mprotect((void *)pg, page, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) continue;
		memset((void *)end, 0xcc, pg + page - end);
		mprotect((void *)pg, page, PROT_READ | PROT_EXEC);
		(*spoiled)++;
	}
	return 0;
}

static uintptr_t base_of(void *h)
{
	struct link_map *lm = NULL;
	return dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm ? (uintptr_t)lm->l_addr : 0;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: inject_cave DIR PLUGIN1 PLUGIN2\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int spoiled = 0;
	dl_iterate_phdr(spoil_caves, &spoiled);
	if (spoiled < 3) {
		printf("result FAILED filled %d caves of 3\n", spoiled);
		return 1;
	}
	void *h = dlopen(argv[2], RTLD_NOW);
	if (!h) {
		printf("result FAILED %s\n", dlerror());
		return 1;
	}
	uintptr_t first = base_of(h);
	printf("ready\n");
	wait_file(argv[1], "swap");
	dlclose(h);
	h = dlopen(argv[3], RTLD_NOW);
	if (!h) {
		printf("result FAILED %s\n", dlerror());
		return 1;
	}
	printf("swapped %s\n", base_of(h) == first ? "SAME" : "MOVED");
	wait_file(argv[1], "stop");
	unsigned long (*work)(void) = (unsigned long (*)(void))dlsym(h, "op_plugin_work");
	if (!work || work() != 140) {
		printf("result FAILED the plugin's work\n");
		return 1;
	}
	printf("result ok\n");
	return 0;
}
