/*
 * net.c: socket plumbing. Every socket is non-blocking and close-on-exec,
 * writes never raise SIGPIPE, and every failure message names the address
 * involved, because "connection refused" alone does not tell a user which
 * of a thousand hosts to look at.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "net.h"
#include "param.h"
#include "sha256.h"

const char *coll_addr_host(const coll_addr_t *addr, char buf[COLL_ADDRSTR_LEN])
{
    const struct sockaddr *sa = (const struct sockaddr *)&addr->ss;

    snprintf(buf, COLL_ADDRSTR_LEN, "(no address)");
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, COLL_ADDRSTR_LEN);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, COLL_ADDRSTR_LEN);
    return buf;
}

const char *coll_addr_str(const coll_addr_t *addr, char buf[COLL_ADDRSTR_LEN])
{
    char host[COLL_ADDRSTR_LEN];
    int family = addr->ss.ss_family;

    coll_addr_host(addr, host);
    if (family == AF_INET)
        snprintf(buf, COLL_ADDRSTR_LEN, "%s:%d", host, coll_addr_port(addr));
    else if (family == AF_INET6)
        snprintf(buf, COLL_ADDRSTR_LEN, "[%s]:%d", host, coll_addr_port(addr));
    else
        snprintf(buf, COLL_ADDRSTR_LEN, "%s", host);
    return buf;
}

int coll_addr_port(const coll_addr_t *addr)
{
    const struct sockaddr *sa = (const struct sockaddr *)&addr->ss;
    if (sa->sa_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)sa)->sin_port);
    if (sa->sa_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    return 0;
}

void coll_addr_set_port(coll_addr_t *addr, int port)
{
    struct sockaddr *sa = (struct sockaddr *)&addr->ss;
    if (sa->sa_family == AF_INET)
        ((struct sockaddr_in *)sa)->sin_port = htons((uint16_t)port);
    else if (sa->sa_family == AF_INET6)
        ((struct sockaddr_in6 *)sa)->sin6_port = htons((uint16_t)port);
}

int coll_addr_is_loopback(const coll_addr_t *addr)
{
    const struct sockaddr *sa = (const struct sockaddr *)&addr->ss;
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return 0;
}

void coll_addr_to_wire(const coll_addr_t *addr, uint8_t out[COLL_WIRE_ADDR_BYTES])
{
    const struct sockaddr *sa = (const struct sockaddr *)&addr->ss;
    int port = coll_addr_port(addr);

    memset(out, 0, COLL_WIRE_ADDR_BYTES);
    out[2] = (uint8_t)(port & 0xff);
    out[3] = (uint8_t)(port >> 8);
    if (sa->sa_family == AF_INET) {
        out[0] = 4;
        memcpy(out + 4, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        out[0] = 6;
        memcpy(out + 4, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
}

int coll_addr_from_wire(const uint8_t in[COLL_WIRE_ADDR_BYTES], coll_addr_t *addr)
{
    int port = in[2] | (in[3] << 8);

    memset(addr, 0, sizeof(*addr));
    if (in[0] == 4 && in[1] == 0) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&addr->ss;
        sin->sin_family = AF_INET;
        memcpy(&sin->sin_addr, in + 4, 4);
        addr->len = sizeof(*sin);
    } else if (in[0] == 6 && in[1] == 0) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&addr->ss;
        sin6->sin6_family = AF_INET6;
        memcpy(&sin6->sin6_addr, in + 4, 16);
        addr->len = sizeof(*sin6);
    } else {
        return -1;
    }
    coll_addr_set_port(addr, port);
    return 0;
}

static int family_wanted(void)
{
    const char *f = coll_param_raw(COLL_PARAM_SOCKET_FAMILY);
    if (strcmp(f, "AF_INET") == 0)
        return AF_INET;
    if (strcmp(f, "AF_INET6") == 0)
        return AF_INET6;
    return AF_UNSPEC;
}

coll_status_t coll_addr_resolve(const char *host, int port, const char *what,
                                coll_addr_t *addr_p)
{
    struct addrinfo hints = {0}, *res = NULL;
    int rc;

    if (port <= 0 || port > 65535)
        return coll_error(COLL_SUBSYS_BOOT, COLL_ERR_INVALID_ARG,
                          "%s port %d is out of range (1..65535)", what, port);
    hints.ai_family = family_wanted();
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res)
        return coll_error(COLL_SUBSYS_BOOT, COLL_ERR_UNREACHABLE,
                          "cannot resolve %s '%s': %s", what, host, gai_strerror(rc));
    memset(addr_p, 0, sizeof(*addr_p));
    memcpy(&addr_p->ss, res->ai_addr, res->ai_addrlen);
    addr_p->len = res->ai_addrlen;
    coll_addr_set_port(addr_p, port);
    freeaddrinfo(res);
    return COLL_OK;
}

/* NCCL_SOCKET_IFNAME semantics: "^" excludes, "=" asks for exact names,
 * otherwise each comma-separated entry is a prefix; empty entries match
 * nothing. Walks the spec in place: a copy into a fixed buffer would cut
 * a long spec and silently change what it selects. */
int coll_ifname_match(const char *spec, const char *name)
{
    int exclude = 0, exact = 0, hit = 0;

    if (spec[0] == '^') {
        exclude = 1;
        spec++;
    }
    if (spec[0] == '=') {
        exact = 1;
        spec++;
    }
    for (const char *tok = spec; !hit; tok++) {
        size_t n = strcspn(tok, ",");
        if (n > 0)
            hit = strncmp(name, tok, n) == 0 && (!exact || name[n] == '\0');
        tok += n;
        if (*tok == '\0')
            break;
    }
    return exclude ? !hit : hit;
}

static int same_subnet(const struct ifaddrs *ifa, const coll_addr_t *toward)
{
    const struct sockaddr *a = ifa->ifa_addr, *m = ifa->ifa_netmask;
    const struct sockaddr *t = (const struct sockaddr *)&toward->ss;

    if (!m || a->sa_family != t->sa_family)
        return 0;
    if (a->sa_family == AF_INET) {
        uint32_t mask = ((const struct sockaddr_in *)m)->sin_addr.s_addr;
        return (((const struct sockaddr_in *)a)->sin_addr.s_addr & mask) ==
               (((const struct sockaddr_in *)t)->sin_addr.s_addr & mask);
    }
    const uint8_t *x = ((const struct sockaddr_in6 *)a)->sin6_addr.s6_addr;
    const uint8_t *y = ((const struct sockaddr_in6 *)t)->sin6_addr.s6_addr;
    const uint8_t *k = ((const struct sockaddr_in6 *)m)->sin6_addr.s6_addr;
    for (int i = 0; i < 16; i++)
        if ((x[i] & k[i]) != (y[i] & k[i]))
            return 0;
    return 1;
}

static int usable(const struct ifaddrs *ifa, int family)
{
    if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP))
        return 0;
    int f = ifa->ifa_addr->sa_family;
    if (f != AF_INET && f != AF_INET6)
        return 0;
    if (family != AF_UNSPEC && f != family)
        return 0;
    /* Link-local IPv6 needs a scope id that the wire form does not carry. */
    if (f == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr))
        return 0;
    return 1;
}

/* Score a candidate: higher is better, 0 is unusable. IPv4 before IPv6
 * unless a family is forced. */
static int score(const struct ifaddrs *ifa, const char *spec, const coll_addr_t *toward)
{
    int v4 = ifa->ifa_addr->sa_family == AF_INET;
    int loop = (ifa->ifa_flags & IFF_LOOPBACK) != 0;

    if (spec[0] != '\0')
        return coll_ifname_match(spec, ifa->ifa_name) ? 10 + v4 : 0;
    if (toward) {
        if (coll_addr_is_loopback(toward))
            return loop && ifa->ifa_addr->sa_family == toward->ss.ss_family ? 100 : 0;
        if (same_subnet(ifa, toward))
            return 50 + v4;
    }
    if (loop)
        return 1;
    if (coll_ifname_match("docker,virbr,veth,br-", ifa->ifa_name))
        return 2;
    return 10 + v4;
}

coll_status_t coll_iface_select(const coll_addr_t *toward, coll_addr_t *addr_p,
                                char ifname_p[32])
{
    struct ifaddrs *list = NULL, *best = NULL;
    const char *spec = coll_param_raw(COLL_PARAM_SOCKET_IFNAME);
    int family = family_wanted(), best_score = 0;

    if (getifaddrs(&list) != 0)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "getifaddrs failed: %s",
                          strerror(errno));
    for (struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
        if (!usable(ifa, family))
            continue;
        int s = score(ifa, spec, toward);
        if (s > best_score) {
            best_score = s;
            best = ifa;
        }
    }
    if (!best) {
        freeifaddrs(list);
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_INVALID_ARG,
                          "no usable network interface%s%s%s (an interface must be up "
                          "and have an IPv4 or global IPv6 address)",
                          spec[0] ? " matches COLL_SOCKET_IFNAME='" : "", spec,
                          spec[0] ? "'" : "");
    }
    memset(addr_p, 0, sizeof(*addr_p));
    addr_p->len = best->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                       : sizeof(struct sockaddr_in6);
    memcpy(&addr_p->ss, best->ifa_addr, addr_p->len);
    coll_addr_set_port(addr_p, 0);
    snprintf(ifname_p, 32, "%s", best->ifa_name);
    freeifaddrs(list);
    return COLL_OK;
}

void coll_sock_tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

coll_status_t coll_sock_listen(const coll_addr_t *addr, int reuse, int *fd_p,
                               coll_addr_t *bound_p)
{
    char str[COLL_ADDRSTR_LEN];
    coll_addr_t bound = {0};
    int one = 1;
    int fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "socket() failed: %s",
                          strerror(errno));
    if (reuse)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&addr->ss, addr->len) != 0) {
        int err = errno;
        close(fd);
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "cannot listen on %s: %s%s",
                          coll_addr_str(addr, str), strerror(err),
                          err == EADDRINUSE ? " (another process holds this port)" : "");
    }
    if (listen(fd, 4096) != 0) {
        int err = errno;
        close(fd);
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "listen on %s failed: %s",
                          coll_addr_str(addr, str), strerror(err));
    }
    bound.len = sizeof(bound.ss);
    getsockname(fd, (struct sockaddr *)&bound.ss, &bound.len);
    *fd_p = fd;
    *bound_p = bound;
    return COLL_OK;
}

coll_status_t coll_sock_connect_start(const coll_addr_t *addr, int *fd_p)
{
    return coll_sock_connect_buf(addr, 0, fd_p);
}

coll_status_t coll_sock_connect_buf(const coll_addr_t *addr, int bufsize, int *fd_p)
{
    char str[COLL_ADDRSTR_LEN];
    int fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "socket() failed: %s",
                          strerror(errno));
    coll_sock_tune(fd);
    if (bufsize > 0) { /* before connect: the SYN announces the window scale */
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof(bufsize));
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof(bufsize));
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int){1}, sizeof(int)); /* see tcp_iface_open */
    if (connect(fd, (const struct sockaddr *)&addr->ss, addr->len) != 0 &&
        errno != EINPROGRESS) {
        int err = errno;
        close(fd);
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_UNREACHABLE, "cannot connect to %s: %s",
                          coll_addr_str(addr, str), strerror(err));
    }
    *fd_p = fd;
    return COLL_OK;
}

int coll_sock_connect_result(int fd)
{
    int err = 0;
    socklen_t len = sizeof(err);
    struct sockaddr_storage ss;
    socklen_t sslen = sizeof(ss);

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        return errno;
    if (err != 0)
        return err;
    /* No error yet: connected only if the peer address is known. */
    return getpeername(fd, (struct sockaddr *)&ss, &sslen) == 0 ? 0 : EINPROGRESS;
}

int coll_sock_accept(int listen_fd, coll_addr_t *peer_p)
{
    coll_addr_t peer = {0};
    peer.len = sizeof(peer.ss);
    int fd = accept4(listen_fd, (struct sockaddr *)&peer.ss, &peer.len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
        coll_sock_tune(fd);
        *peer_p = peer;
    }
    return fd;
}

ssize_t coll_sock_read(int fd, void *buf, size_t len)
{
    ssize_t n;
    do {
        n = recv(fd, buf, len, 0);
    } while (n < 0 && errno == EINTR);
    if (n == 0 && len > 0) {
        errno = EPIPE;
        return -1;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    return n;
}

ssize_t coll_sock_write(int fd, const void *buf, size_t len)
{
    ssize_t n;
    do {
        n = send(fd, buf, len, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    return n;
}

static void read_small_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    buf[0] = '\0';
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, len - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
}

uint64_t coll_host_hash(void)
{
    char ident[512] = {0}, netns[64] = {0};
    uint8_t digest[COLL_SHA256_BYTES];
    uint64_t h = 0;
    ssize_t n;

    read_small_file("/proc/sys/kernel/random/boot_id", ident, 64);
    n = readlink("/proc/self/ns/net", netns, sizeof(netns) - 1);
    if (n > 0)
        netns[n] = '\0';
    size_t used = strlen(ident);
    snprintf(ident + used, sizeof(ident) - used, "|%s|", netns);
    used = strlen(ident);
    gethostname(ident + used, sizeof(ident) - used - 1);
    coll_sha256(ident, strlen(ident), digest);
    memcpy(&h, digest, sizeof(h));
    return h;
}

int coll_waiter_aborted(const coll_waiter_t *w)
{
    return w && w->abort_flag && __atomic_load_n(w->abort_flag, __ATOMIC_ACQUIRE);
}

static void waiter_serve(const coll_waiter_t *w)
{
    if (w && w->serve)
        w->serve(w->arg);
}

void coll_waiter_sleep(const coll_waiter_t *w, uint64_t ns)
{
    uint64_t end = coll_time_ns() + ns;

    while (coll_time_ns() < end && !coll_waiter_aborted(w)) {
        uint64_t left = end - coll_time_ns();
        uint64_t step = w && w->serve ? COLL_MIN(left, COLL_SERVE_MS * 1000000ull) : left;
        struct timespec ts = {(time_t)(step / 1000000000ull), (long)(step % 1000000000ull)};
        nanosleep(&ts, NULL);
        waiter_serve(w);
    }
}

void coll_sock_wait(int fd, short events, uint64_t deadline_ns, const coll_waiter_t *w)
{
    struct pollfd p = {.fd = fd, .events = events};
    (void)poll(&p, 1, coll_ms_until(deadline_ns, w && w->serve ? COLL_SERVE_MS : 100));
    waiter_serve(w);
}

coll_status_t coll_sock_io_deadline(int fd, void *buf, size_t len, int writing,
                                    uint64_t deadline_ns, const coll_waiter_t *w)
{
    size_t off = 0;

    while (off < len) {
        ssize_t n = writing ? coll_sock_write(fd, (uint8_t *)buf + off, len - off)
                            : coll_sock_read(fd, (uint8_t *)buf + off, len - off);
        if (n < 0)
            return COLL_ERR_PEER_FAILED;
        off += (size_t)n;
        if (off == len)
            break;
        if (coll_waiter_aborted(w))
            return COLL_ERR_ABORTED;
        if (coll_time_ns() > deadline_ns)
            return COLL_ERR_TIMEOUT;
        coll_sock_wait(fd, writing ? POLLOUT : POLLIN, deadline_ns, w);
    }
    return COLL_OK;
}
