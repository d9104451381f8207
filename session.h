/* session.h - what gen and chat share: a checkpoint loaded for generating;
 * one Sequence with the run's settings and flags (stop strings, a grammar,
 * the watch of -vv and --report); the reply loop, which streams a reply to
 * standard output as it comes (a <think> block in its own colour, -v's line
 * per token on standard error, the report's steps, Ctrl-C); the statistics
 * line; and chat's turns. main.c reads the flags and calls these. Like
 * main.c, it ends the process on an error with one line (die). */
#ifndef SESSION_H
#define SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include "chat.h"
#include "generate.h"
#include "grammar.h"
#include "net.h"
#include "report.h"
#include "tokenizer.h"
#include "trace.h"

typedef struct {
    const char *command;       /* "gen" or "chat": the report names it */
    int verbose;               /* -v: a line per token on stderr; -vv: and each layer's statistics */
    const char *report_path;   /* --report FILE.html, or NULL */
    const char *const *stops;  /* [n_stops] stop strings, copied */
    int n_stops;
    Grammar *grammar;          /* constrains every reply, or NULL; the session's from session_start on */
} SessionOptions;

typedef struct {
    const char *path;          /* the checkpoint */
    Model model;
    Tokenizer *tokenizer;
    double load_seconds;
    Sequence seq;
    SessionOptions opt;
    GrammarVocab *grammar_vocab; /* the grammar over the model's vocabulary, or NULL */
    Trace trace;               /* -vv's layer lines, shown through trace_probe */
    Probe trace_probe;
    Report *report;            /* --report's, or NULL */
    const char *thinking_on, *thinking_off; /* around a <think> block: colours, or "" */
} Session;

/* Loads checkpoint PATH (weights and tokenizer) for generating. */
void session_load(Session *s, const char *path, const ModelOptions *opt);

/* Starts generating with settings g under o: the sequence (a KV cache of
 * the whole context), its stop strings and grammar, the watch; Ctrl-C
 * from now on stops a reply instead of the process. */
void session_start(Session *s, const GenerationConfig *g, const SessionOptions *o);

/* Feeds the sequence's pending tokens and generates a reply after them,
 * streaming it to standard output (and appending it to *reply when reply
 * is not NULL). Ends at a stop rule or at Ctrl-C; a limit of 0 new tokens
 * feeds the prompt only. */
StopReason session_reply(Session *s, char **reply, size_t *reply_len);

/* The statistics line on standard error: prompt and generated tokens,
 * their speeds, why it stopped, and the seed when sampling. */
void session_print_stats(const Session *s, StopReason stop);

/* Writes the report (with --report) and frees it all. */
void session_end(Session *s);

/* The commands chat takes at its prompt, for its help. */
extern const char *const chat_commands_help;

/* chat's turns, until the end of input, /exit or Ctrl-C at the prompt: a
 * message (console_read_message) is added to c, the conversation's tokens
 * start the sequence (its cache reused), and the reply is streamed and
 * added too. On a terminal: a prompt, colours, the statistics at the end;
 * piped: only the replies, each followed by a newline. */
void session_chat(Session *s, Chat *c);

#endif
