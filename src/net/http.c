/* http.c - libmicrohttpd glue: listening socket, per-request state, body
 * limit, responses and streamed bodies, client liveness. See http.h. */
#define _GNU_SOURCE /* POLLRDHUP */
#include "net/http.h"

#include "core/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct hearth_http {
    struct MHD_Daemon *d;
    hearth_http_opts o;
    int port;
};

/* hearth_http_conn is the MHD connection itself; the type only hides it. */
static struct MHD_Connection *mhd_conn(hearth_http_conn *c) { return (struct MHD_Connection *)c; }

/* Per request (MHD's con_cls). */
typedef struct {
    int answered;  /* early() answered: the body is discarded */
    int too_large;
    char *body;
    size_t len, cap;
} req_state;

/* A streamed body in flight. */
typedef struct {
    hearth_http_stream s;
    const char *data; /* what next() gave and is not yet copied out */
    size_t left;
    int last; /* next() said this was the last piece */
} stream_state;

const char *hearth_http_query_arg(hearth_http_conn *c, const char *key) {
    return MHD_lookup_connection_value(mhd_conn(c), MHD_GET_ARGUMENT_KIND, key);
}

int hearth_http_conn_gone(hearth_http_conn *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mhd_conn(c), MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 1;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_state *st = cls;
    while (st->left == 0) {
        if (st->last) return MHD_CONTENT_READER_END_OF_STREAM;
        const char *d = NULL;
        size_t n = 0;
        st->last = !st->s.next(st->s.self, &d, &n);
        st->data = d;
        st->left = n;
    }
    size_t k = st->left < max ? st->left : max;
    memcpy(buf, st->data, k);
    st->data += k;
    st->left -= k;
    return (ssize_t)k;
}

static void stream_free(void *cls) {
    stream_state *st = cls;
    st->s.free(st->s.self);
    free(st);
}

static enum MHD_Result send_response(struct MHD_Connection *conn, hearth_http_response *r) {
    struct MHD_Response *resp;
    if (r->stream.next) {
        stream_state *st = calloc(1, sizeof *st);
        if (!st) {
            r->stream.free(r->stream.self);
            return MHD_NO;
        }
        st->s = r->stream;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st, stream_free);
        if (!resp) {
            stream_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        /* A stream may be silent for long (queued behind other requests
         * after its first event): the idle timeout must not cut it. It is
         * restored when the request completes (on_completed). */
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    } else {
        resp = MHD_create_response_from_buffer(r->len, r->body ? r->body : (void *)"",
                                               r->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!resp) {
            free(r->body);
            return MHD_NO;
        }
    }
    r->body = NULL;
    if (r->content_type) MHD_add_response_header(resp, "Content-Type", r->content_type);
    for (int i = 0; i < 2; i++)
        if (r->hdr_name[i]) MHD_add_response_header(resp, r->hdr_name[i], r->hdr_value[i]);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls) {
    hearth_http *h = cls;
    req_state *rs = *con_cls;
    hearth_http_request rq = {
        .method = method,
        .path = url,
        .authorization = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
        .x_api_key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "x-api-key"),
        .conn = (hearth_http_conn *)conn,
    };
    if (!rs) { /* headers are in, no body byte read yet */
        rs = calloc(1, sizeof *rs);
        if (!rs) return MHD_NO;
        *con_cls = rs;
        hearth_http_response r = {0};
        if (h->o.h.early(h->o.h.user, &rq, &r)) {
            rs->answered = 1;
            return send_response(conn, &r);
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > h->o.max_body) rs->too_large = 1;
        return MHD_YES;
    }
    if (rs->answered) { /* discard a body we already answered */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (rs->too_large || rs->len + n > h->o.max_body) {
            rs->too_large = 1;
            return MHD_YES; /* keep reading (and dropping) so the 413 can be sent cleanly */
        }
        if (rs->len + n + 1 > rs->cap) {
            size_t cap = rs->cap ? rs->cap : 4096;
            while (cap < rs->len + n + 1) cap *= 2;
            char *b = realloc(rs->body, cap);
            if (!b) return MHD_NO;
            rs->body = b;
            rs->cap = cap;
        }
        memcpy(rs->body + rs->len, upload_data, n);
        rs->len += n;
        rs->body[rs->len] = 0;
        return MHD_YES;
    }
    /* The whole request is in. */
    hearth_http_response r = {0};
    if (rs->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is larger than the limit of %zu bytes", h->o.max_body);
        h->o.h.error(h->o.h.user, 413, msg, &r);
    } else {
        rq.body = rs->body ? rs->body : "";
        rq.body_len = rs->len;
        h->o.h.handle(h->o.h.user, &rq, &r);
    }
    rs->answered = 1;
    return send_response(conn, &r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    hearth_http *h = cls;
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)h->o.idle_timeout_s);
    req_state *rs = *con_cls;
    if (!rs) return;
    free(rs->body);
    free(rs);
    *con_cls = NULL;
}

/* Small SSE pieces must leave at once: no Nagle delay. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    if (toe != MHD_CONNECTION_NOTIFY_STARTED) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int one = 1;
    if (ci) setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n') msg[--n] = 0;
    hearth_log_debug("http: %s", msg);
}

static hearth_status open_listener(const char *host, int port, int *fd_out, int *ipv6, hearth_err *err) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc != 0) return hearth_err_set(err, HEARTH_EINVAL, "--host %s: %s", host, gai_strerror(rc));
    int fd = -1, e = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 512) == 0) {
            *ipv6 = a->ai_family == AF_INET6;
            break;
        }
        e = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) return hearth_err_set(err, HEARTH_EIO, "cannot listen on %s:%d: %s", host, port, strerror(e));
    *fd_out = fd;
    return HEARTH_OK;
}

hearth_status hearth_http_start(hearth_http **out, const hearth_http_opts *o, hearth_err *err) {
    *out = NULL;
    hearth_http *h = calloc(1, sizeof *h);
    if (!h) return hearth_err_set(err, HEARTH_ENOMEM, "http: out of memory");
    h->o = *o;
    if (h->o.idle_timeout_s <= 0) h->o.idle_timeout_s = 120;
    int fd = -1, ipv6 = 0;
    hearth_status st = open_listener(o->host, o->port, &fd, &ipv6, err);
    if (st != HEARTH_OK) {
        free(h);
        return st;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC | (ipv6 ? MHD_USE_IPv6 : 0);
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_access, h,
                            MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h, /* first, so that it logs everything */
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)(o->max_connections > 0 ? o->max_connections : 512),
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)h->o.idle_timeout_s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            MHD_OPTION_END);
    if (!h->d) {
        close(fd);
        free(h);
        return hearth_err_set(err, HEARTH_EIO, "cannot start the HTTP server on %s:%d", o->host, o->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di && di->port ? di->port : o->port;
    *out = h;
    return HEARTH_OK;
}

int hearth_http_port(const hearth_http *h) { return h->port; }

void hearth_http_stop(hearth_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    free(h);
}
