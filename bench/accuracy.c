/* accuracy: compares the bytes a trace estimates per allocation site with the truth.
 *
 *   accuracy TRACE.ctf TRUTH.txt     (TRUTH.txt "-": no truth, only the trace figures)
 *
 * TRUTH.txt is what tests/targets/sites prints: lines
 *   truth SITE FUNC LINE TOTAL_BYTES LIVE_BYTES CALLS TOTAL_WORDS LIVE_WORDS
 * A sampled allocation belongs to a site when the innermost location of its backtrace (the
 * last location of the last code) is FUNC at LINE. The estimate of a site's allocated words is
 * sum(nsamples) / rate (memtrace's estimator: each sample stands for 1/rate words).
 * Prints a line per site, then key=value lines: accuracy_sites, accuracy_samples,
 * accuracy_unattributed_samples, accuracy_max_rel_err, accuracy_mean_rel_err, trace_alloc_events,
 * trace_bytes, bytes_per_alloc_event. Exit status 1 if the trace cannot be read.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memtrace.h"

#define MAX_SITES 64

struct site {
	char name[64], func[128];
	int line;
	unsigned long long total_words;
	unsigned long long samples;
};

static int read_truth(const char *path, struct site *sites)
{
	FILE *f = fopen(path, "r");
	if (!f) { fprintf(stderr, "accuracy: cannot open truth file %s: %s\n", path, strerror(errno)); return -1; }
	char line[1024];
	int n = 0;
	while (fgets(line, sizeof line, f) && n < MAX_SITES) {
		struct site *s = &sites[n];
		unsigned long long total, live, calls, words;
		if (sscanf(line, "truth %63s %127s %d %llu %llu %llu %llu", s->name, s->func, &s->line,
			   &total, &live, &calls, &words) == 7) {
			s->total_words = words;
			s->samples = 0;
			n++;
		}
	}
	fclose(f);
	if (n == 0) fprintf(stderr, "accuracy: no 'truth SITE FUNC LINE ...' line in %s\n", path);
	return n ? n : -1;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: accuracy TRACE.ctf TRUTH.txt\n");
		return 2;
	}
	struct site sites[MAX_SITES];
	int nsites = strcmp(argv[2], "-") ? read_truth(argv[2], sites) : 0;
	if (nsites < 0) return 1;
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) { fprintf(stderr, "accuracy: cannot open trace %s: %s\n", argv[1], strerror(errno)); return 1; }
	char *err = NULL;
	mt_reader *r = mt_reader_open(fd, NULL, NULL, &err);
	if (!r) {
		fprintf(stderr, "accuracy: %s: %s\n", argv[1], err ? err : "not a memtrace trace");
		free(err);
		return 1;
	}
	double rate = mt_reader_info(r)->sample_rate;
	unsigned long long events = 0, samples = 0, unattributed = 0;
	mt_event ev;
	int rc;
	while ((rc = mt_reader_next(r, &ev)) == 1) {
		if (ev.type != MT_EV_ALLOC) continue;
		events++;
		samples += ev.nsamples;
		const mt_location *locs = NULL;
		int n = ev.backtrace_len ? mt_reader_lookup(r, ev.backtrace[ev.backtrace_len - 1], &locs) : -1;
		int hit = 0;
		if (n > 0) {
			const mt_location *inner = &locs[n - 1];
			for (int i = 0; i < nsites && !hit; i++)
				if ((int)inner->line == sites[i].line && inner->defname && !strcmp(inner->defname, sites[i].func)) {
					sites[i].samples += ev.nsamples;
					hit = 1;
				}
		}
		if (!hit) unattributed += ev.nsamples;
	}
	if (rc < 0) {
		fprintf(stderr, "accuracy: %s: %s\n", argv[1], mt_reader_error(r));
		mt_reader_close(r);
		return 1;
	}
	mt_reader_close(r);
	struct stat st;
	fstat(fd, &st);
	close(fd);

	double max_err = 0, sum_err = 0;
	if (nsites) printf("# site                 true_bytes   estimated_bytes  samples  rel_err\n");
	for (int i = 0; i < nsites; i++) {
		double est_words = rate > 0 ? sites[i].samples / rate : 0;
		double err_rel = sites[i].total_words ? fabs(est_words - sites[i].total_words) / sites[i].total_words : 0;
		printf("# %-18s %13llu %17.0f %8llu  %+.3f\n", sites[i].name, sites[i].total_words * 8,
		       est_words * 8, sites[i].samples,
		       sites[i].total_words ? (est_words - sites[i].total_words) / sites[i].total_words : 0);
		if (err_rel > max_err) max_err = err_rel;
		sum_err += err_rel;
	}
	if (nsites) {
		printf("accuracy_rate=%g\n", rate);
		printf("accuracy_sites=%d\n", nsites);
		printf("accuracy_samples=%llu\n", samples);
		printf("accuracy_unattributed_samples=%llu\n", unattributed);
		printf("accuracy_max_rel_err=%.3f\n", max_err);
		printf("accuracy_mean_rel_err=%.3f\n", sum_err / nsites);
	}
	printf("trace_alloc_events=%llu\n", events);
	printf("trace_bytes=%lld\n", (long long)st.st_size);
	if (events) printf("bytes_per_alloc_event=%.1f\n", (double)st.st_size / events);
	else printf("# bytes_per_alloc_event=n/a: the trace has no allocation event\n");
	return 0;
}
