// An allocating wrapper that has no name once the program is stripped (as clang's
// libclang-cpp.so+0x920dff, issue 38): wrap_alloc only calls operator new and is called from
// three functions, which allocate 50%, 30% and 20% of the bytes through it. Traced with uprobes
// and with the in-process sampler, the report must fold the wrapper into its three callers in
// both (tests/test_modes_agree.sh).
//   unnamed_wrapper N   N rounds; prints "done BYTES"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;

NOINLINE static void *wrap_alloc(size_t n)
{
	void *p = ::operator new(n);
	std::memset(p, 0, 8); // work after the call: no tail call, the frame stays
	return p;
}

NOINLINE static size_t site_half(int i)
{
	void *p = wrap_alloc(500);
	sink = p;
	::operator delete(p);
	return 500 + (size_t)(i & 0);
}

NOINLINE static size_t site_third(int i)
{
	void *p = wrap_alloc(300);
	sink = p;
	::operator delete(p);
	return 300 + (size_t)(i & 0);
}

NOINLINE static size_t site_fifth(int i)
{
	void *p = wrap_alloc(200);
	sink = p;
	::operator delete(p);
	return 200 + (size_t)(i & 0);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;
	size_t total = 0;
	for (int i = 0; i < n; i++) total += site_half(i) + site_third(i) + site_fifth(i);
	std::printf("done %zu\n", total);
	return 0;
}
