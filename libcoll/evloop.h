/*
 * evloop.h: one epoll set per communicator. Transports register their
 * sockets with a handler; the core's wait loop polls it without blocking
 * while it spins, then sleeps in it. A wake eventfd lets another thread
 * (coll_comm_abort) interrupt a sleeping waiter.
 */
#ifndef COLL_EVLOOP_H
#define COLL_EVLOOP_H

#include <stdint.h>

#include "util.h"

typedef void (*coll_ev_handler_t)(void *arg, uint32_t events);

/* Registration record, owned by the registrant. A handler may unregister
 * and free its own source, but must only unregister (never free) others:
 * their events may still be pending in the batch being dispatched. */
typedef struct coll_ev_source {
    int fd;
    int cold; /* registered with coll_evloop_add_cold */
    uint32_t events;
    coll_ev_handler_t handler;
    void *arg;
} coll_ev_source_t;

typedef struct coll_evloop coll_evloop_t;

coll_status_t coll_evloop_create(coll_evloop_t **ev_p);
void coll_evloop_destroy(coll_evloop_t *ev);

coll_status_t coll_evloop_add(coll_evloop_t *ev, coll_ev_source_t *src, int fd,
                              uint32_t events, coll_ev_handler_t handler, void *arg);
/* A source whose events are rare and may wait a few microseconds (a
 * listening socket, a peer's pidfd, a wakeup eventfd). While only cold
 * sources are registered, coll_evloop_dispatch calls epoll_wait at most
 * once per COLL_EVLOOP_COLD_NS: a communicator whose peers are all on
 * shared memory then polls its rings without a system call each time.
 * (In time, not in calls: a loop that serves the ports every 20 ms, as
 * init's bootstrap wait does, must see them every time.) */
#define COLL_EVLOOP_COLD_NS 20000
coll_status_t coll_evloop_add_cold(coll_evloop_t *ev, coll_ev_source_t *src, int fd,
                                   uint32_t events, coll_ev_handler_t handler, void *arg);
/* Make a registered source cold or hot again: a transport that reads a
 * socket itself on every turn of the wait loop (tcp's direct polling)
 * makes it cold, so that no epoll_wait stands between the data's arrival
 * and the read that takes it. */
void coll_evloop_set_cold(coll_evloop_t *ev, coll_ev_source_t *src, int cold);
/* Change the events of a registered source; no-op when unchanged. */
coll_status_t coll_evloop_mod(coll_evloop_t *ev, coll_ev_source_t *src, uint32_t events);
void coll_evloop_del(coll_evloop_t *ev, coll_ev_source_t *src);

/* Dispatch ready events without blocking; returns how many were handled. */
int coll_evloop_dispatch(coll_evloop_t *ev);
/* The same with the time already read (coll_time_ns): a waiting loop
 * reads the clock once per turn, not once per use. */
int coll_evloop_dispatch_at(coll_evloop_t *ev, uint64_t now);
/* Block until some source is ready, the loop is woken, or timeout_ms passes.
 * Dispatches nothing: call coll_evloop_dispatch afterwards (under the lock
 * that protects the handlers' state). */
void coll_evloop_sleep(coll_evloop_t *ev, int timeout_ms);
/* Wake a thread sleeping in coll_evloop_sleep (async-signal-safe). */
void coll_evloop_wake(coll_evloop_t *ev);

/* Idle hooks, for sources that are not file descriptors (shared memory):
 * before a sleep with a timeout, coll_evloop_sleep calls hook(arg, 1); a
 * hook arms its wakeup and returns 1 if work is already there (the sleep
 * is skipped). After the sleep, every hook is called with (arg, 0) to
 * disarm. Hooks run without the communicator's lock: they may only touch
 * state meant for that (atomics). At most COLL_EV_IDLE_MAX per loop. */
#define COLL_EV_IDLE_MAX 4
typedef int (*coll_ev_idle_fn)(void *arg, int sleeping);
coll_status_t coll_evloop_add_idle(coll_evloop_t *ev, coll_ev_idle_fn fn, void *arg);
void coll_evloop_del_idle(coll_evloop_t *ev, coll_ev_idle_fn fn, void *arg);

#endif /* COLL_EVLOOP_H */
