/* Test workload for allocsyms: a PIE program using glibc's allocator (see attach_report.h). */
#include "attach_report.h"
