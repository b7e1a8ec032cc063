/* The demo workload of `make demo`: a toy request server with a few allocation sites, one of
 * which leaks. Runs for SECONDS (default 4), then prints what it did.
 *
 *   parse_request   temporary strings, freed at the end of each request (no leak)
 *   render_page     a large output buffer, freed (no leak)
 *   session_cache   one entry per new "user", never evicted (grows without bound: a leak)
 *   log_line        a strdup'd log message that is forgotten 1 time in 8 (a slow leak) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

struct cache_entry {
	struct cache_entry *next;
	unsigned user;
	char profile[480];
};
static struct cache_entry *cache;
static unsigned long cached, leaked_logs;

static NOINLINE char **parse_request(unsigned id, int *nfields)
{
	*nfields = 4 + id % 8;
	char **fields = malloc(*nfields * sizeof *fields);
	for (int i = 0; i < *nfields; i++) {
		fields[i] = malloc(24 + (id * 7 + i * 13) % 200);
		snprintf(fields[i], 24, "field%u.%d", id, i);
	}
	return fields;
}

static NOINLINE char *render_page(char **fields, int n)
{
	size_t size = 4096 + 1024 * (size_t)n;
	char *page = malloc(size);
	size_t off = 0;
	for (int i = 0; i < n && off + 64 < size; i++)
		off += (size_t)snprintf(page + off, size - off, "<p>%s</p>\n", fields[i]);
	return page;
}

static NOINLINE void session_cache(unsigned user)
{
	for (struct cache_entry *e = cache; e && e->user + 64 > user; e = e->next)
		if (e->user == user) return;
	struct cache_entry *e = malloc(sizeof *e); /* never freed: the cache has no eviction */
	e->user = user;
	memset(e->profile, (int)user, sizeof e->profile);
	e->next = cache;
	cache = e;
	cached++;
}

static NOINLINE void log_line(unsigned id, const char *page)
{
	char *msg = strdup(page);
	msg[id % 32] = '\0';
	if (id % 8 == 0) { leaked_logs++; return; } /* forgotten: the early return skips free */
	free(msg);
}

static NOINLINE void handle_request(unsigned id)
{
	int n;
	char **fields = parse_request(id, &n);
	char *page = render_page(fields, n);
	session_cache(id / 3);
	log_line(id, page);
	free(page);
	for (int i = 0; i < n; i++) free(fields[i]);
	free(fields);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 4;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	unsigned id = 0;
	do {
		for (int k = 0; k < 200; k++) handle_request(id++);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
	printf("demo_server: %u requests, %lu cache entries (never evicted), %lu log lines leaked\n",
	       id, cached, leaked_logs);
	return 0;
}
