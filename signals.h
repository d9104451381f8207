/* signals.h - the one home of SIGINT (Ctrl-C) and SIGTERM. A caught signal
 * sets a flag and writes a byte to a pipe (a self-pipe), so that a wait
 * that polls signals_fd() ends on it however shortly before the wait it
 * came, and the bytes count the signals. gen and chat catch SIGINT (it
 * stops a reply, or chat at its prompt); serve catches both (the first
 * drains it, a second ends the replies under way). */
#ifndef SIGNALS_H
#define SIGNALS_H

#include <stdbool.h>

#include "util.h"

/* From now on SIGINT, and SIGTERM when `terminate`, are caught instead of
 * ending the process (a blocked read returns with EINTR). */
int signals_catch(bool terminate, Error *e);

/* Whether a signal came since the last signals_take: a cheap test for a
 * loop. */
bool signals_pending(void);

/* The pipe's end to poll: readable while a signal is pending. */
int signals_fd(void);

/* How many signals came since the last call, forgotten from now on. */
int signals_take(void);

#endif
