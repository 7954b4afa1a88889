/*
 * evloop.c: the epoll reactor. Sleeping and dispatching are separate so
 * that a thread can sleep without holding its communicator's lock and
 * dispatch only once it holds the lock again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "error.h"
#include "evloop.h"
#include "log.h"

#define EVLOOP_BATCH 64

struct coll_evloop {
    int epfd;
    int wakefd;
    int nhot;             /* registered sources that are not cold */
    uint64_t cold_due_ns; /* only cold sources: no epoll_wait before this */
    coll_ev_source_t wake_src;
    int nidle;
    struct {
        coll_ev_idle_fn fn;
        void *arg;
    } idle[COLL_EV_IDLE_MAX];
};

static void wake_drain(void *arg, uint32_t events)
{
    coll_evloop_t *ev = arg;
    uint64_t v;
    (void)events;
    ssize_t n = read(ev->wakefd, &v, sizeof(v));
    (void)n;
}

coll_status_t coll_evloop_create(coll_evloop_t **ev_p)
{
    coll_status_t st = COLL_OK;
    coll_evloop_t *ev = calloc(1, sizeof(*ev));

    if (!ev)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate event loop");
    ev->wakefd = -1;
    ev->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (ev->epfd < 0) {
        st = coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "epoll_create1 failed: %s",
                        strerror(errno));
        goto err;
    }
    ev->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ev->wakefd < 0) {
        st = coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "eventfd failed: %s",
                        strerror(errno));
        goto err;
    }
    COLL_CHECK_GOTO(coll_evloop_add_cold(ev, &ev->wake_src, ev->wakefd, EPOLLIN, wake_drain,
                                         ev), st, err);
    *ev_p = ev;
    return COLL_OK;
err:
    coll_evloop_destroy(ev);
    return st;
}

void coll_evloop_destroy(coll_evloop_t *ev)
{
    if (!ev)
        return;
    if (ev->wakefd >= 0)
        close(ev->wakefd);
    if (ev->epfd >= 0)
        close(ev->epfd);
    free(ev);
}

static coll_status_t add_source(coll_evloop_t *ev, coll_ev_source_t *src, int fd,
                                uint32_t events, coll_ev_handler_t handler, void *arg, int cold)
{
    struct epoll_event e = {.events = events, .data.ptr = src};

    src->fd = fd;
    src->cold = cold;
    src->events = events;
    src->handler = handler;
    src->arg = arg;
    if (epoll_ctl(ev->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
        src->fd = -1;
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "epoll_ctl(ADD, fd %d) failed: %s",
                          fd, strerror(errno));
    }
    ev->nhot += !cold;
    return COLL_OK;
}

coll_status_t coll_evloop_add(coll_evloop_t *ev, coll_ev_source_t *src, int fd,
                              uint32_t events, coll_ev_handler_t handler, void *arg)
{
    return add_source(ev, src, fd, events, handler, arg, 0);
}

coll_status_t coll_evloop_add_cold(coll_evloop_t *ev, coll_ev_source_t *src, int fd,
                                   uint32_t events, coll_ev_handler_t handler, void *arg)
{
    return add_source(ev, src, fd, events, handler, arg, 1);
}

void coll_evloop_set_cold(coll_evloop_t *ev, coll_ev_source_t *src, int cold)
{
    cold = !!cold;
    if (src->fd < 0 || src->cold == cold)
        return;
    src->cold = cold;
    ev->nhot += cold ? -1 : 1;
}

coll_status_t coll_evloop_mod(coll_evloop_t *ev, coll_ev_source_t *src, uint32_t events)
{
    struct epoll_event e = {.events = events, .data.ptr = src};

    if (src->events == events)
        return COLL_OK;
    if (epoll_ctl(ev->epfd, EPOLL_CTL_MOD, src->fd, &e) != 0)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "epoll_ctl(MOD, fd %d) failed: %s",
                          src->fd, strerror(errno));
    src->events = events;
    return COLL_OK;
}

void coll_evloop_del(coll_evloop_t *ev, coll_ev_source_t *src)
{
    if (src->fd >= 0) {
        epoll_ctl(ev->epfd, EPOLL_CTL_DEL, src->fd, NULL);
        ev->nhot -= !src->cold;
    }
    src->fd = -1;
}

int coll_evloop_dispatch(coll_evloop_t *ev)
{
    return coll_evloop_dispatch_at(ev, ev->nhot == 0 ? coll_time_ns() : 0);
}

int coll_evloop_dispatch_at(coll_evloop_t *ev, uint64_t now)
{
    struct epoll_event events[EVLOOP_BATCH];

    if (ev->nhot == 0) {
        if (now < ev->cold_due_ns)
            return 0;
        ev->cold_due_ns = now + COLL_EVLOOP_COLD_NS;
    }
    int n = epoll_wait(ev->epfd, events, EVLOOP_BATCH, 0);

    for (int i = 0; i < n; i++) {
        coll_ev_source_t *src = events[i].data.ptr;
        /* A handler earlier in this batch may have unregistered it. */
        if (src->fd >= 0)
            src->handler(src->arg, events[i].events);
    }
    return n > 0 ? n : 0;
}

coll_status_t coll_evloop_add_idle(coll_evloop_t *ev, coll_ev_idle_fn fn, void *arg)
{
    if (ev->nidle == COLL_EV_IDLE_MAX)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_INTERNAL, "more than %d idle hooks on one "
                          "event loop", COLL_EV_IDLE_MAX);
    ev->idle[ev->nidle].fn = fn;
    ev->idle[ev->nidle].arg = arg;
    ev->nidle++;
    return COLL_OK;
}

void coll_evloop_del_idle(coll_evloop_t *ev, coll_ev_idle_fn fn, void *arg)
{
    for (int i = 0; i < ev->nidle; i++)
        if (ev->idle[i].fn == fn && ev->idle[i].arg == arg) {
            ev->idle[i] = ev->idle[--ev->nidle];
            return;
        }
}

void coll_evloop_sleep(coll_evloop_t *ev, int timeout_ms)
{
    struct epoll_event e;
    int busy = 0;

    for (int i = 0; i < ev->nidle && timeout_ms != 0; i++)
        busy |= ev->idle[i].fn(ev->idle[i].arg, 1);
    /* EINTR just ends the sleep early; the caller re-checks and loops. */
    (void)epoll_wait(ev->epfd, &e, 1, busy ? 0 : timeout_ms);
    ev->cold_due_ns = 0; /* what woke us is dispatched next */
    for (int i = 0; i < ev->nidle && timeout_ms != 0; i++)
        ev->idle[i].fn(ev->idle[i].arg, 0);
}

void coll_evloop_wake(coll_evloop_t *ev)
{
    uint64_t one = 1;
    ssize_t n = write(ev->wakefd, &one, sizeof(one));
    (void)n;
}
