/* http.c - the request head and chunked bodies of HTTP/1.1, from untrusted bytes. */
#include "http.h"

#include <string.h>
#include <strings.h>

/* ---- the request head ---- */

/* RFC 9110's tchar: the characters of a method or a header name. */
static bool is_tchar(unsigned char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* Where the head ends (just past its blank line) in buf[0..len), or 0. */
static size_t head_end(const char *buf, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '\n') continue;
        if (i + 1 < len && buf[i + 1] == '\n') return i + 2;
        if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n') return i + 3;
    }
    return 0;
}

/* The line at buf[*at..end): its start and length without CR LF; moves *at
 * past it. A CR anywhere but before the LF makes it malformed (-1). */
static int next_line(const char *buf, size_t end, size_t *at, const char **line, size_t *len) {
    size_t start = *at, i = start;
    while (i < end && buf[i] != '\n') i++;
    if (i == end) return -1;
    size_t n = i - start;
    if (n > 0 && buf[start + n - 1] == '\r') n--;
    if (memchr(buf + start, '\r', n)) return -1;
    *line = buf + start;
    *len = n;
    *at = i + 1;
    return 0;
}

/* "METHOD /target HTTP/1.x". */
static int parse_request_line(HttpRequest *r, const char *line, size_t len) {
    size_t m = 0;
    while (m < len && is_tchar((unsigned char)line[m])) m++;
    if (m == 0 || m >= sizeof r->method || m == len || line[m] != ' ') return 400;
    memcpy(r->method, line, m);
    r->method[m] = '\0';
    size_t t = m + 1, t_end = t;
    while (t_end < len && (unsigned char)line[t_end] > ' ' && line[t_end] != 0x7f) t_end++;
    if (t_end == t || t_end == len || line[t_end] != ' ' || line[t] != '/') return 400;
    const char *version = line + t_end + 1;
    size_t v_len = len - t_end - 1;
    if (v_len != 8 || memcmp(version, "HTTP/", 5) != 0 || version[6] != '.') return 400;
    if (version[5] != '1' || (version[7] != '0' && version[7] != '1')) return 505;
    r->minor_version = version[7] - '0';
    size_t path_len = t_end - t;
    const char *query = memchr(line + t, '?', path_len);
    if (query) path_len = (size_t)(query - (line + t));
    memcpy(r->path, line + t, path_len);
    r->path[path_len] = '\0';
    return 0;
}

/* Whether the comma-separated list value[0..len) holds `token` (any case). */
static bool has_token(const char *value, size_t len, const char *token) {
    size_t n = strlen(token);
    for (size_t i = 0; i < len;) {
        while (i < len && (value[i] == ' ' || value[i] == '\t' || value[i] == ',')) i++;
        size_t start = i;
        while (i < len && value[i] != ',') i++;
        size_t end = i;
        while (end > start && (value[end - 1] == ' ' || value[end - 1] == '\t')) end--;
        if (end - start == n && strncasecmp(value + start, token, n) == 0) return true;
    }
    return false;
}

static bool name_is(const char *name, size_t len, const char *want) {
    return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

/* A Content-Length value: digits only, and the same if it repeats. */
static int parse_content_length(HttpRequest *r, const char *value, size_t len) {
    if (len == 0 || len > 18) return 400;
    long long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (value[i] < '0' || value[i] > '9') return 400;
        v = v * 10 + (value[i] - '0');
    }
    if (r->content_length >= 0 && r->content_length != v) return 400;
    r->content_length = v;
    return 0;
}

/* One "Name: value" line. */
static int parse_header(HttpRequest *r, const char *line, size_t len, bool *close, bool *keep) {
    size_t n = 0;
    while (n < len && is_tchar((unsigned char)line[n])) n++;
    if (n == 0 || n == len || line[n] != ':') return 400;  /* also a folded line, which starts with a space */
    size_t v = n + 1, end = len;
    while (v < end && (line[v] == ' ' || line[v] == '\t')) v++;
    while (end > v && (line[end - 1] == ' ' || line[end - 1] == '\t')) end--;
    for (size_t i = v; i < end; i++) {
        unsigned char ch = (unsigned char)line[i];
        if ((ch < ' ' && ch != '\t') || ch == 0x7f) return 400;
    }
    const char *value = line + v;
    size_t v_len = end - v;
    if (name_is(line, n, "content-length")) return parse_content_length(r, value, v_len);
    if (name_is(line, n, "transfer-encoding")) {
        if (r->chunked) return 400;
        if (!(v_len == 7 && strncasecmp(value, "chunked", 7) == 0)) return 501;
        r->chunked = true;
    } else if (name_is(line, n, "connection")) {
        *close = *close || has_token(value, v_len, "close");
        *keep = *keep || has_token(value, v_len, "keep-alive");
    } else if (name_is(line, n, "expect")) {
        r->expect_continue = has_token(value, v_len, "100-continue");
    } else if (name_is(line, n, "authorization")) {
        r->authorization_too_long = v_len >= sizeof r->authorization;
        if (r->authorization_too_long) v_len = 0;
        memcpy(r->authorization, value, v_len);
        r->authorization[v_len] = '\0';
    } else if (name_is(line, n, "origin") && v_len < sizeof r->origin) {
        memcpy(r->origin, value, v_len);
        r->origin[v_len] = '\0';
    }
    return 0;
}

int http_parse_head(HttpRequest *r, const char *buf, size_t len) {
    size_t end = head_end(buf, len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD);
    if (end == 0) return len >= HTTP_MAX_HEAD ? 431 : HTTP_NEED_MORE;
    memset(r, 0, sizeof *r);
    r->content_length = -1;
    size_t at = 0, line_len;
    const char *line;
    if (next_line(buf, end, &at, &line, &line_len) != 0) return 400;
    int status = parse_request_line(r, line, line_len);
    if (status) return status;
    bool close = false, keep = false;
    while (next_line(buf, end, &at, &line, &line_len) == 0 && line_len > 0)
        if ((status = parse_header(r, line, line_len, &close, &keep))) return status;
    if (at != end) return 400;
    /* Both framings at once is how requests are smuggled: refuse it. */
    if (r->chunked && r->content_length >= 0) return 400;
    r->keep_alive = r->minor_version == 1 ? !close : keep && !close;
    r->head_len = end;
    return 0;
}

/* ---- chunked bodies ---- */

enum {
    CHUNK_SIZE,                /* hex digits of a chunk's size */
    CHUNK_EXTENSION,           /* ";name=value" after the size, ignored */
    CHUNK_SIZE_LF,             /* the LF after the size line's CR */
    CHUNK_DATA,
    CHUNK_DATA_CR,             /* the CR LF after a chunk's data */
    CHUNK_DATA_LF,
    CHUNK_TRAILER,             /* the start of a trailer line, or the final blank line */
    CHUNK_TRAILER_LINE,        /* a trailer field, ignored */
    CHUNK_END_LF,              /* the final LF */
    CHUNK_DONE,
};

enum { MAX_CHUNK_LINE = 4096 };

static int hex_value(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* The end of a size line: on to the data, or to the trailer after the last chunk. */
static int end_size_line(HttpChunked *c, size_t body_len, size_t max_body) {
    if (c->size_digits == 0) return 400;
    if (c->chunk_left > max_body - body_len) return 413;
    c->state = c->chunk_left ? CHUNK_DATA : CHUNK_TRAILER;
    c->line_bytes = 0;
    return 0;
}

int http_chunked_feed(HttpChunked *c, const char *in, size_t n, char *body, size_t *body_len, size_t max_body,
                      size_t *used) {
    size_t i = 0;
    int status = 0;
    while (i < n && c->state != CHUNK_DONE && status == 0) {
        char ch = in[i];
        if (c->state == CHUNK_DATA) {
            size_t take = n - i < c->chunk_left ? n - i : (size_t)c->chunk_left;
            memcpy(body + *body_len, in + i, take);
            *body_len += take;
            c->chunk_left -= take;
            i += take;
            if (c->chunk_left == 0) c->state = CHUNK_DATA_CR;
            continue;
        }
        i++;
        if ((c->state <= CHUNK_EXTENSION || c->state == CHUNK_TRAILER_LINE) && ++c->line_bytes > MAX_CHUNK_LINE) {
            status = 400;
            break;
        }
        switch (c->state) {
        case CHUNK_SIZE:
            if (hex_value(ch) >= 0) {
                if (++c->size_digits > 15) status = 400;
                c->chunk_left = c->chunk_left * 16 + (unsigned)hex_value(ch);
            } else if (ch == ';' || ch == ' ' || ch == '\t') {
                c->state = CHUNK_EXTENSION;
            } else if (ch == '\r') {
                c->state = CHUNK_SIZE_LF;
            } else if (ch == '\n') {
                status = end_size_line(c, *body_len, max_body);
            } else {
                status = 400;
            }
            break;
        case CHUNK_EXTENSION:
            if (ch == '\r') c->state = CHUNK_SIZE_LF;
            else if (ch == '\n') status = end_size_line(c, *body_len, max_body);
            break;
        case CHUNK_SIZE_LF:
            status = ch == '\n' ? end_size_line(c, *body_len, max_body) : 400;
            break;
        case CHUNK_DATA_CR:
            if (ch == '\r') c->state = CHUNK_DATA_LF;
            else if (ch == '\n') c->state = CHUNK_SIZE, c->size_digits = 0, c->line_bytes = 0;
            else status = 400;
            break;
        case CHUNK_DATA_LF:
            if (ch == '\n') c->state = CHUNK_SIZE, c->size_digits = 0, c->line_bytes = 0;
            else status = 400;
            break;
        case CHUNK_TRAILER:
            if (ch == '\r') c->state = CHUNK_END_LF;
            else if (ch == '\n') c->state = CHUNK_DONE;
            else c->state = CHUNK_TRAILER_LINE, c->line_bytes = 1;
            break;
        case CHUNK_TRAILER_LINE:
            if (ch == '\n') c->state = CHUNK_TRAILER;
            break;
        case CHUNK_END_LF:
            if (ch == '\n') c->state = CHUNK_DONE;
            else status = 400;
            break;
        }
    }
    *used = i;
    if (status) return status;
    return c->state == CHUNK_DONE ? 0 : HTTP_NEED_MORE;
}

const char *http_reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}
