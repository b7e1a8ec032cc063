/* The memtrace trace reader (docs/memtrace-format.md, sec. 11): streaming, one 32 KiB
 * packet buffer. A v1/v2 trace is read as the real memtrace 0.2.3 reader reads it: an error
 * where 0.2.3 raises one, a skipped packet with a warning where 0.2.3 skips one. A v3 trace
 * (packet 0 says version 3) is read as the newest real reader (memtrace HEAD, trace.ml)
 * reads it: decoder state per domain, each packet's allocation ids counted from its
 * alloc_id_begin, no skipping of packets whose ids or times do not follow on, the cache
 * verifier checked only on packets that are decoded, collects may refer forward. Where a
 * real reader would crash, loop or return garbage (references to empty MTF slots, a negative
 * common prefix, a packet_size smaller than its header, a negative id, ...), we stop with
 * an error instead.
 *
 * Error messages: "malformed trace: <what 0.2.3 says> (packet N at byte B: <details>)",
 * N counting packets from 0 (the trace-info packet), B a file offset. */
#include "reader_int.h"

/* ---- events (sec. 4, 5) ----------------------------------------------------------- */

/* Reads an event header: reconstructs the time and checks it as 0.2.3 does. */
static int get_event_header(mt_reader *r, struct cursor *c, int *code, int64_t *time)
{
	const uint8_t *start = c->p;
	uint32_t word;
	if (mtr_get_u32(r, c, "event header", &word) < 0) return -1;
	const struct mtr_header *h = &r->hdr;
	uint32_t low = word & MT_TIME_MASK;
	uint32_t begin_low = (uint32_t)h->time_begin & MT_TIME_MASK;
	uint64_t t = ((uint64_t)h->time_begin & ~(uint64_t)MT_TIME_MASK) + low;
	if (low < begin_low) t += (uint64_t)1 << MT_TIME_BITS; /* the 25-bit counter wrapped */
	*time = (int64_t)t;
	if (*time < h->time_begin || *time > h->time_end)
		return mtr_fail_at(r, file_off(r, start), "time in packet bounds",
			       "event time %" PRId64 " is outside the packet's %" PRId64 "..%" PRId64,
			       *time, h->time_begin, h->time_end);
	*code = (int)(word >> MT_TIME_BITS);
	int ok = *code <= MT_EV_ID_COLLECT ||
		 (*code > MT_EV_ID_SHORT_ALLOC_BASE && *code <= MT_EV_ID_SHORT_ALLOC_BASE + 16);
	if (!ok) {
		char what[48];
		snprintf(what, sizeof(what), "Unknown event code %d", *code);
		return mtr_fail_at(r, file_off(r, start), what, NULL);
	}
	return 0;
}

/* MTF table operations (sec. 7). */
static void mtf_front_files(struct mtr_file_slot *t, int i)
{
	struct mtr_file_slot e = t[i];
	memmove(t + 1, t, (size_t)i * sizeof(*t));
	t[0] = e;
}

static void mtf_front_names(const char **t, int i)
{
	const char *e = t[i];
	memmove(t + 1, t, (size_t)i * sizeof(*t));
	t[0] = e;
}

/* Decodes one packed location (sec. 5.2) into *loc. */
static int get_packed_location(mt_reader *r, struct cursor *c, mt_location *loc)
{
	const uint8_t *start = c->p;
	uint32_t low;
	uint16_t high;
	if (mtr_get_u32(r, c, "packed location", &low) < 0 || mtr_get_u16(r, c, "packed location", &high) < 0)
		return -1;
	uint64_t packed = (uint64_t)high << 32 | low;
	loc->line = packed & 0xFFFFF;
	loc->start_char = (packed >> 20) & 0xFF;
	loc->end_char = (packed >> 28) & 0x3FF;
	int fcode = (packed >> 38) & 31, dcode = (packed >> 43) & 31;

	if (fcode == MTR_MTF_NEW) {
		const char *name;
		if (mtr_get_string(r, c, "filename", &name) < 0) return -1;
		/* 0.2.3 quirk: the new entry inherits the defname table of the entry it pushes
		 * out of slot 30 (a fresh one if slot 30 is empty). */
		int deftab;
		if (r->dom->files[MTR_MTF_SLOTS - 1].name) {
			deftab = r->dom->files[MTR_MTF_SLOTS - 1].deftab;
		} else {
			if (r->dom->ndeftabs >= MTR_MTF_SLOTS) /* cannot happen: slot 30 fills first */
				return mtr_fail_at(r, file_off(r, start), "location MTF", "too many tables");
			deftab = r->dom->ndeftabs++;
			memset(r->dom->defnames[deftab], 0, sizeof(r->dom->defnames[deftab]));
		}
		memmove(r->dom->files + 1, r->dom->files, (MTR_MTF_SLOTS - 1) * sizeof(r->dom->files[0]));
		r->dom->files[0] = (struct mtr_file_slot){ name, deftab };
	} else {
		if (!r->dom->files[fcode].name)
			return mtr_fail_at(r, file_off(r, start), "location refers to an empty MTF slot",
				       "filename slot %d was never filled", fcode);
		mtf_front_files(r->dom->files, fcode);
	}
	loc->filename = r->dom->files[0].name;

	const char **defs = r->dom->defnames[r->dom->files[0].deftab];
	if (dcode == MTR_MTF_NEW) {
		const char *name;
		if (mtr_get_string(r, c, "defname", &name) < 0) return -1;
		memmove(defs + 1, defs, (MTR_MTF_SLOTS - 1) * sizeof(defs[0]));
		defs[0] = name;
	} else {
		if (!defs[dcode])
			return mtr_fail_at(r, file_off(r, start), "location refers to an empty MTF slot",
				       "defname slot %d of file \"%.100s\" was never filled", dcode,
				       loc->filename);
		mtf_front_names(defs, dcode);
	}
	loc->defname = defs[0];
	return 0;
}

static int get_location_event(mt_reader *r, struct cursor *c, const uint8_t *ev_start)
{
	uint64_t raw;
	uint8_t nlocs;
	if (mtr_get_u64(r, c, "location code", &raw) < 0 || mtr_get_u8(r, c, "nlocs", &nlocs) < 0)
		return -1;
	int64_t code = to_ocaml_int(raw);
	for (int i = 0; i < nlocs; i++)
		if (get_packed_location(r, c, &r->scratch[i]) < 0) return -1;

	const mt_location *known;
	int n = mtr_loctab_find(r->tab, (uint64_t)code, &known);
	if (n >= 0) {
		if (!mtr_locs_equal(known, n, r->scratch, nlocs))
			return mtr_fail_at(r, file_off(r, ev_start), "consistent location info",
				       "code 0x%" PRIx64 " was described before with a different "
				       "location list", (uint64_t)code);
		return 0;
	}
	if (mtr_loctab_add(r->tab, (uint64_t)code, r->scratch, nlocs) < 0) {
		mtr_set_error(r, "out of memory reading a trace");
		return -1;
	}
	return 0;
}

static int bt_push(mt_reader *r, size_t *len, uint64_t code, const uint8_t *ev_start)
{
	if (*len >= r->dom->bt_cap) {
		if (r->dom->bt_cap >= MTR_MAX_BACKTRACE)
			return mtr_fail_at(r, file_off(r, ev_start), "backtrace too long",
				       "more than %u frames", MTR_MAX_BACKTRACE);
		size_t cap = r->dom->bt_cap ? r->dom->bt_cap * 2 : 1024;
		uint64_t *bt = realloc(r->dom->bt, cap * sizeof(*bt));
		if (!bt) {
			mtr_set_error(r, "out of memory reading a trace");
			return -1;
		}
		r->dom->bt = bt;
		r->dom->bt_cap = cap;
	}
	r->dom->bt[(*len)++] = code;
	return 0;
}

/* Decodes n_encoded codewords (sec. 6.3). The result is r->dom->bt[0 .. r->dom->bt_len). */
static int get_backtrace(mt_reader *r, struct cursor *c, int64_t common_prefix, unsigned nenc,
			 const uint8_t *ev_start)
{
	/* G28: a prefix longer than the previous backtrace returns the previous one; the
	 * codewords still update the cache. */
	int keep = (uint64_t)common_prefix <= r->dom->bt_len;
	size_t len = keep ? (size_t)common_prefix : 0;
	unsigned p = 0; /* predecessor bucket */
	for (unsigned i = 0; i < nenc; i++) {
		uint16_t cw;
		if (mtr_get_u16(r, c, "backtrace codeword", &cw) < 0) return -1;
		unsigned b = cw >> 2, tag = cw & 3;
		r->dom->cache_pred[p] = (uint16_t)b;
		p = b;
		if (tag == 3) {
			uint64_t lit;
			if (mtr_get_u64(r, c, "backtrace literal", &lit) < 0) return -1;
			r->dom->cache_loc[b] = to_ocaml_int(lit);
			if (keep && bt_push(r, &len, (uint64_t)r->dom->cache_loc[b], ev_start) < 0) return -1;
			continue;
		}
		unsigned npred = tag;
		if (tag == 2) {
			uint8_t n8;
			if (mtr_get_u8(r, c, "prediction count", &n8) < 0) return -1;
			npred = n8;
		}
		if (keep && bt_push(r, &len, (uint64_t)r->dom->cache_loc[b], ev_start) < 0) return -1;
		for (unsigned k = 0; k < npred; k++) {
			p = r->dom->cache_pred[p];
			if (keep && bt_push(r, &len, (uint64_t)r->dom->cache_loc[p], ev_start) < 0)
				return -1;
		}
	}
	if (keep) r->dom->bt_len = len;
	return 0;
}

static int get_alloc_event(mt_reader *r, struct cursor *c, int code, mt_event *ev,
			   const uint8_t *ev_start)
{
	int64_t length = 1, nsamples = 1, prefix;
	uint8_t source = MT_SOURCE_MINOR;
	unsigned nenc;
	if (code == MT_EV_ID_ALLOC) {
		if (mtr_get_vint(r, c, "alloc length", &length) < 0 ||
		    mtr_get_vint(r, c, "alloc nsamples", &nsamples) < 0 ||
		    mtr_get_u8(r, c, "alloc source", &source) < 0)
			return -1;
		if (source > MT_SOURCE_EXTERNAL)
			return mtr_fail_at(r, file_off(r, ev_start), "source",
				       "allocation source %u is not 0, 1 or 2", source);
		if (length < 0 || nsamples < 0)
			return mtr_fail_at(r, file_off(r, ev_start), "negative allocation size",
				       "length %" PRId64 ", nsamples %" PRId64, length, nsamples);
	} else {
		length = code - MT_EV_ID_SHORT_ALLOC_BASE;
	}
	if (mtr_get_vint(r, c, "common_prefix", &prefix) < 0) return -1;
	if (code == MT_EV_ID_ALLOC) {
		uint16_t n16;
		if (mtr_get_u16(r, c, "n_encoded", &n16) < 0) return -1;
		nenc = n16;
	} else {
		uint8_t n8;
		if (mtr_get_u8(r, c, "n_encoded", &n8) < 0) return -1;
		nenc = n8;
	}
	if (prefix < 0)
		return mtr_fail_at(r, file_off(r, ev_start), "negative common prefix",
			       "common_prefix is %" PRId64, prefix);
	if (get_backtrace(r, c, prefix, nenc, ev_start) < 0) return -1;

	ev->type = MT_EV_ALLOC;
	ev->id = (uint64_t)r->alloc_count++;
	ev->length = (uint64_t)length;
	ev->nsamples = (uint64_t)nsamples;
	ev->source = (enum mt_source)source;
	ev->backtrace = r->dom->bt;
	ev->backtrace_len = r->dom->bt_len;
	ev->common_prefix = (size_t)prefix;
	/* The file's prefix is relative to the domain's previous allocation; consumers get it
	 * relative to the previous allocation returned, of whatever domain. */
	const struct mtr_domain *last = r->last_alloc_dom;
	if (last && last != r->dom) {
		size_t n = 0;
		while (n < last->bt_len && n < r->dom->bt_len && last->bt[n] == r->dom->bt[n]) n++;
		ev->common_prefix = n;
	}
	r->last_alloc_dom = r->dom;
	return 0;
}

static int get_promote_collect(mt_reader *r, struct cursor *c, int code, mt_event *ev,
			       const uint8_t *ev_start)
{
	const char *what = code == MT_EV_ID_PROMOTE ? "promote id sync" : "collect id sync";
	int64_t delta, id;
	if (mtr_get_vint(r, c, "object id delta", &delta) < 0) return -1;
	/* The newest reader lets a collect refer forward (an object of a domain that has
	 * ended, collected by another); 0.2.3 and every promote do not. */
	if (delta < 0 && !(r->v3 && code == MT_EV_ID_COLLECT))
		return mtr_fail_at(r, file_off(r, ev_start), what, "id delta %" PRId64 " is negative", delta);
	/* Both readers hand out id -1 (or less) here; we refuse. */
	if (!r->v3 && delta >= r->alloc_count)
		return mtr_fail_at(r, file_off(r, ev_start), what,
			       "id delta %" PRId64 " refers to an allocation before the first "
			       "(%" PRId64 " allocations so far)", delta, r->alloc_count);
	if (__builtin_sub_overflow(r->alloc_count - 1, delta, &id) || id < 0)
		return mtr_fail_at(r, file_off(r, ev_start), what,
			       "id delta %" PRId64 " from the packet's next id %" PRId64
			       " gives no valid id", delta, r->alloc_count);
	ev->type = code == MT_EV_ID_PROMOTE ? MT_EV_PROMOTE : MT_EV_COLLECT;
	ev->id = (uint64_t)id;
	ev->backtrace = NULL;
	ev->backtrace_len = 0;
	ev->common_prefix = 0;
	ev->length = ev->nsamples = 0;
	ev->source = MT_SOURCE_MINOR;
	return 0;
}

/* Decodes the next event of the current packet. Returns 1 = *ev filled, 0 = a location
 * event was consumed, -1 = error. */
static int next_event_in_packet(mt_reader *r, mt_event *ev)
{
	struct cursor c = { r->buf + r->pos, r->buf + r->content_end };
	const uint8_t *start = c.p;
	int code;
	int64_t time;
	if (get_event_header(r, &c, &code, &time) < 0) return -1;
	if (time < r->dom->last_time)
		return mtr_fail_at(r, file_off(r, start), "monotone timestamps",
			       "event time %" PRId64 " is before the previous event's %" PRId64, time,
			       r->dom->last_time);
	r->dom->last_time = time;
	int rc;
	switch (code) {
	case MT_EV_ID_TRACE_INFO:
		return mtr_fail_at(r, file_off(r, start), "Multiple trace-info events present", NULL);
	case MT_EV_ID_LOCATION: rc = get_location_event(r, &c, start); break;
	case MT_EV_ID_PROMOTE:
	case MT_EV_ID_COLLECT: rc = get_promote_collect(r, &c, code, ev, start); break;
	default: rc = get_alloc_event(r, &c, code, ev, start); break;
	}
	if (rc < 0) return -1;
	r->pos = (size_t)(c.p - r->buf);
	if (code == MT_EV_ID_LOCATION) return 0;
	ev->time_us = (uint64_t)time;
	ev->domain = r->hdr.domain;
	return 1;
}

/* ---- packets (sec. 11) ------------------------------------------------------------ */

/* The newest reader's start of a packet it decodes: its domain's state, the cache verifier
 * against that state, the allocation counter from alloc_id_begin. */
static int start_v3_packet(mt_reader *r, const struct mtr_header *h)
{
	if (mtr_select_domain(r, h->domain) < 0 || mtr_check_verifier(r, h) < 0) return -1;
	int64_t id_begin = to_ocaml_int((uint64_t)h->alloc_id_begin);
	if (id_begin < 0)
		return mtr_fail_at(r, r->packet_off + mt_h_off(h->version, MT_H_ALLOC_BEGIN),
			       "negative alloc id", "alloc_id_begin is %" PRId64, id_begin);
	r->alloc_count = id_begin;
	return 0;
}

/* Finds the next packet to decode, skipping (with a warning) those the real reader of the
 * trace's version skips. Returns 1 = a packet is ready, 0 = end of trace, -1 = error. */
static int start_packet(mt_reader *r)
{
	for (;;) {
		if (r->end - r->pos < MTR_HEADER_READAHEAD && mtr_refill(r) < 0) return -1;
		if (r->pos == r->end) return 0;
		r->packet_no++;
		r->packet_off = file_off(r, r->buf + r->pos);
		struct mtr_header *h = &r->hdr;
		if (mtr_parse_header(r, h, !r->v3) < 0) return -1;
		r->pos += h->header_size;
		size_t want = (size_t)h->content_size;
		if (r->end - r->pos < want && mtr_refill(r) < 0) return -1;
		size_t have = r->end - r->pos;
		if (have > want) have = want;

		if (!r->v3 && !(r->dom->last_time <= h->time_begin &&
				r->alloc_count == to_ocaml_int((uint64_t)h->alloc_id_begin))) {
			mtr_warn(r, "skipping bad packet at id %" PRId64 " %" PRId64 "-%" PRId64
				" (packet %" PRIu64 " at byte %" PRIu64 ")",
			     r->alloc_count, h->alloc_id_begin, h->alloc_id_end, r->packet_no,
			     r->packet_off);
		} else if (h->pid != r->info.pid) {
			mtr_warn(r, "skipping bad packet (wrong pid: %" PRId64 ", but tracing %" PRId64
				") (packet %" PRIu64 " at byte %" PRIu64 ")",
			     (int64_t)h->pid, (int64_t)r->info.pid, r->packet_no, r->packet_off);
		} else if (have < want) {
			mtr_warn(r, "skipping truncated packet (packet %" PRIu64 " at byte %" PRIu64
				": %zu content bytes declared, the input ends after %zu)",
			     r->packet_no, r->packet_off, want, have);
		} else {
			if (r->v3 && start_v3_packet(r, h) < 0) return -1;
			if (h->time_end > 0 && (uint64_t)h->time_end > r->last_packet_end)
				r->last_packet_end = (uint64_t)h->time_end;
			r->content_end = r->pos + want;
			return 1;
		}
		r->pos += have;
	}
}

int mt_reader_next(mt_reader *r, mt_event *ev)
{
	if (r->state < 0) return -1;
	if (r->state > 0) return 0;
	for (;;) {
		if (!r->in_packet) {
			int rc = start_packet(r);
			if (rc <= 0) {
				if (rc == 0) r->state = 1;
				return rc;
			}
			r->in_packet = 1;
		}
		if (r->pos == r->content_end) {
			r->in_packet = 0;
			if (r->hdr.alloc_id_end != r->alloc_count)
				return mtr_fail_at(r, r->packet_off + mt_h_off(r->hdr.version, MT_H_ALLOC_END),
					       "alloc id sync",
					       "alloc_id_end is %" PRId64 " but the packet ends at "
					       "allocation %" PRId64, r->hdr.alloc_id_end, r->alloc_count);
			continue;
		}
		int rc = next_event_in_packet(r, ev);
		if (rc != 0) return rc;
	}
}

/* ---- packet 0: trace info (sec. 5.1) ---------------------------------------------- */

static int read_trace_info(mt_reader *r)
{
	if (mtr_refill(r) < 0) return -1;
	r->packet_no = 0;
	r->packet_off = 0;
	if (r->end == 0) return mtr_fail_at(r, 0, "buffer underflow at position 0", "the input is empty");
	/* Packet 0's version says which real reader this trace is read as. */
	r->v3 = r->end >= MT_H_VERSION + 2 && mt_get_u16(r->buf + MT_H_VERSION) >= 3;
	struct mtr_header *h = &r->hdr;
	if (mtr_parse_header(r, h, 0) < 0) return -1;
	const size_t hsize = h->header_size;
	size_t have = r->end - hsize;
	if ((size_t)h->content_size > have)
		return mtr_fail_at(r, MT_H_PACKET_SIZE, "trace info packet size",
			       "the packet declares %" PRId64 " content bytes, the input has %zu",
			       h->content_size, have);
	struct cursor c = { r->buf + hsize, r->buf + hsize + h->content_size };
	int code;
	int64_t time;
	if (get_event_header(r, &c, &code, &time) < 0) return -1;
	if (code != MT_EV_ID_TRACE_INFO)
		return mtr_fail_at(r, hsize, "trace info packet code",
			       "the first event has code %d, not 0", code);
	if (time != h->time_begin)
		return mtr_fail_at(r, hsize, "trace info packet time",
			       "event time %" PRId64 " differs from timestamp_begin %" PRId64, time,
			       h->time_begin);
	mt_trace_info *info = &r->info;
	uint64_t rate_bits;
	uint8_t word_size;
	if (mtr_get_u64(r, &c, "sample_rate", &rate_bits) < 0 ||
	    mtr_get_u8(r, &c, "word_size", &word_size) < 0 ||
	    mtr_get_string(r, &c, "executable_name", &info->executable_name) < 0 ||
	    mtr_get_string(r, &c, "host_name", &info->host_name) < 0 ||
	    mtr_get_string(r, &c, "ocaml_runtime_params", &info->ocaml_runtime_params) < 0 ||
	    mtr_get_u64(r, &c, "pid", &info->pid) < 0)
		return -1;
	memcpy(&info->sample_rate, &rate_bits, sizeof(rate_bits));
	info->word_size = word_size;
	info->context = "";
	if (h->version >= 2 && mtr_get_string(r, &c, "context", &info->context) < 0) return -1;
	if (c.p != c.end)
		return mtr_fail_at(r, file_off(r, c.p), "trace info packet done",
			       "%zu bytes follow the trace-info event", (size_t)(c.end - c.p));
	info->start_time_us = (uint64_t)h->time_begin;
	info->format_version = h->version;
	info->initial_domain = h->domain;
	r->pos = hsize + (size_t)h->content_size;
	/* A v1/v2 trace has one decoder state, domain 0's, from the start (0.2.3 checks the
	 * verifier while parsing a header, before it knows whether it decodes the packet). */
	if (!r->v3 && mtr_select_domain(r, 0) < 0) return -1;
	return 0;
}

mt_reader *mt_reader_open(int fd, mt_warn_fn warn_fn, void *warn_ctx, char **err)
{
	if (err) *err = NULL;
	mt_reader *r = calloc(1, sizeof(*r));
	if (!r || !(r->tab = mtr_loctab_new())) {
		if (err) *err = strdup("out of memory opening a trace");
		free(r);
		return NULL;
	}
	r->fd = fd;
	r->warn = warn_fn;
	r->warn_ctx = warn_ctx;
	if (read_trace_info(r) < 0) {
		if (err) *err = r->err ? strdup(r->err) : strdup("cannot read the trace");
		mt_reader_close(r);
		return NULL;
	}
	return r;
}

const mt_trace_info *mt_reader_info(const mt_reader *r) { return &r->info; }

uint64_t mt_reader_packets_end_us(const mt_reader *r) { return r->last_packet_end; }

int mt_reader_lookup(const mt_reader *r, uint64_t code, const mt_location **locs)
{
	return mtr_loctab_find(r->tab, code, locs);
}

const char *mt_reader_error(const mt_reader *r) { return r->err ? r->err : "no error"; }

void mt_reader_close(mt_reader *r)
{
	if (!r) return;
	mtr_loctab_free(r->tab);
	mtr_free_domains(r);
	free(r->err);
	free(r);
}
