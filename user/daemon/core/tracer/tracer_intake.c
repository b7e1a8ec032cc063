/* Draining the ring buffer into the daemon's callbacks, and reconciling the daemon-visible set
 * of live sampled blocks with the BPF live map. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "memtraced_events.h"
#include "python_frames.h"
#include "memtraced.skel.h"
#include "tracer_host.h"
#include "tracer_internal.h"

static void count(uint64_t *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static void update_live_count(struct tracer *t)
{
	__atomic_store_n(&t->live_count, (uint64_t)t->visible.count, __ATOMIC_RELAXED);
}

static void deliver_alloc(struct tracer *t, const struct mt_alloc_record *r,
			  enum tracer_origin origin)
{
	/* Remember it before the callback: a FREE for it may be the next record. (A mapping
	 * ends through unmaps, which the receiver matches.) */
	if (origin != TRACER_FROM_MAPPING && seq_table_put(&t->visible, r->seq, r->addr, t->epoch))
		count(&t->bad_records, 1); /* out of memory: the block can never be reported freed */
	update_live_count(t);
	if (!t->cb || !t->cb->alloc)
		return;
	bool sampled = origin != TRACER_FROM_MAPPING;
	size_t whole_len = 0;
	const uint8_t *whole = r->stack_more ? deep_join(&t->deep, r->tid, r->seq, r->stack,
							   r->stack_len, r->stack_more, &whole_len)
					     : NULL;
	struct tracer_alloc a = {
		.seq = r->seq, .pid = r->pid, .tid = r->tid, .time_ns = r->time_ns,
		.addr = r->addr, .size = r->size, .nsamples = r->nsamples,
		.regs = (const uint64_t *)r->regs, .stack = r->stack, .stack_len = r->stack_len,
		.fn = (enum alloc_fn)r->fn, .origin = origin,
		.py = (const struct mt_py_frame *)(r->stack + r->stack_reserved),
		.py_n = r->py_frames, .py_status = r->py_status,
		.py_codes = (const struct mt_py_code *)(r->stack + r->stack_reserved +
							(size_t)r->py_frames * sizeof(struct mt_py_frame)),
		.py_ncodes = r->py_codes,
	};
	if (whole) {
		a.stack = whole;
		a.stack_len = whole_len;
	}
	int rc = t->cb->alloc(t->cb_ctx, &a);
	if (rc != 0) { /* not kept: its free, when it comes, is of no block of ours */
		if (sampled) seq_table_remove(&t->visible, r->seq, NULL);
		update_live_count(t);
	}
	if (rc < 0) { /* as if the ring had had no room */
		count(&t->inbox_dropped, 1);
		count(&t->inbox_dropped_samples, 1);
	} else if (rc > 0) {
		count(&t->thinned, 1);
	}
}

static void deliver_free(struct tracer *t, uint64_t seq, uint64_t addr, uint64_t time_ns,
                         uint32_t pid, uint32_t tid)
{
	/* Only blocks we reported, once: a FREE that reconciliation already repaired, or of an
	 * allocation whose record was lost, is dropped here. */
	if (!seq_table_remove(&t->visible, seq, NULL))
		return;
	update_live_count(t);
	if (!t->cb || !t->cb->free)
		return;
	struct tracer_free f = { .seq = seq, .addr = addr, .time_ns = time_ns, .pid = pid, .tid = tid };
	if (t->cb->free(t->cb_ctx, &f) < 0) { /* not kept: the next reconciliation repairs it */
		seq_table_put(&t->visible, seq, addr, 0);
		update_live_count(t);
		count(&t->inbox_dropped, 1);
	}
}

int intake_record(void *ctx, void *data, size_t len)
{
	struct tracer *t = ctx;
	uint32_t type;
	if (len < sizeof(type)) {
		count(&t->bad_records, 1);
		return 0;
	}
	memcpy(&type, data, sizeof(type));
	if (type == MT_REC_ALLOC || type == MT_REC_ALLOC_USDT || type == MT_REC_MAP) {
		const struct mt_alloc_record *r = data;
		if (len < sizeof(*r) || r->stack_len > r->stack_reserved ||
		    r->stack_reserved > len - sizeof(*r) || !r->seq || r->fn >= AF_COUNT ||
		    r->py_frames > MT_PY_MAX_FRAMES || r->py_codes > MT_PY_MAX_NEW ||
		    (size_t)r->py_frames * sizeof(struct mt_py_frame) +
		    (size_t)r->py_codes * sizeof(struct mt_py_code) > len - sizeof(*r) - r->stack_reserved ||
		    (r->stack_more && (r->stack_len != MT_STACK_BYTES_MAX ||
				       r->stack_more > MT_STACK_BYTES_LIMIT - MT_STACK_BYTES_MAX))) {
			count(&t->bad_records, 1);
			return 0;
		}
		count(&t->record_bytes, len);
		if (len > __atomic_load_n(&t->max_record_bytes, __ATOMIC_RELAXED))
			__atomic_store_n(&t->max_record_bytes, len, __ATOMIC_RELAXED);
		deliver_alloc(t, r, type == MT_REC_ALLOC_USDT ? TRACER_FROM_SAMPLER
				    : type == MT_REC_MAP ? TRACER_FROM_MAPPING : TRACER_FROM_PROBE);
	} else if (type == MT_REC_STACK_MORE) {
		const struct mt_stack_more_record *r = data;
		if (len < sizeof(*r) || r->len > len - sizeof(*r) || r->len > MT_STACK_BYTES_MAX ||
		    r->offset < MT_STACK_BYTES_MAX || r->offset > MT_STACK_BYTES_LIMIT - r->len) {
			count(&t->bad_records, 1);
			return 0;
		}
		count(&t->record_bytes, len);
		deep_add(&t->deep, r->tid, r->seq, r->offset, r->data, r->len, MT_STACK_BYTES_MAX);
	} else if (type == MT_REC_FREE) {
		const struct mt_free_record *r = data;
		if (len < sizeof(*r)) {
			count(&t->bad_records, 1);
			return 0;
		}
		deliver_free(t, r->seq, r->addr, r->time_ns, r->pid, r->tid);
	} else if (type == MT_REC_UNMAP) {
		const struct mt_unmap_record *r = data;
		if (len < sizeof(*r)) {
			count(&t->bad_records, 1);
			return 0;
		}
		struct tracer_free f = {.addr = r->addr, .len = r->len, .time_ns = r->time_ns,
					.pid = r->pid, .tid = r->tid, .unmap = true};
		if (t->cb && t->cb->free && t->cb->free(t->cb_ctx, &f) < 0)
			count(&t->inbox_dropped, 1);
	} else {
		count(&t->bad_records, 1);
	}
	return 0;
}

/* Delivers what the host's thread put in t's inbox. */
static int deliver_inbox(struct tracer *t)
{
	pthread_mutex_lock(&t->inbox_lock);
	struct inbox_item *list = t->inbox_head;
	t->inbox_head = t->inbox_tail = NULL;
	t->inbox_bytes = 0;
	pthread_mutex_unlock(&t->inbox_lock);
	int n = 0;
	pthread_mutex_lock(&t->lock);
	for (struct inbox_item *it = list, *next; it; it = next, n++) {
		next = it->next;
		intake_record(t, it->data, it->len);
		free(it);
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

void tracer_set_sink(struct tracer *t, const struct tracer_callbacks *cb, void *ctx)
{
	host_lock_delivery(t); /* no record goes anywhere meanwhile */
	pthread_mutex_lock(&t->lock);
	t->cb = cb;
	t->cb_ctx = ctx;
	t->has_sink = true;
	pthread_mutex_unlock(&t->lock);
	deliver_inbox(t); /* what came before, through the sink, before anything later */
	host_unlock_delivery(t);
}

static void set_cb(struct tracer *t, const struct tracer_callbacks *cb, void *ctx)
{
	pthread_mutex_lock(&t->lock);
	if (!t->has_sink) {
		t->cb = cb;
		t->cb_ctx = ctx;
	}
	pthread_mutex_unlock(&t->lock);
}

/* Every record written before the call, delivered. */
static int drain(struct tracer *t)
{
	if (host_sync(t) < 0)
		return -1;
	return deliver_inbox(t);
}

int tracer_poll(struct tracer *t, int timeout_ms, const struct tracer_callbacks *cb, void *ctx)
{
	if (!t || !t->host)
		return -1;
	set_cb(t, cb, ctx);
	/* Records are submitted without wakeup (a wakeup costs the producer ~3 us): the host's
	 * thread reads the ring every 20 ms, or when it fills past 1/8 (the BPF side then forces
	 * a wakeup). A short poll asks it for a pass now. */
	if (timeout_ms <= 1)
		return drain(t);
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&t->inbox_lock);
	while (!t->inbox_head &&
	       pthread_cond_timedwait(&t->inbox_cond, &t->inbox_lock, &until) == 0) {}
	pthread_mutex_unlock(&t->inbox_lock);
	return deliver_inbox(t);
}

/* Reads the seqs of every block of t's in the BPF live map into out. */
static int snapshot_live_map(struct tracer *t, struct seq_table *out)
{
	int fd = bpf_map__fd(host_skel(t)->maps.live);
	enum { CHUNK = 4096 };
	struct mt_live_key *keys = malloc(CHUNK * sizeof(*keys));
	struct mt_live_block *vals = malloc(CHUNK * sizeof(*vals));
	int rc = -1;
	if (!keys || !vals)
		goto out;
	uint64_t batch = 0;
	bool first = true, batch_ok = true;
	for (;;) {
		__u32 count = CHUNK;
		int e = bpf_map_lookup_batch(fd, first ? NULL : &batch, &batch, keys, vals, &count, NULL);
		int err = e ? errno : 0;
		if (e && err != ENOENT) {
			if (first && (err == EINVAL || err == ENOTSUP || err == EOPNOTSUPP)) {
				batch_ok = false;
				break;
			}
			goto out;
		}
		for (__u32 i = 0; i < count; i++)
			if (keys[i].owner == t->owner && seq_table_put(out, vals[i].seq, keys[i].addr, 0))
				goto out;
		first = false;
		if (err == ENOENT)
			break;
	}
	if (!batch_ok) { /* old kernels: one key at a time */
		struct mt_live_key key, next;
		bool have = false;
		while (bpf_map_get_next_key(fd, have ? &key : NULL, &next) == 0) {
			struct mt_live_block v;
			if (next.owner == t->owner && bpf_map_lookup_elem(fd, &next, &v) == 0 &&
			    seq_table_put(out, v.seq, next.addr, 0))
				goto out;
			key = next;
			have = true;
		}
	}
	rc = 0;
out:
	free(keys);
	free(vals);
	return rc;
}

int tracer_reconcile(struct tracer *t, const struct tracer_callbacks *cb, void *ctx)
{
	if (!t)
		return -1;
	set_cb(t, cb, ctx);
	/* 1. Deliver what is pending. Every block reported so far was put in the live map
	 *    before its record was written, so it is in the map unless it was freed since. */
	if (drain(t) < 0)
		return -1;
	pthread_mutex_lock(&t->lock);
	uint64_t candidates_before = ++t->epoch; /* blocks reported from now on are not checked */
	pthread_mutex_unlock(&t->lock);
	/* 2. Snapshot the map. 3. Deliver the FREE records that raced with the snapshot. */
	struct seq_table in_map = { 0 };
	if (snapshot_live_map(t, &in_map)) {
		seq_table_free(&in_map);
		return -1;
	}
	if (drain(t) < 0) {
		seq_table_free(&in_map);
		return -1;
	}
	/* 4. Reported before the snapshot, not freed through a record, absent from the map: its
	 *    FREE record was lost (ring full) or the block was replaced in the map. */
	size_t nmissing = 0, cap = 64;
	struct seq_entry *missing = malloc(cap * sizeof(*missing));
	if (!missing) {
		seq_table_free(&in_map);
		return -1;
	}
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->visible.cap; i++) {
		const struct seq_entry *e = &t->visible.slots[i];
		if (!e->seq || e->epoch >= candidates_before || seq_table_get(&in_map, e->seq))
			continue;
		if (nmissing == cap) {
			struct seq_entry *bigger = realloc(missing, 2 * cap * sizeof(*missing));
			if (!bigger)
				break;
			missing = bigger;
			cap *= 2;
		}
		missing[nmissing++] = *e;
	}
	seq_table_free(&in_map);
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + now.tv_nsec;
	for (size_t i = 0; i < nmissing; i++)
		deliver_free(t, missing[i].seq, missing[i].addr, now_ns, (uint32_t)t->pid, 0);
	pthread_mutex_unlock(&t->lock);
	free(missing);
	count(&t->reconciled_frees, nmissing);
	return (int)nmissing;
}
