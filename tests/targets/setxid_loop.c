/* A daemon that switches its effective uid all the time, as one that drops privileges per
 * request does (issue 47: the attach's stub blocked SIGSETXID, and the program hung for ever
 * in seteuid while our pthread_create waited for the lock seteuid held).
 *
 *   setxid_loop DIR     (run as root)
 *
 * A thread switches its euid to 65534 and back as fast as it can (glibc makes every thread do
 * the same: SIGSETXID); the main thread allocates at work_site and counts its rounds into
 * DIR/progress every 10 ms. Creates DIR/ready; runs until DIR/stop exists. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int stop;
static void *volatile sink;

static __attribute__((noinline)) void *work_site(size_t n)
{
	void *p = malloc(n);
	sink = p;
	return p;
}

static void *switcher(void *arg)
{
	(void)arg;
	while (!stop) {
		if (seteuid(65534) != 0 || seteuid(0) != 0) {
			perror("seteuid");
			exit(1);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: setxid_loop DIR\n");
		return 2;
	}
	char path[4096], tmp[4200], stopf[4096];
	snprintf(stopf, sizeof stopf, "%s/stop", argv[1]);
	snprintf(path, sizeof path, "%s/progress", argv[1]);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	pthread_t t;
	if (pthread_create(&t, NULL, switcher, NULL) != 0) return 1;
	char ready[4096];
	snprintf(ready, sizeof ready, "%s/ready", argv[1]);
	FILE *f = fopen(ready, "w");
	if (f) fclose(f);
	unsigned long rounds = 0;
	while (access(stopf, F_OK) != 0) {
		for (int i = 0; i < 100; i++) free(work_site(64 + (size_t)i));
		rounds++;
		f = fopen(tmp, "w");
		if (f) {
			fprintf(f, "%lu\n", rounds);
			fclose(f);
			rename(tmp, path);
		}
		usleep(10000);
	}
	stop = 1;
	pthread_join(t, NULL);
	return 0;
}
