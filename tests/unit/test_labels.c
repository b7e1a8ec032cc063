/* The service and container labels of a process, from its cgroup path (export/labels.h). */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "export/labels.h"

#define ID "4a1c6b4c1c1d2f2b9a8e7d6c5b4a39281716151413121110f0e0d0c0b0a09080"

static void expect(const char *name, const char *path, const char *service, const char *container)
{
	char s[256], c[128];
	labels_from_cgroup(path, s, sizeof s, c, sizeof c);
	CHECKF(name, strcmp(s, service) == 0 && strcmp(c, container) == 0,
	       "%s: service '%s' container '%s'", path, s, c);
}

int main(void)
{
	expect("labels_systemd_service", "/system.slice/redis-server.service", "redis-server.service", "");
	expect("labels_user_service", "/user.slice/user-1000.slice/user@1000.service/app.slice/web.service",
	       "web.service", "");
	expect("labels_session_none", "/user.slice/user-1000.slice/session-3.scope", "", "");
	expect("labels_docker_systemd", "/system.slice/docker-" ID ".scope", "", ID);
	expect("labels_docker_cgroupfs", "/docker/" ID, "", ID);
	expect("labels_kubernetes", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podabc.slice/cri-containerd-" ID ".scope",
	       "", ID);
	expect("labels_podman", "/machine.slice/libpod-" ID ".scope/container", "", ID);
	expect("labels_not_hex", "/system.slice/docker-xyz.scope", "", "");
	expect("labels_root", "/", "", "");
	return CHECK_DONE();
}
