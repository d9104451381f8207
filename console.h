/* console.h - the terminal side of the command line: Ctrl-C while waiting
 * for input (signals.h catches it), colours and bracketed paste (turned
 * off again on every way out), reading all of standard input or one chat
 * message, and the progress line of a slow load. */
#ifndef CONSOLE_H
#define CONSOLE_H

#include <stdbool.h>
#include <stddef.h>

/* All of standard input, with a terminating zero after its *len bytes. On
 * a terminal, one Ctrl-D ends it, even in the middle of a line (the read
 * then returns a line without its newline). */
char *console_read_all(size_t *len);

/* Reads a message: a line, or several when a line ends in '\' or when they
 * come in one bracketed paste; at a terminal (`interactive`) with `prompt`
 * before the first line and `more` before the next ones. NULL at the end
 * of input or on Ctrl-C (signals_catch must have been called). Standard
 * input is read unbuffered from the first call on, so that the wait for
 * input sees what is still to come. */
char *console_read_message(bool interactive, const char *prompt, const char *more);

/* Whether standard output takes colours (a terminal, and no NO_COLOR);
 * when it does, the colour is reset at exit. */
bool console_colour(void);

/* Turns on bracketed paste when standard input and output are a terminal
 * (a paste then comes between ESC[200~ and ESC[201~: one message); it is
 * turned off at exit. */
void console_paste_mode(void);

/* A line on standard error while a checkpoint loads, on a terminal and
 * once the load takes more than a second (a cold page cache, a conversion
 * to q8): what is happening to MODEL, and for how long. */
typedef struct Progress Progress;

Progress *progress_start(const char *model);

/* What is happening now ("loading the tokenizer of"). */
void progress_phase(Progress *p, const char *phase);

/* ModelOptions.progress (ctx is the Progress): the prepared file being
 * written, and how far. */
void progress_writing(void *ctx, const char *path, double done);

/* Clears the line and frees p. */
void progress_end(Progress *p);

#endif
