/* The slow paths shared by the wrappers: a sampled allocation enters the sampled set and fires
 * otel_memory:alloc; a sampled block leaving fires otel_memory:free. Nothing here allocates. */
#include "internal.h"
#include "blockset.h"

void mts_usdt_alloc(uint64_t ptr, uint64_t size, uint64_t weight) HIDDEN;
void mts_usdt_free(uint64_t ptr) HIDDEN;

struct memtraced_sampler_stats memtraced_sampler_stats __attribute__((visibility("default")));
struct memtraced_sampler_check memtraced_sampler_check __attribute__((visibility("default")));
__thread struct sampler_thread mts_thread __attribute__((tls_model("initial-exec")));
struct memtraced_sampler_thin memtraced_sampler_thin __attribute__((visibility("default"))) = {
	.magic = MEMTRACED_SAMPLER_THIN_MAGIC, .k = 1};

/* memtraced_sampler_thin (sampler.h): 0 if this sample is left out, else the factor its
 * weight is multiplied by (1: no thinning). */
static uint32_t thin_keeps(struct sampler_thread *t)
{
	uint32_t k = memtraced_sampler_thin.k;
	if (k <= 1 && !t->thin_left) return 1;
	if (!t->thin_left) { /* a new block, of the k asked now */
		if (k > 4096) k = 4096;
		t->thin_k = k;
		t->thin_left = k;
		t->thin_pick = (uint32_t)(mts_random(t) % k);
	}
	uint32_t at = t->thin_k - t->thin_left--;
	return at == t->thin_pick ? t->thin_k : 0;
}

void mts_record_alloc(struct sampler_thread *t, int fn, void *p, uint64_t size, uint64_t nsamples)
{
	uint32_t k = thin_keeps(t);
	if (!k) {
		STAT_ADD(thinned, 1);
		return;
	}
	nsamples *= k;
	uint64_t weight = nsamples * (mts_config.all_words ? 8 : mts_config.mean_gap);
	if (!blockset_put(p, size, weight))
		return; /* the set has no room here: not sampled (counted as set_full) */
	t->allocs++;
	t->nsamples += nsamples;
	STAT_ADD(samples, 1);
	STAT_ADD(nsamples, nsamples);
	STAT_ADD(sampled_bytes, size);
	STAT_ADD(allocs_by_fn[fn], 1);
	if (mts_alloc_sem) {
		STAT_ADD(usdt_allocs, 1);
		mts_usdt_alloc((uintptr_t)p, size, weight);
	}
}

bool mts_forget_block(int fn, void *p, uint64_t *size, uint64_t *weight)
{
	if (!blockset_take(p, size, weight))
		return false;
	mts_thread.frees++;
	STAT_ADD(sampled_frees, 1);
	STAT_ADD(frees_by_fn[fn], 1);
	if (mts_free_sem) {
		STAT_ADD(usdt_frees, 1);
		mts_usdt_free((uintptr_t)p);
	}
	return true;
}

void mts_restore_block(void *p, uint64_t size, uint64_t weight)
{
	STAT_ADD(realloc_failed, 1);
	if (!blockset_put(p, size, weight))
		return;
	if (mts_alloc_sem) {
		STAT_ADD(usdt_allocs, 1);
		mts_usdt_alloc((uintptr_t)p, size, weight);
	}
}

__attribute__((visibility("default")))
void memtraced_sampler_thread_counts(unsigned long out[3])
{
	out[0] = mts_thread.allocs;
	out[1] = mts_thread.frees;
	out[2] = mts_thread.nsamples;
}
