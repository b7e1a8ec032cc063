/* One uncompressed copy per compressed debug file, shared by every unwinder (debug_copy.h). */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "debug_copy.h"

#define MAX_COPIES 64                   /* files copied at most (then libdw decompresses) */
#define MAX_COPY_BYTES (4ull << 30)      /* no copy of a file whose sections exceed this */

struct copy {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	int fd; /* the memfd, or -1: this file is not worth copying (none compressed, not ELF) */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct copy copies[MAX_COPIES];
static int ncopies;

/* Whether e has a compressed section, and the sum of the section sizes once uncompressed. */
static bool compressed(Elf *e, uint64_t *bytes)
{
	bool any = false;
	*bytes = 0;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh)) return false;
		if (sh.sh_flags & SHF_COMPRESSED) {
			GElf_Chdr ch;
			if (!gelf_getchdr(scn, &ch)) return false;
			*bytes += ch.ch_size;
			any = true;
		} else if (sh.sh_type != SHT_NOBITS) {
			*bytes += sh.sh_size;
		}
	}
	return any;
}

/* Where file offset off of the input is in the copy: in the same section, or unchanged when
 * no section with bytes holds it. The program headers point into sections (libdw reads the
 * build-id note through PT_NOTE). */
struct place { GElf_Off old_off, old_size, new_off; bool bytes; };

static GElf_Off moved(const struct place *pl, size_t n, GElf_Off off)
{
	for (size_t i = 0; i < n; i++)
		if (pl[i].bytes && off >= pl[i].old_off && off < pl[i].old_off + pl[i].old_size)
			return pl[i].new_off + (off - pl[i].old_off);
	return off;
}

/* in, with its compressed sections decompressed, written into a new memfd; -1 on failure.
 * The layout is ours (ELF_F_LAYOUT): the sections in order after the headers, each at its
 * alignment, then the section header table. */
static int write_copy(Elf *in)
{
	GElf_Ehdr eh;
	size_t phnum, shnum, shstrndx;
	if (!gelf_getehdr(in, &eh) || elf_getphdrnum(in, &phnum) || elf_getshdrnum(in, &shnum) ||
	    elf_getshdrstrndx(in, &shstrndx) || shstrndx >= SHN_LORESERVE || shnum >= SHN_LORESERVE)
		return -1;
	struct place *pl = calloc(shnum ? shnum : 1, sizeof(*pl));
	int fd = pl ? memfd_create("memtraced-debug", MFD_CLOEXEC) : -1;
	if (fd < 0) {
		free(pl);
		return -1;
	}
	Elf *out = elf_begin(fd, ELF_C_WRITE, NULL);
	bool ok = out && gelf_newehdr(out, gelf_getclass(in)) && (!phnum || gelf_newphdr(out, phnum));
	size_t ehsize = ok ? gelf_fsize(out, ELF_T_EHDR, 1, EV_CURRENT) : 0;
	size_t phentsize = ok ? gelf_fsize(out, ELF_T_PHDR, 1, EV_CURRENT) : 0;
	GElf_Off off = ehsize + phnum * phentsize;
	size_t n = 0;
	for (Elf_Scn *scn = NULL; ok && (scn = elf_nextscn(in, scn)) && n < shnum; n++) {
		GElf_Shdr sh;
		ok = gelf_getshdr(scn, &sh) != NULL;
		if (!ok) break;
		pl[n] = (struct place){.old_off = sh.sh_offset, .old_size = sh.sh_size,
				       .bytes = sh.sh_type != SHT_NOBITS && !(sh.sh_flags & SHF_COMPRESSED)};
		if (sh.sh_flags & SHF_COMPRESSED)
			ok = elf_compress(scn, 0, 0) >= 0 && gelf_getshdr(scn, &sh) != NULL;
		Elf_Scn *o = ok ? elf_newscn(out) : NULL;
		ok = o != NULL;
		for (Elf_Data *d = NULL; ok && sh.sh_type != SHT_NOBITS && (d = elf_getdata(scn, d));) {
			Elf_Data *nd = elf_newdata(o);
			if (!nd) ok = false;
			else *nd = *d; /* d_buf stays in's: valid until elf_end(in), after the write */
		}
		if (sh.sh_type != SHT_NOBITS) {
			GElf_Off align = sh.sh_addralign > 1 ? sh.sh_addralign : 1;
			off = (off + align - 1) / align * align;
		}
		sh.sh_offset = pl[n].new_off = off;
		if (sh.sh_type != SHT_NOBITS) off += sh.sh_size;
		ok = ok && gelf_update_shdr(o, &sh);
	}
	for (size_t i = 0; ok && i < phnum; i++) {
		GElf_Phdr ph;
		ok = gelf_getphdr(in, (int)i, &ph) != NULL;
		if (ok && ph.p_filesz) ph.p_offset = moved(pl, n, ph.p_offset);
		ok = ok && gelf_update_phdr(out, (int)i, &ph);
	}
	if (ok) {
		GElf_Ehdr oh = eh;
		oh.e_phoff = phnum ? ehsize : 0;
		oh.e_shoff = (off + 7) / 8 * 8;
		oh.e_ehsize = (GElf_Half)ehsize;
		oh.e_phentsize = (GElf_Half)phentsize;
		oh.e_shentsize = (GElf_Half)gelf_fsize(out, ELF_T_SHDR, 1, EV_CURRENT);
		oh.e_phnum = (GElf_Half)phnum;
		oh.e_shnum = (GElf_Half)(n + 1);
		oh.e_shstrndx = (GElf_Half)shstrndx;
		elf_flagelf(out, ELF_C_SET, ELF_F_LAYOUT);
		ok = gelf_update_ehdr(out, &oh) && elf_update(out, ELF_C_WRITE) >= 0;
	}
	if (out) elf_end(out);
	free(pl);
	if (!ok) {
		close(fd);
		return -1;
	}
	return fd;
}

static int make_copy(int fd)
{
	Elf *in = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	uint64_t bytes;
	int copy = -1;
	if (in && elf_kind(in) == ELF_K_ELF && compressed(in, &bytes) && bytes <= MAX_COPY_BYTES)
		copy = write_copy(in);
	if (in) elf_end(in);
	return copy;
}

int debug_copy_uncompressed(int fd)
{
	struct stat sb;

	if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) return fd;
	pthread_mutex_lock(&lock);
	struct copy *c = NULL;
	for (int i = 0; i < ncopies && !c; i++) {
		struct copy *k = &copies[i];
		if (k->dev == sb.st_dev && k->ino == sb.st_ino && k->size == sb.st_size &&
		    k->mtime.tv_sec == sb.st_mtim.tv_sec && k->mtime.tv_nsec == sb.st_mtim.tv_nsec)
			c = k;
	}
	if (!c && ncopies < MAX_COPIES) {
		c = &copies[ncopies++];
		*c = (struct copy){.dev = sb.st_dev, .ino = sb.st_ino, .size = sb.st_size,
				   .mtime = sb.st_mtim, .fd = make_copy(fd)};
	}
	int shared = c && c->fd >= 0 ? fcntl(c->fd, F_DUPFD_CLOEXEC, 0) : -1;
	pthread_mutex_unlock(&lock);
	if (shared < 0) return fd;
	close(fd);
	return shared;
}
