/*
 * net.h: socket helpers shared by the bootstrap and the socket-based
 * transports: address text and wire forms, interface selection
 * (COLL_SOCKET_IFNAME), non-blocking listen/connect and exact I/O.
 */
#ifndef COLL_NET_H
#define COLL_NET_H

#include <netinet/in.h>
#include <sys/socket.h>

#include "util.h"

/* "255.255.255.255:65535" or "[ffff:...:ffff]:65535". */
#define COLL_ADDRSTR_LEN 64

typedef struct coll_addr {
    struct sockaddr_storage ss;
    socklen_t len;
} coll_addr_t;

/* Fixed 20-byte wire form: family (4 or 6), port, address. */
#define COLL_WIRE_ADDR_BYTES 20

const char *coll_addr_str(const coll_addr_t *addr, char buf[COLL_ADDRSTR_LEN]);
/* The host part only: "10.0.0.1" or "fd00::2". */
const char *coll_addr_host(const coll_addr_t *addr, char buf[COLL_ADDRSTR_LEN]);
int coll_addr_port(const coll_addr_t *addr);
void coll_addr_set_port(coll_addr_t *addr, int port);
int coll_addr_is_loopback(const coll_addr_t *addr);
void coll_addr_to_wire(const coll_addr_t *addr, uint8_t out[COLL_WIRE_ADDR_BYTES]);
int coll_addr_from_wire(const uint8_t in[COLL_WIRE_ADDR_BYTES], coll_addr_t *addr);

/* Resolve "host" (name or literal) and port. `what` names the source of
 * the host in error messages (e.g. "MASTER_ADDR"). */
coll_status_t coll_addr_resolve(const char *host, int port, const char *what,
                                coll_addr_t *addr_p);

/* Pick the local interface address to listen on and advertise: the one
 * COLL_SOCKET_IFNAME names, else the one on the same subnet as `toward`
 * (loopback if `toward` is loopback), else the first that is up and not
 * loopback or a container bridge, else loopback. `toward` may be NULL. */
coll_status_t coll_iface_select(const coll_addr_t *toward, coll_addr_t *addr_p,
                                char ifname_p[32]);

/* Does interface `name` match a COLL_SOCKET_IFNAME-style spec? */
int coll_ifname_match(const char *spec, const char *name);

/* Non-blocking, close-on-exec listening socket bound to `addr` (port 0:
 * any free port). *bound_p receives the bound address. */
coll_status_t coll_sock_listen(const coll_addr_t *addr, int reuse, int *fd_p,
                               coll_addr_t *bound_p);
/* Start a non-blocking connect. *fd_p is set even when the connect is
 * still in progress; check with coll_sock_connect_result(). */
coll_status_t coll_sock_connect_start(const coll_addr_t *addr, int *fd_p);
/* The same with SO_SNDBUF and SO_RCVBUF set to bufsize first (0: leave the
 * kernel's autotuning). */
coll_status_t coll_sock_connect_buf(const coll_addr_t *addr, int bufsize, int *fd_p);
/* 0 when connected, EINPROGRESS while pending, else the errno. */
int coll_sock_connect_result(int fd);
/* Accept one pending connection (non-blocking); -1 with errno EAGAIN when
 * none. */
int coll_sock_accept(int listen_fd, coll_addr_t *peer_p);
void coll_sock_tune(int fd);

/* Read or write up to len bytes without blocking. Returns bytes moved (>= 0),
 * or -1 with errno set; EOF on read is reported as -1 with errno EPIPE. */
ssize_t coll_sock_read(int fd, void *buf, size_t len);
ssize_t coll_sock_write(int fd, const void *buf, size_t len);

/* What a blocking wait does besides waiting (the waiter may be NULL): it
 * gives up once *abort_flag (may be NULL) becomes non-zero, and calls
 * serve(arg) (may be NULL) at least every COLL_SERVE_MS: a rank in init
 * keeps answering, and dropping, connections on its transports' listening
 * sockets while it waits for the bootstrap. */
typedef struct coll_waiter {
    const int *abort_flag;
    void (*serve)(void *arg);
    void *arg;
} coll_waiter_t;
#define COLL_SERVE_MS 20

int coll_waiter_aborted(const coll_waiter_t *w);
/* Sleep for ns (serving meanwhile). */
void coll_waiter_sleep(const coll_waiter_t *w, uint64_t ns);

/* Blocking exact I/O with a deadline on a non-blocking socket: COLL_OK,
 * COLL_ERR_TIMEOUT, COLL_ERR_ABORTED (the waiter's abort flag) or
 * COLL_ERR_PEER_FAILED (errno set). */
coll_status_t coll_sock_io_deadline(int fd, void *buf, size_t len, int writing,
                                    uint64_t deadline_ns, const coll_waiter_t *w);
/* Sleep until fd is ready for `events` (POLLIN/POLLOUT), at most 100 ms
 * (COLL_SERVE_MS when the waiter serves) and never past the deadline. */
void coll_sock_wait(int fd, short events, uint64_t deadline_ns, const coll_waiter_t *w);

/* Host identity: equal for processes that can share memory (same kernel,
 * boot and network namespace). */
uint64_t coll_host_hash(void);

#endif /* COLL_NET_H */
