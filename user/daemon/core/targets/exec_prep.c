/* Preparing an exec'd program's probes while its process is held (see exec_prep.h). */
#include "exec_prep.h"
#include "parser/parser.h"
#include "common/deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "process/target.h"

struct spare {
	struct spare *next;
	pid_t pid;             /* 0: loaded for no process yet (tracer_adopt) */
	struct tracer *tracer; /* loaded, not attached */
};

struct watched {
	pid_t pid;
	struct session *s;
};

struct exec_prep {
	pthread_mutex_t lock;
	pthread_cond_t added;  /* a program was prepared */
	struct watched *w;   /* sessions to mute at their process's exec */
	int nw, wcap;
	struct tracer_opts opts;
	struct spare *spares;
	struct exec_prepared *head, *tail; /* in exec order */
	/* spares for no process yet, kept loaded by a thread of their own (--follow-forks: a
	 * fork's child is held until its probes are in place, then again at its exec) */
	pthread_cond_t want;   /* one was taken */
	pthread_t loader;
	bool loader_started, stop;
	int keep;              /* how many */
};

struct exec_prep *exec_prep_new(const struct tracer_opts *opts)
{
	struct exec_prep *p = calloc(1, sizeof *p);
	if (!p) return NULL;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->added, &ca);
	pthread_cond_init(&p->want, &ca);
	pthread_condattr_destroy(&ca);
	p->opts = *opts;
	return p;
}

/* pid's own spare; else, with any, one loaded for no process, given to pid. */
static struct tracer *take_spare_for(struct exec_prep *p, pid_t pid, bool any)
{
	struct tracer *t = NULL;
	pthread_mutex_lock(&p->lock);
	struct spare **found = NULL;
	for (struct spare **s = &p->spares; *s && !found; s = &(*s)->next)
		if ((*s)->pid == pid) found = s;
	for (struct spare **s = &p->spares; any && *s && !found; s = &(*s)->next)
		if ((*s)->pid == 0) found = s;
	if (found) {
		struct spare *f = *found;
		*found = f->next;
		t = f->tracer;
		if (f->pid == 0) {
			tracer_adopt(t, pid);
			pthread_cond_signal(&p->want); /* the loader makes another */
		}
		free(f);
	}
	pthread_mutex_unlock(&p->lock);
	return t;
}

struct tracer *exec_prep_take_spare(struct exec_prep *p, pid_t pid)
{
	return p ? take_spare_for(p, pid, true) : NULL;
}

static int generic_spares(const struct exec_prep *p)
{
	int n = 0;
	for (const struct spare *s = p->spares; s; s = s->next) n += s->pid == 0;
	return n;
}

/* Keeps p->keep spares for no process loaded (tens of ms of CPU each, none of a target's). */
static void *loader_main(void *arg)
{
	struct exec_prep *p = arg;
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		if (generic_spares(p) >= p->keep) {
			pthread_cond_wait(&p->want, &p->lock);
			continue;
		}
		pthread_mutex_unlock(&p->lock);
		char err[256];
		struct spare *s = calloc(1, sizeof *s);
		if (s) s->tracer = tracer_load(0, &p->opts, err, sizeof err);
		pthread_mutex_lock(&p->lock);
		if (!s || !s->tracer) { /* the processes load their own, as before */
			free(s);
			break;
		}
		s->next = p->spares;
		p->spares = s;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

void exec_prep_keep_spares(struct exec_prep *p, int n)
{
	if (!p || p->loader_started) return;
	p->keep = n;
	p->loader_started = pthread_create(&p->loader, NULL, loader_main, p) == 0;
}

void exec_prep_watch(struct exec_prep *p, pid_t pid, struct session *s)
{
	if (!p) return;
	pthread_mutex_lock(&p->lock);
	if (p->nw == p->wcap) {
		int cap = p->wcap ? 2 * p->wcap : 8;
		struct watched *grown = realloc(p->w, (size_t)cap * sizeof *grown);
		if (grown) p->w = grown, p->wcap = cap;
	}
	if (p->nw < p->wcap) p->w[p->nw++] = (struct watched){.pid = pid, .s = s};
	pthread_mutex_unlock(&p->lock);
}

void exec_prep_unwatch(struct exec_prep *p, struct session *s)
{
	if (!p) return;
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < p->nw;)
		if (p->w[i].s == s) p->w[i] = p->w[--p->nw];
		else i++;
	pthread_mutex_unlock(&p->lock);
}

void exec_prep_on_exec(void *prep, pid_t pid, uint64_t stop_ns)
{
	struct exec_prep *p = prep;
	/* the old program's probes see the new program's calls until the main loop detaches
	 * them: they stop recording now (its heap is gone with its image) */
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < p->nw; i++)
		if (p->w[i].pid == pid) session_mute(p->w[i].s);
	pthread_mutex_unlock(&p->lock);
	struct exec_prepared *e = calloc(1, sizeof *e);
	if (!e) return; /* the main loop follows the exec the slow way */
	e->pid = pid;
	e->owner = p;
	e->stop_ns = stop_ns;
	target_exe_path(pid, e->exe, sizeof e->exe);
	target_program_name(pid, NULL, e->exe, e->name, sizeof e->name);
	/* The new image is mapped but its ld.so has not loaded the libraries yet: resolve them
	 * the way it will. */
	if (!e->exe[0]) snprintf(e->err, sizeof e->err, "its executable cannot be read");
	else if (psites_for_exec(e->exe, pid, &e->sites, e->err, sizeof e->err) == 0) {
		struct tracer *t = exec_prep_take_spare(p, pid);
		if (!t) t = tracer_load(pid, &p->opts, e->err, sizeof e->err);
		if (t && tracer_attach(t, &e->sites, e->err, sizeof e->err) < 0) {
			tracer_close(t);
			t = NULL;
		}
		/* its records are drained from now on (and its unwinder prepared at the first one,
		 * while it runs): the main loop may take it over only later */
		struct session_opts so = {.pid = pid, .rate = p->opts.rate,
					  .stack_bytes = p->opts.stack_bytes,
					  .ring_bytes = p->opts.ringbuf_bytes, .spawned = true,
					  .no_mappings = p->opts.no_mappings,
					  .sites = &e->sites, .tracer = t};
		if (t) e->s = session_begin(&so, e->err, sizeof e->err);
	}
	pthread_mutex_lock(&p->lock);
	if (p->tail) p->tail->next = e;
	else p->head = e;
	p->tail = e;
	pthread_cond_broadcast(&p->added);
	pthread_mutex_unlock(&p->lock);
}

struct exec_prepared *exec_prep_take(struct exec_prep *p, pid_t pid, int timeout_ms)
{
	if (!p) return NULL;
	struct timespec until = deadline_after_ms(timeout_ms);
	struct exec_prepared *e = NULL;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		for (struct exec_prepared *it = p->head; it && !e; it = it->next)
			if (it->pid == pid && !it->taken) e = it;
		if (e || timeout_ms <= 0 ||
		    pthread_cond_timedwait(&p->added, &p->lock, &until) == ETIMEDOUT)
			break;
	}
	if (e) e->taken = true;
	pthread_mutex_unlock(&p->lock);
	return e;
}

bool exec_prep_pending(void *prep, pid_t pid)
{
	struct exec_prep *p = prep;
	bool found = false;
	pthread_mutex_lock(&p->lock);
	for (struct exec_prepared *it = p->head; it && !found; it = it->next) found = it->pid == pid;
	pthread_mutex_unlock(&p->lock);
	return found;
}

/* Unlists e (under p->lock). */
static void unlist(struct exec_prep *p, struct exec_prepared *e)
{
	struct exec_prepared *prev = NULL;
	for (struct exec_prepared *it = p->head; it; prev = it, it = it->next)
		if (it == e) {
			if (prev) prev->next = it->next;
			else p->head = it->next;
			if (p->tail == it) p->tail = prev;
			break;
		}
}

void exec_prepared_free(struct exec_prepared *e)
{
	if (!e) return;
	pthread_mutex_lock(&e->owner->lock);
	unlist(e->owner, e);
	pthread_mutex_unlock(&e->owner->lock);
	session_close(e->s);
	free(e);
}

void exec_prep_refill(struct exec_prep *p, pid_t pid)
{
	if (!p) return;
	pthread_mutex_lock(&p->lock);
	bool have = false;
	for (struct spare *s = p->spares; s && !have; s = s->next) have = s->pid == pid;
	pthread_mutex_unlock(&p->lock);
	if (have) return;
	char err[256];
	struct spare *s = calloc(1, sizeof *s);
	if (!s) return;
	s->pid = pid;
	s->tracer = tracer_load(pid, &p->opts, err, sizeof err);
	if (!s->tracer) { /* the exec will load its own */
		free(s);
		return;
	}
	pthread_mutex_lock(&p->lock);
	s->next = p->spares;
	p->spares = s;
	pthread_mutex_unlock(&p->lock);
}

void exec_prep_after_exec(void *prep, pid_t pid) { exec_prep_refill(prep, pid); }

void exec_prep_forget(struct exec_prep *p, pid_t pid)
{
	if (!p) return;
	tracer_close(take_spare_for(p, pid, false));
	struct exec_prepared *e;
	while ((e = exec_prep_take(p, pid, 0))) exec_prepared_free(e); /* (taken ones: their owner's) */
}

void exec_prep_free(struct exec_prep *p)
{
	if (!p) return;
	if (p->loader_started) {
		pthread_mutex_lock(&p->lock);
		p->stop = true;
		pthread_cond_broadcast(&p->want);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->loader, NULL);
	}
	while (p->spares) {
		struct spare *s = p->spares;
		p->spares = s->next;
		tracer_close(s->tracer);
		free(s);
	}
	while (p->head) {
		struct exec_prepared *e = p->head;
		p->head = e->next;
		session_close(e->s);
		free(e);
	}
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->added);
	free(p->w);
	free(p);
}
