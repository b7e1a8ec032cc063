/* One BPF object for many traced processes: its programs, its one ring buffer and its maps are
 * shared by every tracer loaded with the same options, each tracer holding a slot of it
 * (include/memtraced_events.h: owners and cookies). A host is loaded by the first tracer of
 * its options (the verifier's tens of ms are paid once) and unloaded with its last one.
 *
 * One thread per host reads the ring buffer and hands each record to the inbox of the tracer
 * it belongs to (by the owner in the record); tracer_poll takes the records of its own inbox.
 * Internal to the tracer room. */
#ifndef MEMTRACED_TRACER_HOST_H
#define MEMTRACED_TRACER_HOST_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tracer.h"

struct tracer;
struct tracer_host;
struct memtraced_bpf;

/* What makes two tracers able to share one BPF object. */
struct host_key {
	enum tracer_mode mode; /* the one chosen for this kernel (kernel_probe.h) */
	bool floor, no_mappings;
	double rate;
	unsigned stack_bytes, ring_bytes;
};

/* A slot for t in a host of these options, loading one if none has room: t->host, t->owner
 * and t->mode are set. 0, or -1 with a message. */
int host_take_slot(const struct host_key *k, struct tracer *t, char *err, size_t errlen);
/* Gives t's slot back (t's links must be closed already): its records are no longer
 * delivered, its blocks leave the live map. The last slot unloads the host. */
void host_release_slot(struct tracer *t);
/* The slot's process (tracer_load or tracer_adopt): its uprobes record from now on. */
void host_set_tgid(struct tracer *t, pid_t pid);
/* t is attached: the mapping tracepoints (once per host) and the USDT programs see its
 * process from now on. 0, or -1 with a message. */
int host_start(struct tracer *t, char *err, size_t errlen);
void host_mute(struct tracer *t);
void host_set_thin(struct tracer *t, unsigned k); /* the slot's thin (tracer_set_thin) */
/* The slot's Python layout (include/python_frames.h): its samples carry Python frames. */
int host_set_python(struct tracer *t, const struct mt_py_layout *layout);
/* While held, the host's thread hands no record on (tracer_set_sink). */
void host_lock_delivery(struct tracer *t);
void host_unlock_delivery(struct tracer *t);
/* Returns once every record written before the call is in its tracer's inbox. 0, or -1. */
int host_sync(struct tracer *t);
struct memtraced_bpf *host_skel(struct tracer *t);
/* Held around every libbpf USDT attach and USDT link destroy of t's host: libbpf's USDT
 * manager is shared by the host's tracers and not thread-safe. */
void host_usdt_lock(struct tracer *t);
void host_usdt_unlock(struct tracer *t);
double host_ring_fill(struct tracer *t);

/* An inbox item: one record, as read from the ring buffer. */
struct inbox_item {
	struct inbox_item *next;
	size_t len;
	uint64_t data[]; /* 8-aligned, as the ring buffer's records */
};
#endif
