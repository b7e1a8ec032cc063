/* Finding functions in a running process: its link map (r_debug, reached through the
 * executable's DT_DEBUG, as sites/allocsyms.c reads it) lists the loaded objects in load order,
 * with their load bias; each object's .dynsym is read from its file by the parser
 * (pfacts_of: the daemon parses no file of a target). The first default-version definition in load order is the one a
 * program's own call binds to. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "door/door.h"
#include "protocol/facts.h"
#include "inject_int.h"
#include "parser/parser.h"

void inject_err(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen) return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int inject_mem_open(pid_t pid, bool writable)
{
	return door_proc_open(pid, "mem", writable);
}

int inject_mem_read(int fd, uint64_t addr, void *buf, size_t len)
{
	return pread(fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

int inject_mem_write(int fd, uint64_t addr, const void *buf, size_t len)
{
	return pwrite(fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

int inject_mem_read_str(int fd, uint64_t addr, char *buf, size_t len)
{
	size_t got = 0;
	while (got + 1 < len) {
		/* small reads: the string may end just before an unmapped page */
		size_t chunk = len - 1 - got < 64 ? len - 1 - got : 64;
		ssize_t n = pread(fd, buf + got, chunk, (off_t)(addr + got));
		if (n <= 0) break;
		void *nul = memchr(buf + got, 0, n);
		if (nul) return 0;
		got += n;
	}
	buf[got] = 0;
	return got ? 0 : -1;
}

/* The file mapped at addr in pid, from /proc/PID/maps ("" if anonymous or special). */
static int mapped_file(pid_t pid, uint64_t addr, char *path, size_t len)
{
	char line[4352];
	FILE *f = door_proc_fopen(pid, "maps");
	if (!f) return -1;
	int rc = -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end;
		int pos = 0;
		if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %n", &start, &end, &pos) < 2 || !pos) continue;
		if (addr < start || addr >= end) continue;
		char *p = line + pos;
		p[strcspn(p, "\n")] = 0;
		snprintf(path, len, "%s", p[0] == '/' ? p : "");
		rc = 0;
		break;
	}
	fclose(f);
	return rc;
}

/* The default-version definition of name in o's .dynsym (st_value, unrelocated). */
/* The definitions of name in pid's link map, in its order: up to max into addrs (the first
 * one's object into where). Their count, or -1 with err. */
static int find_definitions(pid_t pid, const char *name, uint64_t *addrs, int max, char *where,
                            size_t wherelen, char *err, size_t errlen)
{
	char path[PATH_MAX];
	uint64_t at_phdr = 0, at_phnum = 0, auxv[2];
	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)pid);
	FILE *f = door_proc_fopen(pid, "auxv");
	if (!f) {
		inject_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	while (fread(auxv, sizeof(auxv), 1, f) == 1 && auxv[0] != AT_NULL) {
		if (auxv[0] == AT_PHDR) at_phdr = auxv[1];
		if (auxv[0] == AT_PHNUM) at_phnum = auxv[1];
	}
	fclose(f);
	int fd = inject_mem_open(pid, false);
	if (fd < 0) {
		inject_err(err, errlen, "cannot open /proc/%d/mem: %s", (int)pid, strerror(errno));
		return -1;
	}
	int rc = -1, objects = 0, found = 0;
	Elf64_Phdr ph[64];
	uint64_t bias = 0, dyn = 0, dyn_size = 0, r_debug = 0, lm = 0;
	if (!at_phdr || !at_phnum || at_phnum > 64 ||
	    inject_mem_read(fd, at_phdr, ph, at_phnum * sizeof(ph[0])) != 0) {
		inject_err(err, errlen, "pid %d: cannot read its program headers", (int)pid);
		goto out;
	}
	for (uint64_t i = 0; i < at_phnum; i++) {
		if (ph[i].p_type == PT_PHDR) bias = at_phdr - ph[i].p_vaddr;
		if (ph[i].p_type == PT_DYNAMIC) dyn = ph[i].p_vaddr, dyn_size = ph[i].p_memsz;
	}
	for (uint64_t i = 0; dyn && i < dyn_size / sizeof(Elf64_Dyn) && i < 1024; i++) {
		Elf64_Dyn d;
		if (inject_mem_read(fd, bias + dyn + i * sizeof(d), &d, sizeof(d)) != 0 ||
		    d.d_tag == DT_NULL)
			break;
		if (d.d_tag == DT_DEBUG) r_debug = d.d_un.d_ptr;
	}
	if (!r_debug || inject_mem_read(fd, r_debug + 8, &lm, sizeof(lm)) != 0 || !lm) {
		inject_err(err, errlen, "pid %d has no link map (static, or ld.so has not run yet)",
		           (int)pid);
		goto out;
	}
	for (int n = 0; lm && n < 4096; n++) {
		uint64_t e[4]; /* struct link_map: l_addr, l_name, l_ld, l_next */
		if (inject_mem_read(fd, lm, e, sizeof(e)) != 0) break;
		lm = e[3];
		char file[PATH_MAX - 64], open_path[PATH_MAX];
		if (mapped_file(pid, e[2], file, sizeof(file)) != 0 || !file[0]) continue;
		/* through the target's root: right in another mount namespace too */
		snprintf(open_path, sizeof(open_path), "/proc/%d/root%s", (int)pid, file);
		struct elf_facts facts;
		char oerr[256];
		/* its .dynsym is read by the parser: the daemon parses no file of a target */
		if (pfacts_of(pid, open_path, name, &facts, oerr, sizeof(oerr)) != 0) continue;
		objects++;
		if (facts.sym_found) {
			if (!found && where) snprintf(where, wherelen, "%s", file);
			addrs[found++] = e[0] + facts.sym_value;
			if (found == max) break;
		}
	}
	rc = found;
	if (!found)
		inject_err(err, errlen, "pid %d: no object of %d in its link map exports %s",
		           (int)pid, objects, name);
out:
	close(fd);
	return rc;
}

int inject_find_symbol(pid_t pid, const char *name, uint64_t *addr, char *where,
                       size_t wherelen, char *err, size_t errlen)
{
	return find_definitions(pid, name, addr, 1, where, wherelen, err, errlen) > 0 ? 0 : -1;
}

int inject_find_definitions(pid_t pid, const char *name, uint64_t *addrs, int max, char *err,
                            size_t errlen)
{
	return find_definitions(pid, name, addrs, max, NULL, 0, err, errlen);
}

int inject_find_syscall_insn(pid_t pid, uint64_t *addr, char *err, size_t errlen)
{
	char mp[64], line[4352];
	snprintf(mp, sizeof(mp), "/proc/%d/maps", (int)pid);
	FILE *f = door_proc_fopen(pid, "maps");
	if (!f) {
		inject_err(err, errlen, "cannot read %s: %s", mp, strerror(errno));
		return -1;
	}
	int fd = inject_mem_open(pid, false);
	int rc = -1;
	/* the vDSO first (its clock_gettime fallback holds one), then file-backed code */
	for (int pass = 0; pass < 2 && rc != 0 && fd >= 0; pass++) {
		rewind(f);
		while (rc != 0 && fgets(line, sizeof(line), f)) {
			unsigned long long start, end;
			char perms[8];
			int pos = 0;
			if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &start, &end, perms, &pos) < 3)
				continue;
			if (perms[2] != 'x' || (pass == 0) != (strstr(line + pos, "[vdso]") != NULL))
				continue;
			size_t len = end - start < (1 << 20) ? end - start : (1 << 20);
			uint8_t *buf = malloc(len);
			if (buf && inject_mem_read(fd, start, buf, len) == 0) {
				uint8_t *hit = memmem(buf, len, "\x0f\x05", 2);
				if (hit) {
					*addr = start + (hit - buf);
					rc = 0;
				}
			}
			free(buf);
		}
	}
	if (fd >= 0) close(fd);
	fclose(f);
	if (rc != 0) inject_err(err, errlen, "pid %d: no syscall instruction found in its code", (int)pid);
	return rc;
}
