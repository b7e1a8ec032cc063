/* The per-thread Poisson byte countdown: exponential gaps between sample points over the bytes a
 * thread allocates, mean mean_gap (= 8 / rate). Same statistics as sample_points() in
 * bpf/memtraced.bpf.c (there per CPU, from a table of gaps; here per thread, drawn fresh).
 * No libm, no system call: the PRNG is seeded from the TSC and the thread's TLS address. */
#include "internal.h"
#include "walker.h"

#define MAX_DRAWS 32 /* as in the BPF sampler */

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t next_random(struct sampler_thread *t)
{
	uint64_t x = t->rng;
	if (unlikely(x == 0)) {
		x = splitmix(rdtsc() ^ ((uintptr_t)t * 0x9e3779b97f4a7c15ULL));
		if (x == 0)
			x = 1;
	}
	/* xorshift64* */
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->rng = x;
	return x * 0x2545f4914f6cdd1dULL;
}

uint64_t mts_random(struct sampler_thread *t) { return next_random(t); }

/* Natural logarithm of x > 0 (finite): exponent and mantissa apart, the mantissa in
 * [sqrt(1/2), sqrt(2)) through the atanh series, which there converges to ~1e-11. */
static double ln(double x)
{
	union { double d; uint64_t u; } v = { .d = x };
	int e = (int)((v.u >> 52) & 0x7ff) - 1023;
	v.u = (v.u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
	double m = v.d;
	if (m > 1.41421356237309504880) {
		m *= 0.5;
		e++;
	}
	double s = (m - 1) / (m + 1), s2 = s * s;
	double series = 1 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9 +
			s2 * (1.0 / 11)))));
	return e * 0.69314718055994530942 + 2 * s * series;
}

/* An exponential variate of mean mean_gap, rounded, at least 1 (as the BPF gap table). */
static uint64_t draw_gap(struct sampler_thread *t, uint64_t mean_gap)
{
	double u = (double)((next_random(t) >> 11) + 1) * (1.0 / 9007199254740992.0); /* (0, 1] */
	double g = -ln(u) * (double)mean_gap + 0.5;
	if (g < 1)
		return 1;
	if (g > 1e18)
		return (uint64_t)1e18;
	return (uint64_t)g;
}

uint64_t mts_sample_points(struct sampler_thread *t, uint64_t size)
{
	if (mts_config.all_words) {
		t->countdown = 0; /* every call takes the slow path */
		return (size + 7) / 8;
	}
	uint64_t mean_gap = mts_config.mean_gap;
	if (mean_gap == 0)
		mean_gap = 1;
	uint64_t left = t->countdown > 0 ? (uint64_t)t->countdown : 0;
	if (t->gen != mts_config.gen) { /* the rate changed: a gap of the old rate is stale */
		t->gen = mts_config.gen;
		left = 0;
	}
	if (left == 0)
		left = draw_gap(t, mean_gap);
	if (size < left) {
		t->countdown = (int64_t)(left - size);
		return 0;
	}
	uint64_t n = 1;
	size -= left;
	for (int i = 0; i < MAX_DRAWS; i++) {
		uint64_t gap = draw_gap(t, mean_gap);
		if (size < gap) {
			t->countdown = (int64_t)(gap - size);
			return n;
		}
		size -= gap;
		n++;
	}
	/* A block longer than MAX_DRAWS gaps: the rest counted by its expectation (memoryless, so
	 * a fresh gap after it is still exact), as the BPF sampler does. */
	n += size / mean_gap;
	size %= mean_gap;
	uint64_t gap = draw_gap(t, mean_gap);
	if (size < gap) {
		t->countdown = (int64_t)(gap - size);
	} else {
		n++;
		t->countdown = (int64_t)draw_gap(t, mean_gap);
	}
	return n;
}

uint64_t mts_slow_samples(struct sampler_thread *t, uint64_t size)
{
	STAT_ADD(calls, 1);
	/* the walker thread walks (walker.c); a forked child has none */
	if (unlikely(mts_config.pending_walk) && mts_config.active && !mts_walker_here())
		mts_patch_all(false); /* clears pending_walk when it got the lock */
	if (!mts_config.active || size == 0)
		return 0;
	return mts_sample_points(t, size);
}
