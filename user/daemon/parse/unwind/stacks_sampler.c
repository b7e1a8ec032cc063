/* The in-process sampler's operator new wrappers (stacks_sampler.h). */
#include "stacks_sampler.h"

#include <string.h>

/* user/sampler/wrap_ext.c's wrappers, and the functions they stand for as libstdc++ names
 * them. */
static const struct {
	const char *wrapper, *name;
} news[] = {
	{"mts_new", "operator new(unsigned long)"},
	{"mts_new_array", "operator new[](unsigned long)"},
	{"mts_new_nothrow", "operator new(unsigned long, std::nothrow_t const&)"},
	{"mts_new_array_nothrow", "operator new[](unsigned long, std::nothrow_t const&)"},
	{"mts_new_aligned", "operator new(unsigned long, std::align_val_t)"},
	{"mts_new_array_aligned", "operator new[](unsigned long, std::align_val_t)"},
	{"mts_new_aligned_nothrow", "operator new(unsigned long, std::align_val_t, std::nothrow_t const&)"},
	{"mts_new_array_aligned_nothrow",
	 "operator new[](unsigned long, std::align_val_t, std::nothrow_t const&)"},
};
#define NNEWS (int)(sizeof news / sizeof news[0])

int sampler_new_index(const char *symbol)
{
	for (int i = 0; symbol && i < NNEWS; i++)
		if (strcmp(symbol, news[i].wrapper) == 0) return i;
	return -1;
}

const char *sampler_new_name(int i) { return i >= 0 && i < NNEWS ? news[i].name : NULL; }
