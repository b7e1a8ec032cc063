/* A one-way queue of messages in memory shared by two processes (the daemon and its parser):
 * one producer, one consumer, no system call while both are busy, a futex wake only when the
 * other side waits. A message is a header and a payload, never split across the ring's end
 * (a skip marker fills the end instead), so the consumer reads it in place.
 *
 * Waits are bounded: they return after timeout_ms so that the caller can see whether its peer
 * is still alive (a dead peer never wakes anyone). */
#ifndef MEMTRACED_PARSER_SHM_RING_H
#define MEMTRACED_PARSER_SHM_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct shm_ring_hdr {
	_Alignas(64) _Atomic uint64_t head;   /* bytes produced (producer only writes it) */
	_Alignas(64) _Atomic uint64_t tail;   /* bytes consumed (consumer only writes it) */
	_Alignas(64) _Atomic uint32_t futex;  /* bumped on every change a waiter may want */
	_Atomic uint32_t cons_waiting;        /* the consumer sleeps, wanting this many messages */
	_Atomic uint32_t prod_waiting;        /* the producer sleeps, wanting space */
	_Atomic uint32_t closed;              /* the producer is gone */
	_Atomic uint64_t unread;              /* messages produced and not consumed */
};

struct shm_ring {
	struct shm_ring_hdr *h;
	uint8_t *data;
	uint64_t size;          /* a power of two */
	uint64_t trimmed_at;    /* producer: tail when it last gave free pages back */
	uint64_t trimmed_ns;    /* and when (CLOCK_MONOTONIC) */
};

struct shm_msg {
	uint32_t type;          /* 0 is the skip marker, never a message */
	uint32_t len;           /* payload bytes */
	uint8_t payload[];
};

/* The bytes a ring of data_size (a power of two) takes, header included. */
size_t shm_ring_bytes(uint64_t data_size);
/* Over mem (shm_ring_bytes long, zeroed by whoever created it). */
void shm_ring_attach(struct shm_ring *r, void *mem, uint64_t data_size);

/* Producer: room for a message of len payload bytes, or NULL if the ring is full now (it
 * never waits: see shm_ring_wait_space). len must be at most shm_ring_max_payload(). */
struct shm_msg *shm_ring_reserve(struct shm_ring *r, uint32_t type, uint32_t len);
/* The reserved message is complete: the consumer may see it. Once the consumer has read 256
 * KiB more and a second has passed, the producer gives the free pages of the ring back to the
 * system (but the next 64 KiB): pages the messages passed through would otherwise stay resident in both processes, the
 * whole ring once a slow trickle has gone round it (4 MiB per traced process). */
void shm_ring_commit(struct shm_ring *r, struct shm_msg *m);
/* shm_ring_commit without waking the consumer: the producer sends a batch, then
 * shm_ring_flush (a wake per message cost a context switch each, ~2 per sample). */
void shm_ring_commit_quiet(struct shm_ring *r, struct shm_msg *m);
/* Waits (bounded) until len payload bytes fit. false on timeout. */
bool shm_ring_wait_space(struct shm_ring *r, uint32_t len, int timeout_ms);
uint32_t shm_ring_max_payload(const struct shm_ring *r);
void shm_ring_close(struct shm_ring *r);

/* Consumer: the next message, or NULL if none now. */
struct shm_msg *shm_ring_peek(struct shm_ring *r);
/* Done with the message shm_ring_peek returned: its space goes back to the producer. */
void shm_ring_release(struct shm_ring *r, struct shm_msg *m);
/* Waits (bounded) until a message is there; the producer wakes the consumer once `want`
 * messages are waiting or it has nothing more to give (shm_ring_flush), so that a busy
 * producer does not pay a wake per message. false on timeout. */
bool shm_ring_wait_msg(struct shm_ring *r, uint32_t want, int timeout_ms);
/* Producer: wakes a consumer that waits for more than what is there (nothing more follows
 * soon). */
void shm_ring_flush(struct shm_ring *r);
bool shm_ring_is_closed(const struct shm_ring *r);

#endif
