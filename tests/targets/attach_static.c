/* Test workload for allocsyms: the same, linked -static (Makefile rule): glibc's malloc is
 * part of the executable and found through .symtab. */
#define ATTACH_STATIC 1
#include "attach_report.h"
