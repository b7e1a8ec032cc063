/* Test workload for allocsyms: the same, linked -no-pie (Makefile rule): symbol values are not
 * file offsets there. */
#include "attach_report.h"
