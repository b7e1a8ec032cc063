/* A process with N mapped files (issue 35, finding 9): creates DIR/f0..f(N-1), one byte each,
 * maps a page of each read-only (a data file, as a service that maps its many small files would) and
 * closes it; writes its pid to DIR/ready, then allocates (malloc/free every millisecond)
 * until DIR/stop exists. "many_files DIR N". */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: many_files DIR N\n");
		return 2;
	}
	int n = atoi(argv[2]);
	char path[4096], page[4096] = "data";
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/f%d", argv[1], i);
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, page, 1) != 1) return 1;
		void *m = mmap(NULL, sizeof page, PROT_READ, MAP_PRIVATE, fd, 0);
		close(fd);
		if (m == MAP_FAILED) return 1;
	}
	snprintf(path, sizeof path, "%s/ready", argv[1]);
	FILE *f = fopen(path, "w");
	if (!f) return 1;
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
	snprintf(path, sizeof path, "%s/stop", argv[1]);
	while (access(path, F_OK) != 0) {
		for (int i = 0; i < 20; i++) {
			void *volatile p = malloc(100 + i); /* kept: a malloc/free pair is optimized away */
			free(p);
		}
		usleep(1000);
	}
	return 0;
}
