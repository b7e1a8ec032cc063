// C++ workload of tests/test_e2e.sh: operator new[] called from a member function of a class
// template in a namespace, reached through an overloaded operator and a lambda, so that the
// dump shows demangled names:
//   main -> main::{lambda(int)#1}::operator()(int) const
//        -> geo::Grid<double>::operator+=(int) -> geo::Grid<double>::grow(int) -> new[]
// Usage: e2e_cpp N (N rounds). Keep every CALL marker on the line of its call.
#include <cstdio>
#include <cstdlib>

#define NOIPA __attribute__((noipa))

namespace geo {
template <typename T> struct Grid {
	T *cells = nullptr;
	int n = 0;
	NOIPA void grow(int by)
	{
		T *bigger = new T[n + by]; /* CALL:grow */
		for (int i = 0; i < n; i++)
			bigger[i] = cells[i];
		delete[] cells;
		cells = bigger;
		n += by;
	}
	NOIPA Grid &operator+=(int by)
	{
		grow(by); /* CALL:operator+= */
		return *this;
	}
	~Grid() { delete[] cells; }
};
} // namespace geo

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 10;
	auto step = [](int by) NOIPA {
		geo::Grid<double> g;
		g += by; /* CALL:lambda */
		return g.n;
	};
	long total = 0;
	for (long i = 0; i < rounds; i++)
		total += step(505); /* CALL:main */
	printf("total %ld\n", total);
	return 0;
}
