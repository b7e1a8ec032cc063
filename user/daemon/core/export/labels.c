/* Labels from a cgroup path (labels.h). */
#include "labels.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/* A container id: 64 hex digits at s (of n bytes), the rest of the component. */
static bool hex64(const char *s, size_t n)
{
	if (n != 64) return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdef", s[i])) return false;
	return true;
}

void labels_from_cgroup(const char *path, char *service, size_t service_len, char *container,
			size_t container_len)
{
	static const char *const prefixes[] = {"docker-", "cri-containerd-", "crio-", "libpod-", NULL};
	service[0] = container[0] = '\0';
	bool after_docker = false; /* the cgroupfs driver's /docker/ID */
	for (const char *c = path; c && *c;) {
		while (*c == '/') c++;
		const char *end = strchr(c, '/');
		size_t n = end ? (size_t)(end - c) : strlen(c);
		if (n && ends_with(c, n, ".service"))
			snprintf(service, service_len, "%.*s", (int)n, c);
		if (after_docker && hex64(c, n)) snprintf(container, container_len, "%.*s", (int)n, c);
		for (int i = 0; prefixes[i] && n && ends_with(c, n, ".scope"); i++) {
			size_t p = strlen(prefixes[i]);
			if (n > p + 6 && memcmp(c, prefixes[i], p) == 0 && hex64(c + p, n - p - 6))
				snprintf(container, container_len, "%.*s", (int)(n - p - 6), c + p);
		}
		after_docker = n == 6 && memcmp(c, "docker", 6) == 0;
		c = end;
	}
}
