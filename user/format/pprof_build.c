/* Heap profiles in pprof's format (see pprof_build.h). */
#include "pprof_build.h"
#include "hash.h"
#include "slot_index.h"
#include "profile.pb-c.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__ValueType ValueType;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Label Label;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;

/* A growing array of pointers, as protobuf-c's repeated message fields want them. */
struct ptrs {
	void **v;
	size_t n, cap;
};

struct mapping_src {
	mt_locations_fn locs;
	void *ctx;
};

struct pp_profile {
	Profile p;
	bool oom;
	struct ptrs strings, sample_types, mappings, samples, labels, locations, functions;
	struct mapping_src *srcs;       /* of each mapping, by id - 1 */
	uint64_t *location_keys;        /* (mapping, code) hashed key of each location */
	uint64_t *location_codes;
	mt_slot_index string_of, function_of, location_of;
};

static bool push(pp_profile *p, struct ptrs *a, void *x)
{
	if (!x) goto oom;
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		void **v = realloc(a->v, cap * sizeof *v);
		if (!v) goto oom;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = x;
	return true;
oom:
	p->oom = true;
	return false;
}

static uint64_t string_hash(const void *ctx, uint32_t i)
{
	return mt_fnv1a_str(((const pp_profile *)ctx)->strings.v[i]);
}

static int64_t intern(pp_profile *p, const char *s)
{
	if (p->oom || mt_slot_reserve(&p->string_of, p->strings.n, 1024, string_hash, p) < 0) {
		p->oom = true;
		return 0;
	}
	size_t j = mt_slot_first(&p->string_of, mt_fnv1a_str(s));
	for (; p->string_of.slots[j]; j = mt_slot_next(&p->string_of, j))
		if (!strcmp(p->strings.v[p->string_of.slots[j] - 1], s)) return p->string_of.slots[j] - 1;
	if (!push(p, &p->strings, strdup(s))) return 0;
	p->string_of.slots[j] = (uint32_t)p->strings.n;
	return (int64_t)p->strings.n - 1;
}

static ValueType *value_type(pp_profile *p, const char *type, const char *unit)
{
	ValueType *v = calloc(1, sizeof *v);
	if (!v) {
		p->oom = true;
		return NULL;
	}
	perftools__profiles__value_type__init(v);
	v->type = intern(p, type);
	v->unit = intern(p, unit);
	return v;
}

pp_profile *pp_new(const pp_head *h)
{
	pp_profile *p = calloc(1, sizeof *p);
	if (!p) return NULL;
	perftools__profiles__profile__init(&p->p);
	intern(p, ""); /* string_table[0] */
	static const char *const types[PP_NVALUES][2] = {
		{"alloc_objects", "count"}, {"alloc_space", "bytes"},
		{"inuse_objects", "count"}, {"inuse_space", "bytes"}};
	for (int i = 0; i < PP_NVALUES; i++) push(p, &p->sample_types, value_type(p, types[i][0], types[i][1]));
	p->p.period_type = value_type(p, "space", "bytes");
	p->p.period = h->period > 0 ? llround(h->period) : 0;
	p->p.time_nanos = h->time_nanos;
	p->p.duration_nanos = h->duration_nanos;
	p->p.default_sample_type = intern(p, h->default_type ? h->default_type : "inuse_space");
	if (h->comment) {
		p->p.comment = calloc(1, sizeof *p->p.comment);
		if (p->p.comment) p->p.comment[p->p.n_comment++] = intern(p, h->comment);
		else p->oom = true;
	}
	if (p->oom) {
		pp_free(p);
		return NULL;
	}
	return p;
}

uint32_t pp_mapping(pp_profile *p, const char *filename, mt_locations_fn locs, void *ctx)
{
	if (p->oom) return 0;
	struct mapping_src *s = realloc(p->srcs, (p->mappings.n + 1) * sizeof *s);
	if (!s) {
		p->oom = true;
		return 0;
	}
	p->srcs = s;
	Mapping *m = calloc(1, sizeof *m);
	if (!push(p, &p->mappings, m)) {
		free(m);
		return 0;
	}
	perftools__profiles__mapping__init(m);
	m->id = p->mappings.n;
	m->filename = intern(p, filename ? filename : "");
	m->has_functions = m->has_filenames = m->has_line_numbers = m->has_inline_frames = 1;
	p->srcs[m->id - 1] = (struct mapping_src){locs, ctx};
	return (uint32_t)m->id;
}

/* A function is keyed by its name and file name, as string table indices. */
static uint64_t function_key(int64_t name, int64_t file) { return (uint64_t)name << 32 | (uint64_t)file; }

static uint64_t function_hash(const void *ctx, uint32_t i)
{
	const Function *fn = ((const pp_profile *)ctx)->functions.v[i];
	return mt_mix64(function_key(fn->name, fn->filename));
}

static uint64_t function_id(pp_profile *p, const char *name, const char *file)
{
	int64_t n = intern(p, name), f = intern(p, file);
	uint64_t key = function_key(n, f);
	mt_slot_index *ix = &p->function_of;
	if (p->oom || mt_slot_reserve(ix, p->functions.n, 1024, function_hash, p) < 0) {
		p->oom = true;
		return 0;
	}
	size_t j = mt_slot_first(ix, mt_mix64(key));
	for (; ix->slots[j]; j = mt_slot_next(ix, j)) {
		const Function *fn = p->functions.v[ix->slots[j] - 1];
		if (function_key(fn->name, fn->filename) == key) return ix->slots[j]; /* id = index + 1 */
	}
	Function *fn = calloc(1, sizeof *fn);
	if (!push(p, &p->functions, fn)) {
		free(fn);
		return 0;
	}
	perftools__profiles__function__init(fn);
	fn->id = p->functions.n;
	fn->name = fn->system_name = n;
	fn->filename = f;
	ix->slots[j] = (uint32_t)p->functions.n;
	return fn->id;
}

static uint64_t location_key(uint32_t mapping, uint64_t code)
{
	return mt_mix64(code ^ ((uint64_t)mapping * 0x9e3779b97f4a7c15ULL));
}

static uint64_t location_hash(const void *ctx, uint32_t i)
{
	return ((const pp_profile *)ctx)->location_keys[i];
}

static Line *line_of(pp_profile *p, const char *name, const char *file, uint32_t line)
{
	Line *ln = calloc(1, sizeof *ln);
	if (!ln) {
		p->oom = true;
		return NULL;
	}
	perftools__profiles__line__init(ln);
	ln->function_id = function_id(p, name, file);
	ln->line = line;
	return ln;
}

/* The Location of code in mapping: inlined functions first, the caller last (the trace's
 * locations are outermost first). */
static Location *new_location(pp_profile *p, uint32_t mapping, uint64_t code)
{
	Location *loc = calloc(1, sizeof *loc);
	if (!loc) return NULL;
	perftools__profiles__location__init(loc);
	loc->mapping_id = mapping;
	const struct mapping_src *src = &p->srcs[mapping - 1];
	const mt_location *locs = NULL;
	int n = src->locs ? src->locs(src->ctx, code, &locs) : -1;
	loc->line = calloc(n > 0 ? (size_t)n : 1, sizeof *loc->line);
	if (!loc->line) {
		free(loc);
		return NULL;
	}
	if (n <= 0) {
		char name[64];
		snprintf(name, sizeof name, "?? (location code %#llx)", (unsigned long long)code);
		if ((loc->line[0] = line_of(p, name, "", 0))) loc->n_line = 1;
	} else {
		for (int i = 0; i < n; i++) {
			const mt_location *l = &locs[n - 1 - i];
			const char *name = l->defname && *l->defname ? l->defname : "??";
			if (!(loc->line[i] = line_of(p, name, l->filename ? l->filename : "", l->line))) break;
			loc->n_line++;
		}
	}
	return loc;
}

static void free_location(void *x)
{
	Location *loc = x;
	for (size_t k = 0; k < loc->n_line; k++) free(loc->line[k]);
	free(loc->line);
	free(loc);
}

static uint64_t location_id(pp_profile *p, uint32_t mapping, uint64_t code)
{
	uint64_t key = location_key(mapping, code);
	mt_slot_index *ix = &p->location_of;
	if (p->oom || mt_slot_reserve(ix, p->locations.n, 1024, location_hash, p) < 0) {
		p->oom = true;
		return 0;
	}
	size_t j = mt_slot_first(ix, key);
	for (; ix->slots[j]; j = mt_slot_next(ix, j)) {
		uint32_t i = ix->slots[j] - 1;
		if (p->location_codes[i] == code && ((Location *)p->locations.v[i])->mapping_id == mapping)
			return i + 1;
	}
	size_t n = p->locations.n;
	if (n == p->locations.cap) { /* the key arrays follow the pointer array's capacity */
		size_t cap = n ? n * 2 : 64;
		uint64_t *k = realloc(p->location_keys, cap * sizeof *k);
		if (k) p->location_keys = k;
		uint64_t *c = k ? realloc(p->location_codes, cap * sizeof *c) : NULL;
		if (c) p->location_codes = c;
		if (!k || !c) {
			p->oom = true;
			return 0;
		}
	}
	Location *loc = new_location(p, mapping, code);
	if (!push(p, &p->locations, loc)) {
		if (loc) free_location(loc);
		return 0;
	}
	loc->id = p->locations.n;
	p->location_keys[n] = key;
	p->location_codes[n] = code;
	ix->slots[j] = (uint32_t)p->locations.n;
	return loc->id;
}

/* A label, shared by every sample that carries it (the samples of one process). */
static Label *label_of(pp_profile *p, const pp_label *l)
{
	int64_t k = intern(p, l->key), v = intern(p, l->value);
	for (size_t i = p->labels.n; i-- > 0;) {
		Label *x = p->labels.v[i];
		if (x->key == k && x->str == v) return x;
	}
	Label *x = calloc(1, sizeof *x);
	if (!push(p, &p->labels, x)) {
		free(x);
		return NULL;
	}
	perftools__profiles__label__init(x);
	x->key = k;
	x->str = v;
	return x;
}

static int64_t round_value(double v) { return v > 0 ? llround(v) : 0; }

int pp_sample(pp_profile *p, uint32_t mapping, const uint64_t *codes, size_t n,
	      const double values[PP_NVALUES], const pp_label *labels, size_t nlabels)
{
	if (p->oom || mapping == 0 || mapping > p->mappings.n) return -1;
	Sample *s = calloc(1, sizeof *s);
	if (!s) goto oom;
	perftools__profiles__sample__init(s);
	s->location_id = calloc(n ? n : 1, sizeof *s->location_id);
	s->value = calloc(PP_NVALUES, sizeof *s->value);
	s->label = calloc(nlabels ? nlabels : 1, sizeof *s->label);
	if (!s->location_id || !s->value || !s->label) goto oom;
	for (size_t i = 0; i < n; i++) /* leaf first */
		s->location_id[s->n_location_id++] = location_id(p, mapping, codes[n - 1 - i]);
	for (int i = 0; i < PP_NVALUES; i++) s->value[s->n_value++] = round_value(values[i]);
	for (size_t i = 0; i < nlabels; i++)
		if ((s->label[s->n_label] = label_of(p, &labels[i]))) s->n_label++;
	if (!push(p, &p->samples, s)) goto oom;
	return p->oom ? -1 : 0;
oom:
	if (s) {
		free(s->location_id);
		free(s->value);
		free(s->label);
		free(s);
	}
	p->oom = true;
	return -1;
}

int pp_drop_frames(pp_profile *p, const char *regex)
{
	p->p.drop_frames = intern(p, regex);
	return p->oom ? -1 : 0;
}

int pp_regex_add(char **re, size_t *len, size_t *cap, const char *s)
{
	size_t need = *len + 2 * strlen(s) + 8;
	if (need > *cap) {
		char *r = realloc(*re, 2 * need);
		if (!r) return -1;
		*re = r;
		*cap = 2 * need;
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
	return 0;
}

int pp_gzip(pp_profile *p, int level, uint8_t **out, size_t *outlen)
{
	*out = NULL;
	*outlen = 0;
	if (p->oom) return -1;
	Profile *pr = &p->p;
	pr->n_sample_type = p->sample_types.n, pr->sample_type = (ValueType **)p->sample_types.v;
	pr->n_mapping = p->mappings.n, pr->mapping = (Mapping **)p->mappings.v;
	pr->n_sample = p->samples.n, pr->sample = (Sample **)p->samples.v;
	pr->n_location = p->locations.n, pr->location = (Location **)p->locations.v;
	pr->n_function = p->functions.n, pr->function = (Function **)p->functions.v;
	pr->n_string_table = p->strings.n, pr->string_table = (char **)p->strings.v;
	size_t len = perftools__profiles__profile__get_packed_size(pr);
	uint8_t *raw = malloc(len ? len : 1);
	uLong bound = compressBound((uLong)len) + 64; /* + the gzip header and trailer */
	uint8_t *gz = malloc(bound);
	if (!raw || !gz) goto fail;
	perftools__profiles__profile__pack(pr, raw);
	z_stream z = {0};
	if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16 /* gzip */, 8, Z_DEFAULT_STRATEGY) != Z_OK) goto fail;
	z.next_in = raw, z.avail_in = (uInt)len;
	z.next_out = gz, z.avail_out = (uInt)bound;
	int rc = deflate(&z, Z_FINISH);
	*outlen = z.total_out;
	deflateEnd(&z);
	if (rc != Z_STREAM_END) goto fail;
	free(raw);
	*out = gz;
	return 0;
fail:
	free(raw);
	free(gz);
	*outlen = 0;
	return -1;
}

static void free_ptrs(struct ptrs *a, void (*fn)(void *))
{
	for (size_t i = 0; i < a->n; i++) fn(a->v[i]);
	free(a->v);
}

static void free_sample(void *x)
{
	Sample *s = x;
	free(s->location_id);
	free(s->value);
	free(s->label); /* the labels themselves are shared (p->labels) */
	free(s);
}

void pp_free(pp_profile *p)
{
	if (!p) return;
	free_ptrs(&p->strings, free);
	free_ptrs(&p->sample_types, free);
	free_ptrs(&p->mappings, free);
	free_ptrs(&p->samples, free_sample);
	free_ptrs(&p->labels, free);
	free_ptrs(&p->locations, free_location);
	free_ptrs(&p->functions, free);
	free(p->p.period_type);
	free(p->p.comment);
	free(p->srcs);
	free(p->location_keys);
	free(p->location_codes);
	mt_slot_free(&p->string_of);
	mt_slot_free(&p->function_of);
	mt_slot_free(&p->location_of);
	free(p);
}
