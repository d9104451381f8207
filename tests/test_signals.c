/* test_signals.c - SIGINT and SIGTERM through the self-pipe: a signal
 * raised is pending, makes the pipe readable (a poll that starts after it
 * ends at once), and is counted once by signals_take; two are counted two. */
#include <poll.h>
#include <signal.h>

#include "../signals.h"
#include "test.h"

static bool readable(void) {
    struct pollfd p = {.fd = signals_fd(), .events = POLLIN};
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    Error e;
    CHECK(signals_catch(true, &e) == 0, "caught");
    CHECK(!signals_pending() && !readable() && signals_take() == 0, "nothing yet");
    raise(SIGINT);
    CHECK(signals_pending() && readable(), "SIGINT: pending, the pipe readable");
    CHECK(signals_take() == 1 && !signals_pending() && !readable(), "taken once, then forgotten");
    raise(SIGTERM);
    raise(SIGINT);
    CHECK(signals_pending() && signals_take() == 2, "SIGTERM and SIGINT: two");
    CHECK(signals_catch(false, &e) == 0 && signals_take() == 0, "caught again: the same pipe, nothing pending");
    return test_summary("test_signals");
}
