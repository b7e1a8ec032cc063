/* libFuzzer target of the code that reads the target's ELF files: the input is an executable
 * (or a "#!" script). It is written to a file and resolved through alloc_sites_for_exec, the
 * daemon's entry for `memtraced -- CMD`: elf/elfobj.c, elf/ldso.c for a dynamic program (its
 * DT_NEEDED, RPATH and RUNPATH searched on this machine), then sites/: allocator discovery,
 * forwarders, probe-site choice and the allocator's name. Then each elfobj reader on its own,
 * and probe_site_choose over the code of the first functions it exports. Any crash,
 * sanitizer report, hang or broken API invariant is a finding. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf/elfobj.h"
#include "sites/allocsyms.h"
#include "sites/probesite.h"

static char exe_path[64];

static void broken(const char *what)
{
	fprintf(stderr, "fuzz_elf: API invariant broken: %s\n", what);
	abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* the search must not depend on the environment the fuzzer runs in */
	unsetenv("LD_PRELOAD");
	unsetenv("LD_LIBRARY_PATH");
	char dir[] = "/tmp/fuzz_elf.XXXXXX";
	if (!mkdtemp(dir)) abort();
	snprintf(exe_path, sizeof exe_path, "%s/exe", dir);
	return 0;
}

static int write_input(const uint8_t *data, size_t size)
{
	int fd = open(exe_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (fd < 0) return -1;
	int ok = write(fd, data, size) == (ssize_t)size;
	close(fd);
	return ok ? 0 : -1;
}

struct walk {
	const struct elfobj *o;
	int seen;
};

/* probe_site_choose over each of the first exported functions, as an allocation function
 * (even ones) or a free-like one (odd ones). */
static int each_function(void *ctx, const struct elf_function *f)
{
	struct walk *w = ctx;
	if (!f->name || f->name_len > strlen(f->name)) broken("function name length");
	uint64_t off;
	uint8_t code[256];
	if (elfobj_vaddr_to_offset(w->o, f->vaddr, &off) == 0) {
		ssize_t got = pread(w->o->fd, code, sizeof code, (off_t)off);
		if (got > 0) {
			bool emulated;
			uint64_t at = probe_site_choose(w->seen % 2 ? AF_FREE : AF_MALLOC, code, (size_t)got,
							f->vaddr, f->size, &emulated);
			if (at >= (uint64_t)got) broken("probe site past the code read");
		}
	}
	return ++w->seen >= 16;
}

static void read_alone(void)
{
	struct elfobj o;
	char err[256];
	if (elfobj_open(&o, exe_path, err, sizeof err) != 0) {
		if (!err[0]) broken("elfobj_open failed without a message");
		return;
	}
	struct walk w = {.o = &o};
	elfobj_each_function(&o, true, each_function, &w);
	struct elf_dynamic d;
	if (elfobj_dynamic(&o, &d) == 0)
		for (int i = 0; i < d.n_needed; i++)
			if (!d.needed[i]) broken("NULL DT_NEEDED");
	elf_dynamic_free(&d);
	char version[16];
	if (elfobj_glibc_version(&o, version, sizeof version) == 0 && strlen(version) >= sizeof version)
		broken("glibc version overflows");
	elfobj_close(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (write_input(data, size) != 0) return 0;
	static struct alloc_sites sites;
	char err[512] = "";
	if (alloc_sites_for_exec(exe_path, 0, &sites, err, sizeof err) == 0) {
		if (sites.n < 1 || sites.n > MAX_PROBE_SITES) broken("site count");
		for (int i = 0; i < sites.n; i++) {
			const struct probe_site *p = &sites.sites[i];
			if (p->probe_offset < p->entry_offset || p->probe_offset - p->entry_offset >= 65536)
				broken("probe offset outside the function");
			if ((unsigned)p->fn >= AF_COUNT) broken("bad function");
		}
		if (!memchr(sites.allocator, 0, sizeof sites.allocator) || !sites.allocator[0])
			broken("allocator name");
	} else if (!err[0]) {
		broken("failed without a message");
	}
	if (!memchr(sites.notes, 0, sizeof sites.notes)) broken("notes not terminated");
	read_alone();
	return 0;
}
