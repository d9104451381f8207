/* tools.h - tool calling and structured output for `run serve`: what the
 * checkpoint's chat template does with tools and thinking, and the grammar
 * a request's reply must follow.
 *
 * A template teaches the model one way of writing a tool call, which the
 * template itself uses for the calls in a conversation's history; found by
 * rendering a probe call, it is one of
 *
 *   TOOL_SYNTAX_QWEN    <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
 *                       (Qwen2.5, Qwen3, Hermes-style templates), one block per call;
 *   TOOL_SYNTAX_LLAMA3  {"name": "f", "parameters": {...}} as the whole reply, after
 *                       <|python_tag|> or not (Llama 3.1 to 3.3), calls apart by ";".
 *
 * The reply's grammar (GBNF, grammar.h) comes from the request:
 *   - response_format json_object: any JSON object; json_schema: the
 *     schema's grammar (schema.h); llama.cpp's "grammar": as given;
 *   - tool_choice required, or a named function: one call or more (one
 *     when parallel_tool_calls is false) of the listed functions (of that
 *     one), each call's arguments a sentence of its parameters schema;
 *   - tool_choice auto: a lazy grammar (generate.h): free text until the
 *     template's call opener (Qwen: "<tool_call>" anywhere; Llama 3:
 *     "{" or "<|python_tag|>" at the start), then calls as above; with a
 *     JSON response format, the answer or calls, from the start.
 * Where the model may think first (Qwen3: the template renders <think>,
 * and the prompt does not close it), a <think>...</think> block may come
 * before what the grammar asks for; when the prompt opens it, the reply
 * begins inside it. */
#ifndef TOOLS_H
#define TOOLS_H

#include <stdbool.h>
#include <stddef.h>

#include "api.h"
#include "chat.h"
#include "generate.h"
#include "reply.h"
#include "util.h"

/* What a chat template does, found by rendering probes. */
typedef struct {
    bool tools;                /* it shows the model the tools' definitions */
    ToolSyntax syntax;         /* how it writes an assistant's tool calls (NONE: in no way known here) */
    bool thinking;             /* enable_thinking changes its text */
} TemplateCaps;

/* Probes template t (NULL: a model without one, which does nothing). */
TemplateCaps template_caps(const ChatTemplate *t);

/* "qwen", "llama3" or "none". */
const char *tool_syntax_name(ToolSyntax s);

/* How a reply to `prompt` (rendered by a template with caps) starts. */
ThinkStart think_start(const TemplateCaps *caps, const char *prompt, size_t len);

/* The grammar of a reply. */
typedef struct {
    char *gbnf;                /* NULL: the reply is free */
    GrammarTrigger triggers[2]; /* a lazy grammar's triggers */
    int n_triggers;
} ReplyGrammar;

/* The grammar request r asks for, when the model writes tool calls in
 * `syntax` and starts as `think` says. On a request this server cannot
 * answer (a schema feature not supported, tools for a template that does
 * not show them or writes calls in no known way) returns -1 with the
 * message for the client in e; the caller frees g->gbnf. */
int reply_grammar(ReplyGrammar *g, const ApiRequest *r, const TemplateCaps *caps, ThinkStart think, Error *e);

#endif
