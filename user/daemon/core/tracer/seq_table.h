/* A hash table from a tracer's seq (never 0) to the block it names, for the tracer's view of
 * which sampled blocks it reported live (the "daemon-visible set" reconciled against the BPF
 * live map). Open addressing, linear probing, deletion by backward shift. */
#ifndef MEMTRACED_SEQ_TABLE_H
#define MEMTRACED_SEQ_TABLE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct seq_entry {
	uint64_t seq;    /* 0: empty slot */
	uint64_t addr;
	uint64_t epoch;  /* reconcile epoch in which it was reported */
};

struct seq_table {
	struct seq_entry *slots;
	size_t cap;      /* power of two, or 0 */
	size_t count;
};

/* Inserts or replaces. Returns 0, or -1 when out of memory. */
int seq_table_put(struct seq_table *t, uint64_t seq, uint64_t addr, uint64_t epoch);
/* The entry for seq, or NULL. Valid until the next put/remove. */
const struct seq_entry *seq_table_get(const struct seq_table *t, uint64_t seq);
/* Removes seq; returns whether it was there (and its entry in *out if out is not NULL). */
bool seq_table_remove(struct seq_table *t, uint64_t seq, struct seq_entry *out);
void seq_table_clear(struct seq_table *t);
void seq_table_free(struct seq_table *t);
#endif
