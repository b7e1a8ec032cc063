// C++ workload of tests/test_inline.sh: allocations through libstdc++'s header templates
// (std::vector, std::string, std::map) inlined into inline member templates of our own, so
// that a -O2 build has inline chains across headers for gdb and memtraced to show.
// Usage: inline_cpp N (N rounds); prints the sizes so that nothing is optimized away.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace store {
template <typename T> struct Shelf {
	std::vector<T> items;
	std::map<int, std::string> labels;

	static inline std::string label(int key) { return std::string(40 + key % 3, 'a' + key % 26); }
	inline void put(int key, T value)
	{
		items.push_back(value);
		labels.emplace(key, label(key));
	}
};
} // namespace store

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 100;
	store::Shelf<long> shelf;
	for (int i = 0; i < rounds; i++)
		shelf.put(i, i * 3L);
	printf("%zu %zu\n", shelf.items.size(), shelf.labels.size());
	return 0;
}
