/* Labels that name a process beyond its pid, so that its series and profiles survive a
 * restart (issue 36): the systemd unit it runs in and its container, from its cgroup path
 * (/proc/PID/cgroup). Container runtimes' own metadata is not read. */
#ifndef MEMTRACED_EXPORT_LABELS_H
#define MEMTRACED_EXPORT_LABELS_H
#include <stddef.h>

/* From a cgroup v2 path ("/system.slice/redis-server.service"): service, the innermost
 * systemd service unit ("redis-server.service"), and container, the id of a container
 * (docker-ID.scope, cri-containerd-ID.scope, crio-ID.scope, libpod-ID.scope, /docker/ID:
 * ID 64 hex digits); "" where there is none. */
void labels_from_cgroup(const char *path, char *service, size_t service_len, char *container,
			size_t container_len);

#endif
