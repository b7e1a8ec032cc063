/* The set of sampled blocks (blockset.c): addresses with their size and weight. */
#ifndef MEMTRACED_SAMPLER_BLOCKSET_H
#define MEMTRACED_SAMPLER_BLOCKSET_H

#include <stdbool.h>
#include <stdint.h>
#include "internal.h"

int blockset_init(void) HIDDEN;                                     /* 0, or -1: no memory */
bool blockset_put(void *p, uint64_t size, uint64_t weight) HIDDEN;  /* false: bucket full */
bool blockset_take(void *p, uint64_t *size, uint64_t *weight) HIDDEN; /* removes p if there */
bool blockset_contains(void *p) HIDDEN;
void blockset_clear(void) HIDDEN;

#endif
