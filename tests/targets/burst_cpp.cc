// A short C++ burst (issue: "Real programs as they ship"): 20,000 std::map inserts of strings
// and 5,000 new int[100], as fast as it can, then exit. Prints the number of entries.
#include <cstdio>
#include <map>
#include <string>

int main()
{
	std::map<std::string, std::string> m;
	for (int i = 0; i < 20000; i++)
		m["key number " + std::to_string(i) + " with some length"] = std::string(40 + i % 60, 'v');
	long sum = 0;
	for (int i = 0; i < 5000; i++) {
		int *a = new int[100];
		a[i % 100] = i;
		sum += a[i % 100];
		delete[] a;
	}
	std::printf("entries %zu sum %ld\n", m.size(), sum);
	return 0;
}
