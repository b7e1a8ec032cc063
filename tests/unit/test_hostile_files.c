/* Files the target controls that are not what they claim: a FIFO or a device where the daemon
 * expects a program, a script's interpreter, a preloaded library. Reading them must fail at
 * once (opening a FIFO for reading blocks until a writer comes; a device can feed us forever),
 * never hang the daemon: an alarm kills this test if anything blocks. */
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "elf/elfobj.h"
#include "sites/allocsyms.h"

static char build_dir[PATH_MAX];

static void find_build_dir(void)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = '\0';
	for (int i = 0; i < 3; i++) { /* exe = BUILD/tests/unit/test_hostile_files */
		char *slash = strrchr(exe, '/');
		if (slash) *slash = '\0';
	}
	snprintf(build_dir, sizeof build_dir, "%s", exe);
}

static struct alloc_sites sites;

/* Copies program to copy with its .symtab's size claiming 2^32 entries (past the end of the
 * file, past the cap). 0 on success. */
static int oversized_symtab_copy(const char *program, const char *copy)
{
	FILE *f = fopen(program, "rb");
	static unsigned char buf[1 << 20];
	size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
	if (f) fclose(f);
	Elf64_Ehdr eh;
	if (n < sizeof eh) return -1;
	memcpy(&eh, buf, sizeof eh);
	int patched = 0;
	for (int i = 0; i < eh.e_shnum; i++) {
		size_t at = eh.e_shoff + (size_t)i * sizeof(Elf64_Shdr);
		Elf64_Shdr sh;
		if (at + sizeof sh > n) return -1;
		memcpy(&sh, buf + at, sizeof sh);
		if (sh.sh_type != SHT_SYMTAB) continue;
		sh.sh_size = (UINT64_C(1) << 32) * sh.sh_entsize;
		memcpy(buf + at, &sh, sizeof sh);
		patched = 1;
	}
	f = fopen(copy, "wb");
	int ok = f && fwrite(buf, 1, n, f) == n;
	if (f) fclose(f);
	chmod(copy, 0755);
	return patched && ok ? 0 : -1;
}

int main(void)
{
	find_build_dir();
	alarm(20); /* a blocked open ends the test with SIGALRM: a failure */
	char dir[] = "/tmp/hostile.XXXXXX", fifo[64], script[64], err[512];
	if (!mkdtemp(dir)) return 1;
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	snprintf(script, sizeof script, "%s/script", dir);
	if (mkfifo(fifo, 0600) != 0) return 1;

	struct elfobj o;
	CHECKF("elfobj_fifo_refused", elfobj_open(&o, fifo, err, sizeof err) != 0 &&
	       strstr(err, "not a regular file"), "err=%s", err);
	CHECKF("elfobj_device_refused", elfobj_open(&o, "/dev/zero", err, sizeof err) != 0 &&
	       strstr(err, "not a regular file"), "err=%s", err);
	char buf[16];
	CHECK("read_regular_fifo_refused", read_regular(fifo, buf, sizeof buf) < 0 && errno == EINVAL);

	int rc = alloc_sites_for_exec(fifo, 0, &sites, err, sizeof err);
	CHECKF("exec_fifo_program_fails", rc != 0 && strstr(err, "not a regular file"), "err=%s", err);

	FILE *f = fopen(script, "w");
	if (f) {
		fprintf(f, "#!%s\n", fifo);
		fclose(f);
	}
	chmod(script, 0755);
	rc = alloc_sites_for_exec(script, 0, &sites, err, sizeof err);
	CHECKF("exec_fifo_interpreter_fails", rc != 0 && err[0], "rc=%d err=%s", rc, err);

	/* a preloaded "library" that is a FIFO: skipped as not found, the program still resolves */
	char program[PATH_MAX + 32];
	snprintf(program, sizeof program, "%s/tests/targets/sites", build_dir);
	setenv("LD_PRELOAD", fifo, 1);
	rc = alloc_sites_for_exec(program, 0, &sites, err, sizeof err);
	unsetenv("LD_PRELOAD");
	CHECKF("exec_fifo_preload_skipped", rc == 0 && sites.n > 0 && strstr(sites.notes, fifo),
	       "rc=%d err=%s notes=%s", rc, err, sites.notes);

	/* a symbol table claiming 2^32 entries: read up to the cap, with a note, and the program
	 * still resolves (its allocator is libc's) */
	char copy[64];
	snprintf(copy, sizeof copy, "%s/big_symtab", dir);
	if (oversized_symtab_copy(program, copy) == 0) {
		rc = alloc_sites_for_exec(copy, 0, &sites, err, sizeof err);
		CHECKF("symtab_over_cap_noted", rc == 0 && sites.n > 0 && strstr(sites.notes, "(the cap)"),
		       "rc=%d err=%s notes=%s", rc, err, sites.notes);
	} else {
		printf("FAIL symtab_over_cap_noted: cannot make the copy of %s\n", program);
		check_failures++;
	}
	unlink(copy);
	unlink(script);
	unlink(fifo);
	rmdir(dir);
	return CHECK_DONE();
}
