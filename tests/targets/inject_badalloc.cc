// --inject after a std::bad_alloc (tests/test_inject_safety.sh, issue 34): an operator new
// that fails throws through the sampler's wrapper, and every allocation made after it from a
// deeper frame must still be seen.
//
//   inject_badalloc DIR
//
// Prints "ready", waits for DIR/go (memtraced --inject attaches meanwhile), makes a new that
// fails (caught in main), then from 12 frames deeper 1,000 malloc(40) and 1,000 new char[56],
// all kept; prints "truth deep_site 2000", creates DIR/done, waits for DIR/stop, exits 0.
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <unistd.h>

static volatile size_t huge = (size_t)1 << 62;
static void *volatile kept[2000]; // volatile: the allocations are not optimized away

__attribute__((noinline)) static void deep_site(int i)
{
	kept[2 * i] = malloc(40);
	kept[2 * i + 1] = new char[56];
}

__attribute__((noinline)) static void descend(int depth, int i)
{
	char pad[64];
	__asm__ volatile("" : : "r"(pad) : "memory");
	if (depth) descend(depth - 1, i);
	else deep_site(i);
}

static bool exists(const std::string &p) { return access(p.c_str(), F_OK) == 0; }

int main(int argc, char **argv)
{
	if (argc < 2) return 2;
	std::string dir = argv[1];
	printf("ready\n");
	fflush(stdout);
	while (!exists(dir + "/go")) usleep(10000);
	bool thrown = false;
	try {
		char *p = new char[huge];
		p[0] = 1;
	} catch (const std::bad_alloc &) {
		thrown = true;
	}
	for (int i = 0; i < 1000; i++) descend(12, i);
	printf("truth deep_site %d thrown %d\n", 2000, thrown ? 1 : 0);
	fflush(stdout);
	fclose(fopen((dir + "/done").c_str(), "w"));
	while (!exists(dir + "/stop")) usleep(10000);
	return thrown ? 0 : 1;
}
