/* http.h - the HTTP server: libmicrohttpd, one thread per connection.
 *
 * net/ owns sockets, HTTP framing (all of it done by libmicrohttpd; there is
 * no hand-written parser here), the request body limit, streamed bodies and
 * client liveness. What a request means is the handler's business (api/):
 * net hands it method, path, the Authorization and x-api-key headers and the body, and sends
 * back what the handler answers.
 *
 * A request goes through the handler twice: `early` once the headers are in
 * (before any body byte is read: auth, routing, server state), then `handle`
 * with the whole body. A body over max_bytes is answered 413 through `error`
 * without reaching `handle`. A streamed body (server-sent events) is pulled
 * chunk by chunk from the handler's stream on the connection's thread, so a
 * slow reader simply stops pulling (backpressure reaches the engine), and a
 * stream can probe hearth_http_conn_gone while it waits to notice a client
 * that has left. */
#ifndef HEARTH_NET_HTTP_H
#define HEARTH_NET_HTTP_H

#include "core/status.h"

#include <stddef.h>

typedef struct hearth_http hearth_http;
typedef struct hearth_http_conn hearth_http_conn;

typedef struct {
    const char *method;        /* "GET", "POST", ... */
    const char *path;          /* without the query string */
    const char *authorization; /* the Authorization header, or NULL */
    const char *x_api_key;     /* the x-api-key header (Anthropic's clients), or NULL */
    const char *body;          /* handle(): the whole body, NUL-terminated; early(): NULL */
    size_t body_len;
    hearth_http_conn *conn;    /* valid until the response (and its stream) is done */
} hearth_http_request;

/* A body produced on demand (server-sent events). */
typedef struct {
    void *self;
    /* Block until there is something to send; point *data and *len at it (valid
     * until the next call). Return 1 if more may follow, 0 when this is the
     * last piece (*len may be 0). Runs on the connection's thread. */
    int (*next)(void *self, const char **data, size_t *len);
    /* Called exactly once, when the response is over or abandoned. */
    void (*free)(void *self);
} hearth_http_stream;

typedef struct {
    int status;
    const char *content_type; /* a static string */
    char *body;               /* malloc'd (net frees it), or NULL */
    size_t len;
    hearth_http_stream stream; /* stream.next set: a streamed body instead of body */
    const char *hdr_name[2];   /* extra headers (static strings), NULL = none */
    char hdr_value[2][64];
} hearth_http_response;

typedef struct {
    void *user;
    /* Headers are in. Return 1 with resp filled to answer at once (the body
     * is then not read), 0 to read the body and call handle. */
    int (*early)(void *user, const hearth_http_request *rq, hearth_http_response *resp);
    /* The whole request; fill resp. May block (it runs on the connection's thread). */
    void (*handle)(void *user, const hearth_http_request *rq, hearth_http_response *resp);
    /* Fill resp for a failure net found itself (413 body too large). */
    void (*error)(void *user, int status, const char *msg, hearth_http_response *resp);
} hearth_http_handler;

typedef struct {
    const char *host;    /* address to bind ("127.0.0.1", "::1", "0.0.0.0", a name) */
    int port;            /* 0 = any free port (see hearth_http_port) */
    size_t max_body;     /* bytes; larger bodies get 413 */
    int max_connections; /* concurrent connections (threads) */
    int idle_timeout_s;  /* an idle connection is closed after this long (0 = 120); never while a
                            response is being streamed or generated */
    hearth_http_handler h;
} hearth_http_opts;

/* Bind, listen and start serving. EIO names the address and the reason
 * ("127.0.0.1:8080: Address already in use"). */
hearth_status hearth_http_start(hearth_http **out, const hearth_http_opts *o, hearth_err *err);
/* The port actually bound. */
int hearth_http_port(const hearth_http *h);
/* Stop listening, close the connections and join their threads. Streams in
 * progress must have been brought to an end (their next() must return) or
 * this waits for them. Then free. */
void hearth_http_stop(hearth_http *h);

/* Has the client closed its end of the connection? Cheap (one poll, no
 * wait); any thread. */
int hearth_http_conn_gone(hearth_http_conn *c);

/* The value of the query-string argument key ("?mode=keep": "keep"),
 * decoded; NULL when absent or given without a value. Valid while the
 * request is. */
const char *hearth_http_query_arg(hearth_http_conn *c, const char *key);

#endif
