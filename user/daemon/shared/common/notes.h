/* A list of notes in a fixed buffer: "first; second; ...", cut when the buffer is full. */
#ifndef MEMTRACED_COMMON_NOTES_H
#define MEMTRACED_COMMON_NOTES_H
#include <stddef.h>

/* Appends a "; "-separated note. */
void notes_add(char *notes, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
