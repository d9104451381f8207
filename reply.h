/* reply.h - a chat reply's text split into what the OpenAI API shows:
 * reasoning_content (the <think>...</think> a thinking model opens with),
 * content, and tool_calls written in the template's syntax (found by tools.h), as
 * the text streams in, so that a stream's deltas and the whole response
 * say the same.
 *
 * Each feed gives the events the text so far makes certain: text that may
 * still turn out to begin "</think>" or a call's opener is held back until
 * more comes (or the reply ends). A call is announced (REPLY_CALL: its id
 * and name) as soon as its name is known and its arguments object begins,
 * and its arguments follow as they are written, as OpenAI streams them.
 * Whitespace around the thinking and before a call is dropped. Text that
 * opens a call but is no call (broken JSON, no name) is content after all;
 * a call cut short by the length limit keeps the arguments written. */
#ifndef REPLY_H
#define REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* How a template's model writes a tool call (tools.h finds it). */
typedef enum {
    TOOL_SYNTAX_NONE,          /* in no way read here: no calls */
    TOOL_SYNTAX_QWEN,          /* <tool_call>{"name": ..., "arguments": {...}}</tool_call> */
    TOOL_SYNTAX_LLAMA3,        /* {"name": ..., "parameters": {...}} as the whole reply */
} ToolSyntax;

/* Where a reply starts with respect to thinking. */
typedef enum {
    THINK_NONE,                /* no thinking: the template does not, or the prompt closed it */
    THINK_MAY,                 /* the reply may open with <think>...</think> */
    THINK_OPEN,                /* the prompt opened <think>: the reply begins inside it */
} ThinkStart;

typedef enum {
    REPLY_CONTENT,             /* text of the content */
    REPLY_REASONING,           /* text of the reasoning */
    REPLY_CALL,                /* a call begins: calls[call] has its id and name */
    REPLY_ARGUMENTS,           /* text of calls[call]'s arguments */
} ReplyEventKind;

typedef struct {
    ReplyEventKind kind;
    int call;                  /* REPLY_CALL, REPLY_ARGUMENTS: the call's index */
    const char *text;          /* the text it adds (not REPLY_CALL); valid until the next feed */
    size_t len;
} ReplyEvent;

typedef struct {
    char id[32];               /* "call_" and 24 letters and digits */
    char *name;
    Buf arguments;             /* the arguments' JSON text, as written */
} ReplyCall;

typedef enum { PARSE_START, PARSE_THINK, PARSE_BODY, PARSE_CONTENT, PARSE_CALL, PARSE_AFTER_CALL } ReplyState;

typedef struct {
    ToolSyntax syntax;         /* the calls read (NONE: none, all is content) */
    bool split_thinking;       /* a <think> block goes to the reasoning */
    uint64_t ids;              /* the state the call ids are drawn from */
    ReplyState state;
    bool drop_blanks;          /* leading whitespace of what comes next is dropped */
    Buf pending;               /* text fed and not yet given out */
    /* The call being read: its text, and where the scan of its JSON is. */
    Buf raw;                   /* the opener and all of the call read so far (content if it is no call) */
    Buf object;                /* the call's JSON object text */
    int depth;
    bool in_string, escaped;
    int top;                   /* where the scan is among the object's own members (reply.c) */
    char key[16];              /* the member being read (its first 15 bytes) */
    size_t key_len;
    size_t value_start;        /* where its value begins in `object` */
    size_t name_start, name_end;  /* the name's text in `object` (end 0: not yet) */
    size_t args_start, args_end;  /* the arguments' value in `object` (end 0: not yet) */
    bool streaming;            /* the arguments are being given out as they come */
    int current;               /* the call's index once announced, else -1 */
    /* What the reply says so far. */
    Buf content, reasoning;
    bool has_reasoning;        /* a thinking block was there (maybe empty) */
    ReplyCall *calls;
    int n_calls;
    /* The last feed's events; their text lives in `scratch`. */
    ReplyEvent *events;
    int n_events, cap_events;
    size_t *offsets;           /* [cap_events] where each event's text begins in scratch */
    Buf scratch;
} ReplyParser;

/* A parser for a reply in tool-call syntax `syntax` (NONE: no calls) that
 * starts as `think` says; reasoning false keeps thinking in the content.
 * Call ids are drawn from `seed`. */
void reply_init(ReplyParser *p, ToolSyntax syntax, bool reasoning, ThinkStart think, uint64_t seed);
void reply_free(ReplyParser *p);

/* Reads the next text[0..len) of the reply; p->events[0..p->n_events) say
 * what it adds. */
void reply_feed(ReplyParser *p, const char *text, size_t len);

/* The reply has ended: the events of what was held back. */
void reply_end(ReplyParser *p);

#endif
