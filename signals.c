/* signals.c - SIGINT and SIGTERM through a self-pipe. */
#include "signals.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t pending;

/* The handler writes a byte to [1]; both ends never block. */
static int self_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    (void)sig;
    pending = 1;
    int saved = errno;
    if (write(self_pipe[1], "", 1) < 0) { /* full: signals are waiting to be taken already */ }
    errno = saved;
}

int signals_catch(bool terminate, Error *e) {
    if (self_pipe[0] < 0) {
        if (pipe(self_pipe) != 0) return fail(e, "pipe: %s", strerror(errno));
        for (int i = 0; i < 2; i++) fcntl(self_pipe[i], F_SETFL, O_NONBLOCK), fcntl(self_pipe[i], F_SETFD, FD_CLOEXEC);
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    if (terminate) sigaction(SIGTERM, &sa, NULL);
    return 0;
}

bool signals_pending(void) { return pending; }

int signals_fd(void) { return self_pipe[0]; }

int signals_take(void) {
    /* The flag first: a signal from here on is either read below or left
     * pending for the next call, never lost. */
    pending = 0;
    int taken = 0;
    char bytes[64];
    ssize_t got;
    while (self_pipe[0] >= 0 && (got = read(self_pipe[0], bytes, sizeof bytes)) > 0) taken += (int)got;
    return taken;
}
