/* A target that carries an in-process sampler of its own (built with one, or linked with a
 * library that has one, e.g. libdatadog's heap sampler): the otel_memory:alloc USDT probe
 * of the OpenTelemetry memory design in one of its mapped objects. Our own sampler library
 * (libmemtraced_sampler.so) does not count: left in place by an earlier --inject it is inert. */
#ifndef MEMTRACED_INJECT_CARRIED_SAMPLER_H
#define MEMTRACED_INJECT_CARRIED_SAMPLER_H
#include <stddef.h>
#include <sys/types.h>

/* 0 and the object's path (under /proc/PID/root, usable by the tracer), or -1 if none. */
int carried_sampler_find(pid_t pid, char *path, size_t pathlen);

#endif
