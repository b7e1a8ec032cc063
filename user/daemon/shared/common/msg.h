/* memtraced's messages on stderr, one path for all of them: "memtraced: TEXT",
 * "memtraced: note: TEXT", "memtraced: warning: TEXT", "memtraced: error: TEXT".
 *
 * Whatever is drawn on the terminal meanwhile (the live view's status line) is erased before a
 * message through the hook the entry registers, so no module below the entry needs to know the
 * live view. Notes and info are left out with msg_set_quiet(true); warnings and errors never. */
#ifndef MEMTRACED_COMMON_MSG_H
#define MEMTRACED_COMMON_MSG_H
#include <stdbool.h>
#include <stdio.h>

/* The version memtraced names in its messages and in the traces it writes. */
#define MEMTRACED_VERSION "0.1"

void msg_set_quiet(bool quiet);
/* fn (may be NULL) runs before every message: it erases what is drawn on the terminal. */
void msg_set_before_print(void (*fn)(void));
/* The stream messages go to (stderr), after the hook ran: for multi-line output such as the
 * summary. */
FILE *msg_stream(void);

void msg_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* quiet: left out */
void msg_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* quiet: left out */
void msg_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));   /* always */
void msg_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void msg_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
