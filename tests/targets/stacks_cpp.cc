// C++ workload of tests/unit/test_stacks.c: a member function of a class template in a
// namespace calls fake_alloc (see stacks_fake_alloc.h), so the caller's frame must come out
// demangled as "shapes::Box<int>::grow(int)". Keep the CALL marker on the line of its call.
#include "stacks_fake_alloc.h"

namespace shapes {
template <typename T> struct Box {
	T base;
	NOIPA long grow(T by)
	{
		long r = fake_alloc(base + by); /* CALL:grow */
		KEEP(r);
		return r + 1;
	}
};
} // namespace shapes

int main()
{
	shapes::Box<int> box{3};
	long r = box.grow(7); /* CALL:main */
	KEEP(r);
	return r == 42;
}
