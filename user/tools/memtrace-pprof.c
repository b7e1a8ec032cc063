/* memtrace-pprof: a trace as a gzipped pprof profile (google/pprof's profile.proto), with
 * sample types alloc_objects/count, alloc_space/bytes, inuse_objects/count and
 * inuse_space/bytes (inuse = live at the end of the trace or of --to), estimated from the
 * samples as heapview.h describes. One pprof Location per location code; its inlined source
 * locations are several Lines of that Location, innermost first. The trace carries no
 * build ids or addresses, so there is one mapping: the traced executable. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "hash.h"
#include "heapview_cli.h"
#include "slot_index.h"
#include "profile.pb-c.h"

#define PROG "memtrace-pprof"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__ValueType ValueType;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;

static void die_oom(void)
{
	fprintf(stderr, PROG ": out of memory\n");
	exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p) die_oom();
	return p;
}

static void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size ? size : 1);
	if (!p) die_oom();
	return p;
}

/* ---------------------------------------------------------------- string table */

typedef struct strtab {
	char **s;
	size_t n, cap;
	mt_slot_index index;
} strtab;

static uint64_t string_hash(const void *ctx, uint32_t i)
{
	return mt_fnv1a_str(((const strtab *)ctx)->s[i]);
}

static int64_t intern(strtab *t, const char *s)
{
	if (mt_slot_reserve(&t->index, t->n, 1024, string_hash, t) < 0) die_oom();
	size_t j = mt_slot_first(&t->index, mt_fnv1a_str(s));
	for (; t->index.slots[j]; j = mt_slot_next(&t->index, j))
		if (!strcmp(t->s[t->index.slots[j] - 1], s)) return t->index.slots[j] - 1;
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 256;
		t->s = xrealloc(t->s, t->cap * sizeof *t->s);
	}
	t->s[t->n] = strdup(s);
	if (!t->s[t->n]) die_oom();
	t->index.slots[j] = t->n + 1;
	return t->n++;
}

/* ---------------------------------------------------------------- profile */

typedef struct builder {
	const hv_heap *h;
	strtab strings;
	Function **functions;
	size_t nfunctions, cap_functions;
	mt_slot_index function_of; /* (name, filename) -> function */
	Location **locations;
	uint64_t *location_codes; /* the location code of each location */
	size_t nlocations, cap_locations;
	mt_slot_index location_of; /* location code -> location */
} builder;

/* A function is keyed by its name and file name, as string table indices. */
static uint64_t function_key(int64_t name, int64_t file) { return (uint64_t)name << 32 | (uint64_t)file; }

static uint64_t function_hash(const void *ctx, uint32_t i)
{
	const Function *fn = ((const builder *)ctx)->functions[i];
	return mt_mix64(function_key(fn->name, fn->filename));
}

static uint64_t location_hash(const void *ctx, uint32_t i)
{
	return mt_mix64(((const builder *)ctx)->location_codes[i]);
}

static uint64_t function_id(builder *b, const char *name, const char *file)
{
	int64_t n = intern(&b->strings, name), f = intern(&b->strings, file);
	uint64_t key = function_key(n, f);
	mt_slot_index *ix = &b->function_of;
	if (mt_slot_reserve(ix, b->nfunctions, 1024, function_hash, b) < 0) die_oom();
	size_t j = mt_slot_first(ix, mt_mix64(key));
	for (; ix->slots[j]; j = mt_slot_next(ix, j)) {
		const Function *fn = b->functions[ix->slots[j] - 1];
		if (function_key(fn->name, fn->filename) == key) return ix->slots[j]; /* id = index + 1 */
	}
	if (b->nfunctions == b->cap_functions) {
		b->cap_functions = b->cap_functions ? b->cap_functions * 2 : 256;
		b->functions = xrealloc(b->functions, b->cap_functions * sizeof *b->functions);
	}
	Function *fn = xcalloc(1, sizeof *fn);
	perftools__profiles__function__init(fn);
	fn->id = b->nfunctions + 1;
	fn->name = n;
	fn->system_name = n;
	fn->filename = f;
	b->functions[b->nfunctions] = fn;
	ix->slots[j] = b->nfunctions + 1;
	return ++b->nfunctions;
}

static uint64_t location_id(builder *b, uint64_t code)
{
	mt_slot_index *ix = &b->location_of;
	if (mt_slot_reserve(ix, b->nlocations, 1024, location_hash, b) < 0) die_oom();
	size_t j = mt_slot_first(ix, mt_mix64(code));
	for (; ix->slots[j]; j = mt_slot_next(ix, j))
		if (b->location_codes[ix->slots[j] - 1] == code) return ix->slots[j]; /* id = index + 1 */
	if (b->nlocations == b->cap_locations) {
		b->cap_locations = b->cap_locations ? b->cap_locations * 2 : 256;
		b->locations = xrealloc(b->locations, b->cap_locations * sizeof *b->locations);
		b->location_codes = xrealloc(b->location_codes, b->cap_locations * sizeof *b->location_codes);
	}
	Location *loc = xcalloc(1, sizeof *loc);
	perftools__profiles__location__init(loc);
	loc->id = b->nlocations + 1;
	loc->mapping_id = 1;
	const mt_location *locs;
	int n = hv_lookup(b->h, code, &locs);
	if (n <= 0) {
		char name[64];
		snprintf(name, sizeof name, "?? (location code %#llx)", (unsigned long long)code);
		loc->n_line = 1;
		loc->line = xcalloc(1, sizeof *loc->line);
		loc->line[0] = xcalloc(1, sizeof **loc->line);
		perftools__profiles__line__init(loc->line[0]);
		loc->line[0]->function_id = function_id(b, name, "");
	} else {
		/* pprof: inlined functions first, the caller last; the trace: outermost first */
		loc->n_line = n;
		loc->line = xcalloc(n, sizeof *loc->line);
		for (int i = 0; i < n; i++) {
			const mt_location *src = &locs[n - 1 - i];
			Line *ln = xcalloc(1, sizeof *ln);
			perftools__profiles__line__init(ln);
			ln->function_id = function_id(b, hv_defname(src), hv_filename(src));
			ln->line = src->line;
			loc->line[i] = ln;
		}
	}
	b->locations[b->nlocations] = loc;
	b->location_codes[b->nlocations] = code;
	ix->slots[j] = b->nlocations + 1;
	return ++b->nlocations;
}

static ValueType *value_type(builder *b, const char *type, const char *unit)
{
	ValueType *v = xcalloc(1, sizeof *v);
	perftools__profiles__value_type__init(v);
	v->type = intern(&b->strings, type);
	v->unit = intern(&b->strings, unit);
	return v;
}

static int64_t round_value(double v) { return v > 0 ? llround(v) : 0; }

/* Builds the profile; every sample is a context with allocations of its own. */
static void build(builder *b, Profile *p, const char *path)
{
	const hv_heap *h = b->h;
	const mt_trace_info *info = hv_info(h);
	intern(&b->strings, ""); /* string_table[0] */
	p->n_sample_type = 4;
	p->sample_type = xcalloc(4, sizeof *p->sample_type);
	p->sample_type[0] = value_type(b, "alloc_objects", "count");
	p->sample_type[1] = value_type(b, "alloc_space", "bytes");
	p->sample_type[2] = value_type(b, "inuse_objects", "count");
	p->sample_type[3] = value_type(b, "inuse_space", "bytes");
	p->period_type = value_type(b, "space", "bytes");
	p->period = round_value(hv_sample_bytes(info, 1));
	p->time_nanos = (int64_t)(info->start_time_us * 1000);
	p->duration_nanos = (int64_t)((hv_end_time_us(h) - info->start_time_us) * 1000);
	p->default_sample_type = intern(&b->strings, "inuse_space"); /* like Go heap profiles */

	char comment[512];
	snprintf(comment, sizeof comment, "memtrace trace %s, pid %llu, sample rate %g per word; "
		 "values estimated from samples", path, (unsigned long long)info->pid, info->sample_rate);
	p->n_comment = 1;
	p->comment = xcalloc(1, sizeof *p->comment);
	p->comment[0] = intern(&b->strings, comment);

	Mapping *m = xcalloc(1, sizeof *m);
	perftools__profiles__mapping__init(m);
	m->id = 1;
	m->filename = intern(&b->strings, info->executable_name ? info->executable_name : "");
	m->has_functions = m->has_filenames = m->has_line_numbers = m->has_inline_frames = 1;
	p->n_mapping = 1;
	p->mapping = xcalloc(1, sizeof *p->mapping);
	p->mapping[0] = m;

	uint32_t nctx = hv_context_count(h), max_depth = 0;
	size_t nsamples = 0;
	for (uint32_t c = 0; c < nctx; c++) {
		if (hv_context_counts(h, c)->alloc_events) nsamples++;
		if (hv_context_depth(h, c) > max_depth) max_depth = hv_context_depth(h, c);
	}
	uint64_t *codes = xcalloc(max_depth + 1, sizeof *codes);
	p->sample = xcalloc(nsamples, sizeof *p->sample);
	for (uint32_t c = 0; c < nctx; c++) {
		const hv_counts *cc = hv_context_counts(h, c);
		if (!cc->alloc_events) continue;
		Sample *s = xcalloc(1, sizeof *s);
		perftools__profiles__sample__init(s);
		uint32_t depth = hv_context_stack(h, c, codes);
		s->n_location_id = depth;
		s->location_id = xcalloc(depth, sizeof *s->location_id);
		for (uint32_t i = 0; i < depth; i++) /* leaf first */
			s->location_id[i] = location_id(b, codes[depth - 1 - i]);
		s->n_value = 4;
		s->value = xcalloc(4, sizeof *s->value);
		s->value[0] = round_value(cc->alloc_objects);
		s->value[1] = round_value(cc->alloc_bytes);
		s->value[2] = round_value(cc->live_objects);
		s->value[3] = round_value(cc->live_bytes);
		p->sample[p->n_sample++] = s;
	}
	free(codes);
	p->n_location = b->nlocations;
	p->location = b->locations;
	p->n_function = b->nfunctions;
	p->function = b->functions;
	p->n_string_table = b->strings.n;
	p->string_table = b->strings.s;
}

/* Frees what build() allocated (protobuf-c's free_unpacked is for unpacked messages only). */
static void destroy(Profile *p, builder *b)
{
	for (size_t i = 0; i < p->n_sample_type; i++) free(p->sample_type[i]);
	free(p->sample_type);
	free(p->period_type);
	free(p->comment);
	for (size_t i = 0; i < p->n_mapping; i++) free(p->mapping[i]);
	free(p->mapping);
	for (size_t i = 0; i < p->n_sample; i++) {
		free(p->sample[i]->location_id);
		free(p->sample[i]->value);
		free(p->sample[i]);
	}
	free(p->sample);
	for (size_t i = 0; i < b->nlocations; i++) {
		for (size_t k = 0; k < b->locations[i]->n_line; k++) free(b->locations[i]->line[k]);
		free(b->locations[i]->line);
		free(b->locations[i]);
	}
	free(b->locations);
	for (size_t i = 0; i < b->nfunctions; i++) free(b->functions[i]);
	free(b->functions);
	for (size_t i = 0; i < b->strings.n; i++) free(b->strings.s[i]);
	free(b->strings.s);
	free(b->location_codes);
	mt_slot_free(&b->strings.index);
	mt_slot_free(&b->function_of);
	mt_slot_free(&b->location_of);
}

static int write_gzip(const char *output, const uint8_t *buf, size_t len)
{
	gzFile gz = strcmp(output, "-") ? gzopen(output, "wb9") : gzdopen(dup(STDOUT_FILENO), "wb9");
	if (!gz) {
		fprintf(stderr, PROG ": cannot open %s for writing\n", output);
		return -1;
	}
	size_t done = 0;
	while (done < len) {
		unsigned chunk = len - done > (1u << 30) ? (1u << 30) : (unsigned)(len - done);
		int n = gzwrite(gz, buf + done, chunk);
		if (n <= 0) break;
		done += (size_t)n;
	}
	int rc = gzclose(gz);
	if (done != len || rc != Z_OK) {
		fprintf(stderr, PROG ": writing %s failed\n", output);
		return -1;
	}
	return 0;
}

static void usage(FILE *f)
{
	fputs("usage: memtrace-pprof [options] TRACE.ctf -o OUT.pb.gz\n"
	      "  -o, --output FILE  the gzipped profile (\"-\" = standard output)\n"
	      "  --from SEC, --to SEC  time window in seconds since trace start (inuse = live at\n"
	      "                     the end of the window)\n"
	      "  --at peak|SEC      inuse = live at that moment: the peak (the moment the live\n"
	      "                     estimate was highest) or SEC seconds since the start\n"
	      "  --lenient          skip packets the reader skips (with a warning) instead of failing\n"
	      "  --wrapper NAME, --keep-wrappers  allocation wrappers: named in the profile's\n"
	      "                     drop_frames, so pprof's top names their callers (see memtrace-report)\n"
	      "Read it with: go tool pprof -top -sample_index=alloc_space OUT.pb.gz\n",
	      f);
}

/* Appends s to the regex, its metacharacters escaped and '*' as ".*" (shell patterns). */
static void regex_add(char **re, size_t *len, size_t *cap, const char *s)
{
	size_t need = *len + 2 * strlen(s) + 8;
	if (need > *cap) {
		*cap = 2 * need;
		*re = realloc(*re, *cap);
		if (!*re) die_oom();
	}
	if (*len) (*re)[(*len)++] = '|';
	for (; *s; s++) {
		if (*s == '*') {
			(*re)[(*len)++] = '.';
			(*re)[(*len)++] = '*';
			continue;
		}
		if (strchr(".()[]{}+?^$|\\", *s)) (*re)[(*len)++] = '\\';
		(*re)[(*len)++] = *s;
	}
	(*re)[*len] = '\0';
}

/* The drop_frames regex: the wrapper patterns and the frames without a name taken as ones. */
static int64_t wrapper_regex(builder *b, const hv_heap *h, const hv_cli_wrappers *w)
{
	char *re = NULL;
	size_t len = 0, cap = 0;
	for (int i = 0; hv_default_wrappers[i]; i++) regex_add(&re, &len, &cap, hv_default_wrappers[i]);
	for (int i = 0; i < w->n; i++) regex_add(&re, &len, &cap, w->extra[i]);
	for (uint32_t c = 1; c < hv_context_count(h); c++) {
		const mt_location *locs;
		int n = hv_lookup(h, hv_context_code(h, c), &locs);
		const char *name = n > 0 ? hv_defname(&locs[n - 1]) : NULL;
		if (name && hv_context_skipped(h, c) && !hv_is_wrapper_name(name, w->extra, w->n))
			regex_add(&re, &len, &cap, name);
	}
	int64_t ix = intern(&b->strings, re ? re : "");
	free(re);
	return ix;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, 0, 'o' }, { "from", required_argument, 0, 'f' },
		{ "to", required_argument, 0, 't' },     { "lenient", no_argument, 0, 'L' },
		{ "help", no_argument, 0, 'h' },         { "wrapper", required_argument, 0, 'W' },
		{ "keep-wrappers", no_argument, 0, 'K' }, { "at", required_argument, 0, 'A' },
		{ 0, 0, 0, 0 },
	};
	static hv_cli_wrappers wrappers;
	hv_options opt = { .from_s = 0, .to_s = -1 };
	hv_cli_at at = { 0 };
	const char *output = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': output = optarg; break;
		case 'f': if (hv_cli_number(PROG, "--from", optarg, &opt.from_s)) return 2; break;
		case 't': if (hv_cli_number(PROG, "--to", optarg, &opt.to_s)) return 2; break;
		case 'A': if (hv_cli_parse_at(PROG, optarg, &at)) return 2; break;
		case 'L': opt.lenient = 1; break;
		case 'W': if (hv_cli_add_wrapper(PROG, &wrappers, optarg)) return 2; break;
		case 'K': wrappers.keep = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (hv_cli_operands(PROG, argc - optind, 1, "one trace file", usage) < 0 ||
	    hv_cli_window(PROG, &opt) < 0)
		return 2;
	if (!output) {
		fprintf(stderr, PROG ": say where the profile goes: -o OUT.pb.gz (or -o - for stdout)\n");
		return 2;
	}
	hv_heap *h = hv_cli_load_at(PROG, argv[optind], &opt, &at);
	if (!h) return 1;
	if (hv_cli_apply_wrappers(PROG, h, &wrappers, stderr) < 0) {
		hv_free(h);
		return 1;
	}
	builder b = { .h = h };
	Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
	build(&b, &p, argv[optind]);
	/* pprof's own way: frames matching drop_frames (and what they call) leave the samples
	 * when a tool reads the profile, so `top` names the caller of a wrapper; the profile's
	 * stacks keep every frame */
	if (!wrappers.keep) {
		p.drop_frames = wrapper_regex(&b, h, &wrappers);
		p.n_string_table = b.strings.n; /* the table may have grown (and moved) */
		p.string_table = b.strings.s;
	}
	size_t len = perftools__profiles__profile__get_packed_size(&p);
	uint8_t *buf = xcalloc(len, 1);
	perftools__profiles__profile__pack(&p, buf);
	int rc = write_gzip(output, buf, len);
	free(buf);
	destroy(&p, &b);
	hv_free(h);
	return rc < 0 ? 1 : 0;
}
