/* The rings between the daemon and its parser (protocol/shm_ring.c): messages cross whole and
 * in order through a memfd mapped twice (as the two processes map it), and the pages they
 * passed through are given back as the producer goes on: after 8 MiB through a 2 MiB ring the
 * memfd holds far less than the ring. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "protocol/shm_ring.h"

#define RING (2u << 20)

int main(void)
{
	int fd = memfd_create("test-shm-ring", MFD_CLOEXEC);
	size_t bytes = shm_ring_bytes(RING);
	void *a = MAP_FAILED, *b = MAP_FAILED;
	if (fd >= 0 && ftruncate(fd, (off_t)bytes) == 0) {
		a = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		b = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	}
	if (a == MAP_FAILED || b == MAP_FAILED) {
		CHECK("shm_ring_setup", 0);
		return CHECK_DONE();
	}
	struct shm_ring prod, cons;
	shm_ring_attach(&prod, a, RING);
	shm_ring_attach(&cons, b, RING);
	uint64_t sent = 0, got = 0, bad = 0, most_blocks = 0, held_after = 0;
	uint8_t payload[3000];
	/* 8 MiB in messages of varied sizes, the consumer a few messages behind; then, a second
	 * later, 320 KiB more: the pages are given back at most once a second (a ring streaming at
	 * full speed would fault every page in again each round), and then they are */
	for (int round = 0; round < 2; round++) {
		uint64_t until = round == 0 ? 6000 : 6200;
		if (round == 1) usleep(1100 * 1000);
		while (sent < until) {
			uint32_t len = 100 + (uint32_t)(sent * 977 % 2900);
			struct shm_msg *m = shm_ring_reserve(&prod, 7, len);
			if (m) {
				memset(payload, (int)(sent & 0xff), len);
				memcpy(m->payload, &sent, sizeof sent);
				memcpy(m->payload + sizeof sent, payload, len - sizeof sent);
				shm_ring_commit(&prod, m);
				sent++;
			}
			while (got + (m ? 8 : 0) < sent) {
				struct shm_msg *r = shm_ring_peek(&cons);
				if (!r) break;
				uint64_t id;
				memcpy(&id, r->payload, sizeof id);
				uint32_t want = 100 + (uint32_t)(id * 977 % 2900);
				if (id != got || r->type != 7 || r->len != want ||
				    r->payload[r->len - 1] != (uint8_t)(id & 0xff))
					bad++;
				shm_ring_release(&cons, r);
				got++;
			}
			struct stat st;
			if (fstat(fd, &st) == 0 && (uint64_t)st.st_blocks * 512 > most_blocks && sent > 1000)
				most_blocks = (uint64_t)st.st_blocks * 512;
		}
	}
	struct stat st;
	if (fstat(fd, &st) == 0) held_after = (uint64_t)st.st_blocks * 512;
	CHECKF("shm_ring_messages_whole_in_order", bad == 0 && got >= sent - 8, "%llu bad of %llu",
	       (unsigned long long)bad, (unsigned long long)got);
	CHECKF("shm_ring_pages_given_back", most_blocks > 0 && held_after <= 640u << 10,
	       "the memfd held %llu KiB (up to %llu KiB) for a %u KiB ring, a second after a stream",
	       (unsigned long long)(held_after >> 10), (unsigned long long)(most_blocks >> 10),
	       RING >> 10);
	return CHECK_DONE();
}
