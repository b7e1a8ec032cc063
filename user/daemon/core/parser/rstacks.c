/* The daemon's end of a process's unwinder (see rstacks.h). Locations come from the parser
 * once per code and are kept here (copied, lengths checked: the trace writer gets bounded
 * strings only). */
#include "rstacks.h"
#include "parser.h"
#include "protocol_check.h"
#include "protocol/protocol.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AHEAD_MAX 64
#define REPLY_CAP (PARSER_RES_RING / 4)

struct loc_entry {
	struct loc_entry *next;
	uint64_t code;
	int n;
	mt_location locs[];  /* then the strings */
};

struct rstacks {
	struct pchan *ch;
	pid_t pid;
	const void *ahead[AHEAD_MAX];
	unsigned ahead_head, ahead_n;
	uint64_t end;
	bool truncated;
	char files[2][PARSER_FILE_LEN];
	bool has_file[2];
	struct stacks_stats stats;
	struct loc_entry **buckets;
	size_t nbuckets, nlocs;
	uint8_t *reply;           /* REPLY_CAP bytes */
	struct py_found python;
};

static enum py_mode python_mode;

void rstacks_set_python_mode(enum py_mode mode) { python_mode = mode; }

const struct py_found *rstacks_python(const struct rstacks *r) { return &r->python; }

/* The parser's account of the interpreter, made safe to print and to hand to the BPF
 * program (whose reads of the target cannot fault whatever the layout says). */
static void take_python(struct rstacks *r, const struct py_found *p)
{
	r->python = *p;
	struct py_found *f = &r->python;
	f->object[sizeof f->object - 1] = f->source[sizeof f->source - 1] = '\0';
	f->note[sizeof f->note - 1] = '\0';
	if (f->usable && (f->version < 0x030b || f->version > 0x030d || f->layout.version != f->version ||
			  !f->layout.runtime)) {
		f->usable = false;
		snprintf(f->note, sizeof f->note, "the parser's account of it was not consistent");
	}
}

struct rstacks *rstacks_open(pid_t pid, char *err, size_t errlen)
{
	struct rstacks *r = calloc(1, sizeof *r);
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	r->pid = pid;
	if (!parser_started()) {
		snprintf(err, errlen, "no parser to unwind with");
		free(r);
		return NULL;
	}
	parser_allow_pid(pid);
	r->reply = malloc(REPLY_CAP);
	r->nbuckets = 1024;
	r->buckets = calloc(r->nbuckets, sizeof *r->buckets);
	if (!r->reply || !r->buckets || !(r->ch = pchan_open(err, errlen))) goto fail;
	struct pq_open q = {.pid = pid, .python = python_mode};
	size_t len;
	if (pchan_send(r->ch, PQ_OPEN, &q, sizeof q, NULL, 0) < 0 ||
	    pchan_recv(r->ch, r->reply, REPLY_CAP, &len, 1) != PR_OPENED ||
	    len != sizeof(struct pr_opened)) {
		const char *why = parser_gone();
		snprintf(err, errlen, "the unprivileged parser is gone: %s", why ? why : "it broke the protocol");
		goto fail;
	}
	struct pr_opened *o = (void *)r->reply;
	o->err[sizeof o->err - 1] = '\0';
	if (!o->ok) {
		snprintf(err, errlen, "%s", o->err);
		goto fail;
	}
	r->stats = o->stats;
	take_python(r, &o->python);
	return r;
fail:
	rstacks_close(r);
	return NULL;
}

void rstacks_refresh(struct rstacks *r)
{
	pchan_send(r->ch, PQ_REFRESH, NULL, 0, NULL, 0);
}

void rstacks_set_final_maps(struct rstacks *r, const char *maps)
{
	size_t len = strlen(maps), chunk = 256u << 10;
	for (size_t off = 0; ; off += chunk) {
		size_t n = len - off < chunk ? len - off : chunk;
		struct pq_final_maps q = {.last = off + n >= len, .len = (uint32_t)n};
		if (pchan_send(r->ch, PQ_FINAL_MAPS, &q, sizeof q, maps + off, n) < 0 || q.last) break;
	}
}

/* The bytes that follow the request: the stack, then the Python frames when they lie right
 * after it (rstacks.h). */
static size_t tail_of(struct pq_unwind *q, const uint8_t *stack, size_t stack_len,
		      const struct rstacks_py *py)
{
	size_t at = (stack_len + 7) & ~(size_t)7;
	if (!py || !py->n || !py->frames || py->n > MT_PY_MAX_FRAMES || !stack ||
	    (const uint8_t *)py->frames != stack + at)
		return stack_len;
	q->py_n = py->n;
	q->py_status = py->status;
	size_t len = at + py->n * sizeof(struct mt_py_frame);
	if (py->codes && py->ncodes <= MT_PY_MAX_NEW && (const uint8_t *)py->codes == stack + len) {
		q->py_codes = py->ncodes;
		len += py->ncodes * sizeof(struct mt_py_code);
	}
	return len;
}

/* A request the channel cannot carry (a stack near MT_STACK_BYTES_LIMIT with Python frames
 * after it) goes without its Python frames, its stack cut to fit: unwound as far as it goes. */
static size_t fit(const struct rstacks *r, size_t stack_len, const struct rstacks_py **py)
{
	size_t room = pchan_max_payload(r->ch) - sizeof(struct pq_unwind);
	size_t py_bytes = *py ? (*py)->n * sizeof(struct mt_py_frame) +
				(*py)->ncodes * sizeof(struct mt_py_code) : 0;
	if (((stack_len + 7) & ~(size_t)7) + py_bytes <= room) return stack_len;
	*py = NULL;
	return stack_len <= room ? stack_len : room & ~(size_t)7;
}

static void fill_request(struct pq_unwind *q, pid_t tid, const uint64_t regs[STACKS_NREGS],
			 size_t stack_len, enum stacks_start start, bool want_files, int max_codes)
{
	memset(q, 0, sizeof *q);
	q->tid = tid;
	q->start = start;
	q->max_codes = max_codes;
	q->want_files = want_files;
	memcpy(q->regs, regs, sizeof q->regs);
	q->stack_len = (uint32_t)stack_len;
}

#define AHEAD_CODES 1024 /* what a prefetched unwind may return; the caller's max_codes cuts */

bool rstacks_prefetch(struct rstacks *r, const void *key, pid_t tid, const uint64_t regs[STACKS_NREGS],
		      const uint8_t *stack, size_t stack_len, const struct rstacks_py *py,
		      enum stacks_start start, bool want_files)
{
	if (r->ahead_n == AHEAD_MAX) return false;
	struct pq_unwind q;
	stack_len = fit(r, stack_len, &py);
	fill_request(&q, tid, regs, stack_len, start, want_files, AHEAD_CODES);
	size_t tail = tail_of(&q, stack, stack_len, py);
	if (pchan_try_send_quiet(r->ch, PQ_UNWIND, &q, sizeof q, stack, tail) < 0) return false;
	r->ahead[(r->ahead_head + r->ahead_n++) % AHEAD_MAX] = key;
	return true;
}

bool rstacks_ahead_low(const struct rstacks *r) { return r->ahead_n <= AHEAD_MAX / 2; }

void rstacks_ahead_sent(struct rstacks *r) { pchan_flush(r->ch); }

/* ---- replies ---- */

static size_t bucket_of(const struct rstacks *r, uint64_t code)
{
	code ^= code >> 33;
	code *= 0xff51afd7ed558ccdull;
	code ^= code >> 33;
	return (size_t)code & (r->nbuckets - 1);
}

/* More buckets when the chains grow (a process can have a million codes). */
static void grow(struct rstacks *r)
{
	size_t n = r->nbuckets * 4;
	struct loc_entry **b = calloc(n, sizeof *b);
	if (!b) return;
	struct loc_entry **old = r->buckets;
	size_t oldn = r->nbuckets;
	r->buckets = b;
	r->nbuckets = n;
	for (size_t i = 0; i < oldn; i++)
		for (struct loc_entry *e = old[i], *next; e; e = next) {
			next = e->next;
			size_t k = bucket_of(r, e->code);
			e->next = b[k];
			b[k] = e;
		}
	free(old);
}

static struct loc_entry *find(const struct rstacks *r, uint64_t code)
{
	for (struct loc_entry *e = r->buckets[bucket_of(r, code)]; e; e = e->next)
		if (e->code == code) return e;
	return NULL;
}

/* PR_LOCS: checked, copied into the cache. false if it is not well-formed. */
static bool take_locs(struct rstacks *r, const uint8_t *p, size_t len)
{
	size_t strings;
	if (!pr_locs_check(p, len, &strings)) return false;
	const struct pr_locs *pl = (const void *)p;
	if (find(r, pl->code)) return true; /* told twice: the first stays */
	struct loc_entry *e = malloc(sizeof *e + pl->nlocs * sizeof(mt_location) + strings);
	if (!e) return true;
	e->code = pl->code;
	e->n = (int)pl->nlocs;
	pr_locs_copy(p, e->locs, (char *)(e->locs + pl->nlocs));
	if (r->nlocs >= 2 * r->nbuckets) grow(r);
	size_t b = bucket_of(r, e->code);
	e->next = r->buckets[b];
	r->buckets[b] = e;
	r->nlocs++;
	return true;
}

/* The next unwind result, its locations taken on the way: its n (codes in r->reply's
 * struct pr_unwind), or -1 (the parser is gone, or sent what it must not: it is stopped). */
static int next_result(struct rstacks *r, int max_codes, uint32_t want)
{
	for (;;) {
		size_t len;
		int t = pchan_recv(r->ch, r->reply, REPLY_CAP, &len, want);
		if (t < 0) return -1;
		if (t == PR_LOCS && take_locs(r, r->reply, len)) continue;
		const struct pr_unwind *u = (const void *)r->reply;
		if (t != PR_UNWIND || !pr_unwind_check(r->reply, len, max_codes)) {
			pchan_break(r->ch, "it sent a malformed unwind result");
			return -1;
		}
		r->end = u->end;
		r->truncated = u->truncated;
		r->stats = u->stats;
		const char *f = (const char *)(u->codes + u->n);
		for (int i = 0; i < 2; i++) {
			r->has_file[i] = u->file_len[i] > 0;
			memcpy(r->files[i], f, u->file_len[i]);
			r->files[i][u->file_len[i]] = '\0';
			f += u->file_len[i];
		}
		return u->n;
	}
}

int rstacks_unwind_from(struct rstacks *r, const void *key, pid_t tid,
			const uint64_t regs[STACKS_NREGS], const uint8_t *stack, size_t stack_len,
			const struct rstacks_py *py, enum stacks_start start, bool want_files,
			uint64_t *codes, int max_codes)
{
	/* asked ahead: the oldest result is this sample's (others before it were not used) */
	/* waiting, it wants every result asked for: one wake for them all (the parser wakes it
	 * sooner if it runs out of requests) */
	while (r->ahead_n && r->ahead[r->ahead_head] != key) {
		if (next_result(r, AHEAD_CODES, r->ahead_n) < 0) return -1;
		r->ahead_head = (r->ahead_head + 1) % AHEAD_MAX;
		r->ahead_n--;
	}
	int n;
	if (r->ahead_n) {
		n = next_result(r, AHEAD_CODES, r->ahead_n);
		r->ahead_head = (r->ahead_head + 1) % AHEAD_MAX;
		r->ahead_n--;
	} else {
		struct pq_unwind q;
		stack_len = fit(r, stack_len, &py);
		fill_request(&q, tid, regs, stack_len, start, want_files, max_codes);
		size_t tail = tail_of(&q, stack, stack_len, py);
		if (pchan_send(r->ch, PQ_UNWIND, &q, sizeof q, stack, tail) < 0) return -1;
		n = next_result(r, max_codes, 1);
	}
	if (n < 0) return -1;
	if (n > max_codes) n = max_codes;
	memcpy(codes, ((const struct pr_unwind *)r->reply)->codes, (size_t)n * 8);
	return n;
}

void rstacks_drop_ahead(struct rstacks *r)
{
	while (r->ahead_n) {
		if (next_result(r, AHEAD_CODES, r->ahead_n) < 0) {
			r->ahead_n = 0;
			break;
		}
		r->ahead_head = (r->ahead_head + 1) % AHEAD_MAX;
		r->ahead_n--;
	}
}

void rstacks_last_extent(const struct rstacks *r, uint64_t *end, bool *truncated)
{
	*end = r->end;
	*truncated = r->truncated;
}

const char *rstacks_last_frame_file(struct rstacks *r, int i)
{
	return i >= 0 && i < 2 && r->has_file[i] ? r->files[i] : NULL;
}

int rstacks_locations(void *arg, uint64_t code, const mt_location **locs)
{
	struct rstacks *r = arg;
	const struct loc_entry *e = find(r, code);
	if (!e) return -1;
	*locs = e->locs;
	return e->n;
}

void rstacks_get_stats(const struct rstacks *r, struct stacks_stats *out)
{
	*out = r->stats;
}

bool rstacks_broken(const struct rstacks *r) { return !r->ch || r->ch->broken; }

void rstacks_close(struct rstacks *r)
{
	if (!r) return;
	pchan_close(r->ch);
	for (size_t b = 0; r->buckets && b < r->nbuckets; b++)
		for (struct loc_entry *e = r->buckets[b], *next; e; e = next) {
			next = e->next;
			free(e);
		}
	free(r->buckets);
	free(r->reply);
	free(r);
}
