/* Telling systemd how the service is (Type=notify, WatchdogSec=): ready once tracing runs,
 * a status line, and the watchdog's "still alive" from the main loop, so that a main loop
 * stuck for WatchdogSec gets memtraced killed and restarted. Nothing happens when memtraced
 * is not run by systemd (no $NOTIFY_SOCKET). */
#ifndef MEMTRACED_SERVICE_NOTIFY_H
#define MEMTRACED_SERVICE_NOTIFY_H

/* Reads $NOTIFY_SOCKET and $WATCHDOG_USEC (and unsets them: the parser and a -- CMD do
 * not inherit them). */
void service_notify_init(void);
void service_ready(const char *status);
void service_status(const char *status);  /* sent only when it changed */
void service_watchdog_tick(void);           /* WATCHDOG=1 once half the interval passed */
void service_stopping(void);

#endif
