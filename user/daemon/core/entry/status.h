/* The live view of memtraced while it traces.
 *
 * Two forms, both fed from the session's counters and context trie:
 *  - the status line: one line on stderr, redrawn in place (\r + clear to end of line) at most
 *    4 times a second: samples (and samples/s), the estimated live heap (sum of the trie's
 *    live_nsamples / rate * 8), drops. Only when stderr is a terminal; erased by status_close
 *    so that the final summary starts on a clean line.
 *  - --top: a full-screen table like top(1) of the top live allocation sites (innermost frame
 *    "function file:line", or grouped by function), refreshed every top_interval seconds and at
 *    once when the terminal is resized (SIGWINCH). It is drawn on the alternate screen of the
 *    terminal of stderr, or of /dev/tty when stderr is not a terminal; the terminal is restored
 *    by status_close (and at exit). With keys (attach mode: the terminal is not CMD's), the
 *    terminal is put in non-canonical mode and 'q' quits, 'f' toggles site/function.
 *
 * Everything runs on the session's thread (the trie and the stacks are not thread-safe). */
#ifndef MEMTRACED_STATUS_H
#define MEMTRACED_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memtrace.h"
#include "process/session.h"
#include "model/trie.h"

struct status_opts {
	bool line;            /* the status line (shown only if stderr is a terminal) */
	bool top;             /* the --top table instead of the status line */
	double top_interval;  /* seconds between two tables (> 0) */
	bool top_by_function; /* group by function instead of call site */
	bool keys;            /* read 'q'/'f' from the terminal (not when CMD owns it) */
};

struct status_view;

/* Prepares the view; nothing is drawn yet (messages printed before the first status_update stay
 * visible). Returns 0 and *out (NULL when there is nothing to show), or -1 with a message in
 * err (--top without any terminal). */
int status_open(const struct status_opts *o, struct status_view **out, char *err, size_t errlen);
/* Redraws when due; call it from the main loop (after the session polls) with the sessions
 * traced (n of them, NULL entries are skipped: finished ones) and their pids. Numbers are
 * summed over the sessions; --top merges their sites (location codes are stable across
 * processes). Returns 1 when the user asked to quit ('q' in --top), else 0. v may be NULL. */
int status_update(struct status_view *v, struct session *const *sessions, const pid_t *pids, int n);
/* Erases the status line if one is shown (the next status_update draws it again): call it
 * before printing a message while tracing. No-op without a status line. */
void status_line_clear(void);
/* Erases the status line / leaves the full screen and restores the terminal. v may be NULL. */
void status_close(struct status_view *v);

/* One row of the --top table. */
struct status_site {
	uint64_t code;           /* the leaf call site's location code (0: no stack) */
	uint64_t live_nsamples;  /* estimated live bytes: live_nsamples / rate * 8 */
	uint64_t live_blocks;    /* sampled blocks live */
	char name[200];          /* "function file:line" (by site) or "function file" */
};
/* The live sites of the tries t[0..n) (NULL entries skipped), largest first: groups the live
 * counters of every context by its leaf code (by_function: by the innermost function of that
 * code). locs (may be NULL) names codes, asked with locs_ctx[i] for i = 0.. until one knows the
 * code. Returns the number of sites and a malloc'd array in *out (free it), or -1 if out of
 * memory. *total_nsamples gets the sum over all sites. */
long status_top_sites(const struct trie *const *t, void *const *locs_ctx, int n, mt_locations_fn locs,
		      bool by_function, struct status_site **out, uint64_t *total_nsamples);
/* Human-readable bytes ("512 B", "1.5 KiB", "12.3 MiB", ...) into buf. */
const char *status_format_bytes(double bytes, char *buf, size_t len);

#endif
