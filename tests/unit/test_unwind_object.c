/* Unwinding a stack copy against one ELF file (stacks_open_object, what tests/fuzz/fuzz_unwind
 * drives): a real sample of tests/targets/stacks_deep unwinds to the same codes and locations
 * within stacks_deep as against the live process; hostile samples and objects end cleanly.
 *
 * `test_unwind_object --write-seed FILE` writes the sample in fuzz_unwind's input format (the
 * load base, the 17 registers, the stack bytes) and exits: tests/fuzz/run.sh seeds with it. */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "sample_capture.h"

#define MAX_CODES 256

/* Load bias of path in pid: the start of its mapping at file offset 0 (a PIE). */
static uint64_t load_base(pid_t pid, const char *path)
{
	char maps[64], line[PATH_MAX + 128];
	snprintf(maps, sizeof maps, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(maps, "r");
	uint64_t base = 0;
	while (f && !base && fgets(line, sizeof line, f)) {
		unsigned long long start, offset;
		int pos = 0;
		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%llx-%*[0-9a-f] %*s %llx %*s %*s %n", &start, &offset, &pos) >= 2 && pos &&
		    offset == 0 && strcmp(line + pos, path) == 0)
			base = start;
	}
	if (f)
		fclose(f);
	return base;
}

static int same_locations(struct stacks *a, uint64_t ca, struct stacks *b, uint64_t cb)
{
	const mt_location *la, *lb;
	int na = stacks_locations(a, ca, &la), nb = stacks_locations(b, cb, &lb);
	if (na <= 0 || na != nb)
		return 0;
	for (int i = 0; i < na; i++)
		if (strcmp(la[i].defname, lb[i].defname) || strcmp(la[i].filename, lb[i].filename) ||
		    la[i].line != lb[i].line)
			return 0;
	return 1;
}

static int write_seed(const char *file, uint64_t base, const struct sample *s)
{
	FILE *f = fopen(file, "w");
	if (!f)
		return -1;
	int ok = fwrite(&base, 8, 1, f) == 1 && fwrite(s->regs, sizeof s->regs, 1, f) == 1 &&
		 fwrite(s->stack, 1, s->stack_len, f) == s->stack_len;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static struct sample sample, garbage;

/* Unwinds the sample against the object under the given caps; n, codes, the stats. */
static struct stacks *capped_unwind(const char *path, uint64_t base, struct stacks_limits lim,
				    uint64_t *codes, int *n, struct stacks_stats *st)
{
	char err[256];
	struct stacks *s = stacks_open_object(path, base, err, sizeof err);
	if (!s)
		return NULL;
	stacks_set_limits(s, &lim);
	*n = stacks_unwind(s, 0, sample.regs, sample.stack, sample.stack_len, codes, MAX_CODES);
	stacks_get_stats(s, st);
	return s;
}

static const char *defname_of(struct stacks *s, uint64_t code, unsigned *line)
{
	const mt_location *l;
	int n = stacks_locations(s, code, &l);
	*line = n > 0 ? l[n - 1].line : 0;
	return n > 0 ? l[n - 1].defname : "";
}

/* Past each cap the frames lose their names step by step, and the stats say so. */
static void test_caps(const char *path, uint64_t base)
{
	const struct stacks_limits none = {.max_frames = 2048, .max_debug_bytes = UINT64_MAX,
					   .max_symbols = UINT64_MAX, .max_symbolize_ns = UINT64_MAX,
					   .max_symbolized = UINT64_MAX};
	struct stacks_limits lim = none;
	struct stacks_stats st;
	uint64_t c[MAX_CODES];
	int n = 0;
	unsigned line;

	lim.max_frames = 3;
	struct stacks *s = capped_unwind(path, base, lim, c, &n, &st);
	const mt_location *l;
	CHECKF("cap_frames_marker", s && n == 4 && stacks_locations(s, c[3], &l) == 1 &&
	       strstr(l[0].defname, "stack cut at 3 frames") && st.capped_stacks == 1,
	       "n=%d capped_stacks=%llu", n, (unsigned long long)st.capped_stacks);
	stacks_close(s);

	lim = none;
	lim.max_debug_bytes = 1000; /* stacks_deep's DWARF is larger: names from .symtab */
	s = capped_unwind(path, base, lim, c, &n, &st);
	const char *name = s && n > 0 ? defname_of(s, c[0], &line) : "";
	CHECKF("cap_debug_info_names_from_symbols",
	       strcmp(name, "recurse") == 0 && line == 0 && st.capped_objects == 1 && st.capped_codes > 0,
	       "frame 0 %s line %u, capped objects %llu codes %llu", name, line,
	       (unsigned long long)st.capped_objects, (unsigned long long)st.capped_codes);
	stacks_close(s);

	lim = none;
	lim.max_symbols = 10;
	s = capped_unwind(path, base, lim, c, &n, &st);
	name = s && n > 0 ? defname_of(s, c[0], &line) : "";
	CHECKF("cap_symbols_object_offset", strncmp(name, "stacks_deep+0x", 14) == 0 &&
	       st.capped_objects == 1 && st.unnamed_codes == 0, "frame 0 %s", name);
	stacks_close(s);

	lim = none;
	lim.max_symbolized = 2; /* recurse's two call sites; main's (the last frame) is past it */
	s = capped_unwind(path, base, lim, c, &n, &st);
	const char *first = s && n > 3 ? defname_of(s, c[0], &line) : "";
	name = s && n > 3 ? defname_of(s, c[n - 2], &line) : "";
	CHECKF("cap_codes_object_offset", strcmp(first, "recurse") == 0 &&
	       strncmp(name, "stacks_deep+0x", 14) == 0 && st.capped_codes > 0,
	       "frame 0 %s, frame %d %s", first, n - 2, name);
	stacks_close(s);

	lim = none;
	/* the first frame goes over it: the next one is named from the symbols, and past twice
	 * the cap the rest are object+offset */
	lim.max_symbolize_ns = 1;
	s = capped_unwind(path, base, lim, c, &n, &st);
	first = s && n > 3 ? defname_of(s, c[0], &line) : "";
	unsigned line0 = line;
	const char *second = s && n > 3 ? defname_of(s, c[1], &line) : "";
	unsigned line1 = line;
	name = s && n > 3 ? defname_of(s, c[n - 2], &line) : "";
	CHECKF("cap_time_symbols_then_object_offset", strcmp(first, "recurse") == 0 && line0 > 0 &&
	       strcmp(second, "recurse") == 0 && line1 == 0 &&
	       strncmp(name, "stacks_deep+0x", 14) == 0 && st.capped_objects == 1,
	       "frame 0 %s:%u, frame 1 %s:%u, frame %d %s", first, line0, second, line1, n - 2, name);
	CHECKF("cap_note_names_object_and_cap", strcmp(st.capped_note, "stacks_deep (time)") == 0,
	       "%s", st.capped_note);
	stacks_close(s);
}

int main(int argc, char **argv)
{
	find_dirs();
	char path[PATH_MAX + 64], real[PATH_MAX], err[256] = "";
	snprintf(path, sizeof path, "%s/tests/targets/stacks_deep", build_dir);
	if (!realpath(path, real)) {
		printf("FAIL unwind_object_workload: %s missing\n", path);
		return 1;
	}
	pid_t pid = spawn_path(real);
	int ok = pid > 0 && wait_stop(pid) == 0 && capture(pid, &sample) == 0;
	uint64_t base = ok ? load_base(pid, real) : 0;
	CHECKF("unwind_object_capture", ok && base, "errno %s, base %llx", strerror(errno),
	       (unsigned long long)base);
	struct stacks *live = ok ? stacks_open(pid, err, sizeof err) : NULL;
	if (argc == 3 && strcmp(argv[1], "--write-seed") == 0) {
		ok = ok && write_seed(argv[2], base, &sample) == 0;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		stacks_close(live);
		return ok ? 0 : 1;
	}
	struct stacks *obj = stacks_open_object(real, base, err, sizeof err);
	CHECKF("unwind_object_open", live && obj, "%s", err);
	if (!live || !obj) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return 1;
	}
	uint64_t a[MAX_CODES], b[MAX_CODES];
	int na = stacks_unwind(live, pid, sample.regs, sample.stack, sample.stack_len, a, MAX_CODES);
	int nb = stacks_unwind(obj, 0, sample.regs, sample.stack, sample.stack_len, b, MAX_CODES);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* recurse x5, level3, level2 (with its inlined helper), level1, main: then libc's start
	 * code, which the object alone does not hold (one "<unknown>" frame, where it stops) */
	int same = nb >= 9 && nb <= na;
	for (int i = 0; same && i < nb - 1; i++)
		same = a[i] == b[i] && same_locations(live, a[i], obj, b[i]);
	CHECKF("unwind_object_same_frames_as_live", same, "live %d frames, object %d", na, nb);
	const mt_location *l;
	CHECK("unwind_object_stops_outside_object",
	      nb > 0 && stacks_locations(obj, b[nb - 1], &l) == 1 &&
		      strcmp(l[0].filename, STACKS_UNKNOWN_FILE) == 0);

	/* A stack copy of return addresses that all point back into recurse: the unwinder
	 * follows them until the frame cap, then the codes are cut at max_codes. */
	garbage = sample;
	uint64_t ret = 0;
	memcpy(&ret, sample.stack, 8); /* fake_alloc's return address, in recurse */
	for (size_t off = 0; off + 8 <= sizeof garbage.stack; off += 8)
		memcpy(garbage.stack + off, &ret, 8);
	garbage.stack_len = sizeof garbage.stack;
	int ng = stacks_unwind(obj, 0, garbage.regs, garbage.stack, garbage.stack_len, b, MAX_CODES);
	CHECKF("unwind_object_loop_bounded", ng > 0 && ng <= MAX_CODES, "n=%d", ng);
	memset(garbage.stack, 0xff, sizeof garbage.stack);
	garbage.regs[16] = 0x1234; /* rip in no object */
	ng = stacks_unwind(obj, 0, garbage.regs, garbage.stack, garbage.stack_len, b, MAX_CODES);
	CHECKF("unwind_object_rip_outside", ng >= 0 && ng <= 1, "n=%d", ng);
	stacks_close(obj);
	stacks_close(live);

	test_caps(real, base);

	obj = stacks_open_object("/nonexistent/object", 0x400000, err, sizeof err);
	CHECKF("unwind_object_missing_file_fails", !obj && err[0], "err=%s", err);
	stacks_close(obj);
	return CHECK_DONE();
}
