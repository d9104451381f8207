/* console.c - standard input, colours and paste, and the progress line. */
#include "console.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "signals.h"
#include "util.h"

/* ---- standard input ---- */

char *console_read_all(size_t *len) {
    bool terminal = isatty(STDIN_FILENO);
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (cap - n < 2) buf = xrealloc(buf, cap *= 2, 1);  /* room for a byte and the zero */
        ssize_t got = read(STDIN_FILENO, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) die("standard input: %s", strerror(errno));
        n += (size_t)got;
        if (got == 0 || (terminal && buf[n - 1] != '\n')) break;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Waits until standard input has something to read (or its end); false when
 * Ctrl-C comes first, however shortly before the wait it came. */
static bool wait_for_input(void) {
    struct pollfd fds[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = signals_fd(), .events = POLLIN}};
    while (!signals_pending())
        if (poll(fds, 2, -1) > 0 && fds[0].revents) return true;
    return false;
}

char *console_read_message(bool interactive, const char *prompt, const char *more) {
    static bool unbuffered;
    if (!unbuffered) setvbuf(stdin, NULL, _IONBF, 0), unbuffered = true;
    char *message = NULL, *line = NULL;
    size_t message_len = 0, cap = 0;
    bool in_paste = false;
    for (;;) {
        if (interactive) fputs(message ? more : prompt, stdout), fflush(stdout);
        errno = 0;
        ssize_t n = wait_for_input() ? getline(&line, &cap, stdin) : -1;
        if (n < 0) {
            free(line);
            if (message && !signals_pending()) return message;  /* the last line had no newline */
            free(message);
            return NULL;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        /* A bracketed paste arrives between ESC[200~ and ESC[201~. */
        char *start = line;
        if (strncmp(start, "\033[200~", 6) == 0) in_paste = true, start += 6, n -= 6;
        bool paste_ends = n >= 6 && strcmp(line + strlen(line) - 6, "\033[201~") == 0;
        if (paste_ends) in_paste = false, line[strlen(line) - 6] = '\0', n -= 6;
        bool continued = !in_paste && n > 0 && start[n - 1] == '\\';
        if (continued) start[--n] = '\0';
        message = xrealloc(message, message_len + (size_t)n + 2, 1);
        if (message_len) message[message_len++] = '\n';
        memcpy(message + message_len, start, (size_t)n + 1);
        message_len += (size_t)n;
        if (!continued && !in_paste) break;
    }
    free(line);
    return message;
}

/* ---- colours and paste ---- */

/* What the terminal was switched to, switched back on every way out. */
static bool colour_used, paste_mode, reset_at_exit;

static void reset_terminal(void) {
    if (colour_used) fputs("\033[0m", stdout);
    if (paste_mode) fputs("\033[?2004l", stdout);
    fflush(stdout);
}

static void reset_later(void) {
    if (!reset_at_exit) atexit(reset_terminal);
    reset_at_exit = true;
}

bool console_colour(void) {
    bool on = isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
    if (on) colour_used = true, reset_later();
    return on;
}

void console_paste_mode(void) {
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) return;
    fputs("\033[?2004h", stdout);
    paste_mode = true;
    reset_later();
}

/* ---- the progress line ---- */

struct Progress {
    const char *model;
    const char *phase;         /* what is happening now */
    char writing[600];         /* or: the prepared file being written and how far */
    double start;
    bool done, shown;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
};

enum { PROGRESS_DELAY_MS = 1000, PROGRESS_EVERY_MS = 250 };

static void *progress_main(void *arg) {
    Progress *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->done) {
        double elapsed = now_seconds() - p->start;
        if (elapsed * 1e3 >= PROGRESS_DELAY_MS) {
            if (p->writing[0]) fprintf(stderr, "\r\033[Krun: %s (%.1f s)", p->writing, elapsed);
            else fprintf(stderr, "\r\033[Krun: %s %s (%.1f s)", p->phase, p->model, elapsed);
            p->shown = true;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + PROGRESS_EVERY_MS * 1000000L;
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&p->wake, &p->lock, &until);
    }
    if (p->shown) fputs("\r\033[K", stderr);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

Progress *progress_start(const char *model) {
    Progress *p = xmalloc(sizeof *p);
    *p = (Progress){.model = model, .phase = "loading", .start = now_seconds()};
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (!isatty(STDERR_FILENO) || pthread_create(&p->thread, NULL, progress_main, p) != 0) p->done = true;
    return p;
}

void progress_phase(Progress *p, const char *phase) {
    pthread_mutex_lock(&p->lock);
    p->phase = phase;
    pthread_mutex_unlock(&p->lock);
}

void progress_writing(void *ctx, const char *path, double done) {
    Progress *p = ctx;
    pthread_mutex_lock(&p->lock);
    snprintf(p->writing, sizeof p->writing, "writing the prepared weights %.500s: %.0f%%", path, 100 * done);
    pthread_mutex_unlock(&p->lock);
}

void progress_end(Progress *p) {
    pthread_mutex_lock(&p->lock);
    bool running = !p->done;
    p->done = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    if (running) pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    free(p);
}
