/* session.c - gen's and chat's run: setup, the reply loop, chat's turns. */
#include "session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "console.h"
#include "signals.h"
#include "threads.h"
#include "util.h"

/* ---- setup and teardown ---- */

void session_load(Session *s, const char *path, const ModelOptions *opt) {
    *s = (Session){.path = path, .thinking_on = "", .thinking_off = ""};
    double t0 = now_seconds();
    s->tokenizer = checkpoint_load(&s->model, path, opt, TOKENIZER_NEEDED, true);
    s->load_seconds = now_seconds() - t0;
}

/* Starts the watch: the trace of -vv, the report, both (the report passes
 * each step on to the trace), or nothing. */
static void watch_start(Session *s) {
    s->trace = (Trace){.out = stderr, .level = 2};
    s->trace_probe = (Probe){.ctx = &s->trace, .vectors = trace_vectors};
    const Probe *trace = s->opt.verbose > 1 ? &s->trace_probe : NULL;
    s->report = s->opt.report_path ? report_new(&s->model, s->tokenizer, trace) : NULL;
    if (!s->report) s->model.probe = trace;
}

void session_start(Session *s, const GenerationConfig *g, const SessionOptions *o) {
    s->opt = *o;
    sequence_init(&s->seq, &s->model, s->tokenizer, g, s->model.max_context);
    sequence_set_stops(&s->seq, o->stops, o->n_stops);
    /* A grammar runs over the model's vocabulary, the end tokens ending a
     * reply only where it is complete. */
    if (o->grammar) {
        s->grammar_vocab = grammar_vocab_new(s->tokenizer, s->model.config.vocab_size, g->eos_ids, g->n_eos);
        sequence_set_grammar(&s->seq, o->grammar, s->grammar_vocab);
    }
    watch_start(s);
    Error e;
    if (signals_catch(false, &e) != 0) die("%s", e.msg);
}

/* The run panel of the report. */
static ReportRun report_run(const Session *s, char *sampling, size_t size) {
    const Sequence *q = &s->seq;
    const SamplerConfig *c = &q->config.sampling;
    snprintf(sampling, size,
             "temperature %g, top-k %d, top-p %g, min-p %g, repetition penalty %g, presence penalty %g, "
             "frequency penalty %g, seed %llu",
             c->temperature, c->top_k, c->top_p, c->min_p, c->repeat_penalty, c->presence_penalty, c->frequency_penalty,
             (unsigned long long)c->seed);
    return (ReportRun){.command = s->opt.command, .model = s->path, .sampling = sampling,
                       .threads = pool_size(s->model.pool), .kv_bytes = kv_cache_bytes(&s->model.config, q->cache.capacity, q->cache.key_type, q->cache.value_type),
                       .load_seconds = s->load_seconds, .prompt_tokens = q->prompt_tokens,
                       .prompt_seconds = q->prompt_seconds, .decode_tokens = q->decode_tokens,
                       .decode_seconds = q->decode_seconds};
}

void session_end(Session *s) {
    if (s->report) {
        char sampling[512];
        ReportRun run = report_run(s, sampling, sizeof sampling);
        Error e;
        if (report_write(s->report, s->opt.report_path, s->seq.tokens.ids, (int)s->seq.tokens.n, &run, &e) != 0)
            die("%s", e.msg);
        fprintf(stderr, "report written to %s\n", s->opt.report_path);
        report_free(s->report);
    }
    s->model.probe = NULL;
    sequence_free(&s->seq);
    grammar_vocab_free(s->grammar_vocab);
    grammar_free(s->opt.grammar);
    model_free(&s->model);
    tokenizer_free(s->tokenizer);
}

/* ---- the reply loop ---- */

/* Where "<think>" or "</think>" begins in text[0..len), or NULL. */
static const char *find_think_tag(const char *text, size_t len, bool *closing) {
    for (size_t i = 0; i < len; i++) {
        if (text[i] != '<') continue;
        if (len - i >= 7 && memcmp(text + i, "<think>", 7) == 0) return *closing = false, text + i;
        if (len - i >= 8 && memcmp(text + i, "</think>", 8) == 0) return *closing = true, text + i;
    }
    return NULL;
}

/* Writes a piece of a reply as it comes, a <think>...</think> block in the
 * thinking colour, and appends it to *reply when reply is not NULL. */
static void show_text(const Session *s, const char *text, size_t len, char **reply, size_t *reply_len) {
    if (reply) {
        *reply = xrealloc(*reply, *reply_len + len + 1, 1);
        memcpy(*reply + *reply_len, text, len);
        *reply_len += len;
        (*reply)[*reply_len] = '\0';
    }
    bool closing;
    for (const char *tag; (tag = find_think_tag(text, len, &closing));) {
        size_t before = (size_t)(tag - text), tag_len = closing ? 8 : 7;
        fwrite(text, 1, before, stdout);
        if (!closing) fputs(s->thinking_on, stdout);
        fwrite(tag, 1, tag_len, stdout);
        if (closing) fputs(s->thinking_off, stdout);
        text += before + tag_len;
        len -= before + tag_len;
    }
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

StopReason session_reply(Session *s, char **reply, size_t *reply_len) {
    Sequence *q = &s->seq;
    SamplerTrace trace;
    if (s->opt.verbose || s->report) sampler_set_trace(q->sampler, &trace);
    float *logits = sequence_feed(q);
    StopReason stop = q->config.max_new == 0 ? STOP_LENGTH : STOP_NONE;
    while (stop == STOP_NONE) {
        double t0 = now_seconds();
        int pos = (int)q->tokens.n;  /* where the new token goes */
        Step step = sequence_step(q, logits);
        show_text(s, step.text, step.len, reply, reply_len);
        stop = step.stop;
        if (stop == STOP_NONE && signals_pending()) {
            stop = STOP_INTERRUPTED;
            size_t len;
            const char *rest = sequence_flush(q, &len);
            show_text(s, rest, len, reply, reply_len);
        }
        if (stop == STOP_NONE) logits = sequence_feed(q);
        double ms = (now_seconds() - t0) * 1e3;
        if (s->opt.verbose) trace_step(stderr, s->tokenizer, &trace, pos, ms);
        if (s->report) report_add_step(s->report, pos, &trace, ms);
    }
    sampler_set_trace(q->sampler, NULL);
    return stop;
}

void session_print_stats(const Session *s, StopReason stop) {
    const Sequence *q = &s->seq;
    fprintf(stderr, "prompt: %d token%s, %.1f tok/s; generated: %d token%s", q->prompt_tokens,
            q->prompt_tokens == 1 ? "" : "s", q->prompt_tokens / fmax(q->prompt_seconds, 1e-9), q->generated_tokens,
            q->generated_tokens == 1 ? "" : "s");
    if (q->decode_tokens > 0) fprintf(stderr, ", %.1f tok/s", q->decode_tokens / fmax(q->decode_seconds, 1e-9));
    fprintf(stderr, "; stopped by %s", stop_reason_text(stop));
    /* Greedy decoding draws no random number: no seed to show. */
    if (q->config.sampling.temperature > 0) fprintf(stderr, "; seed %llu", (unsigned long long)q->config.sampling.seed);
    fputc('\n', stderr);
}

/* ---- chat's turns ---- */

const char *const chat_commands_help =
    "commands: /reset starts a new conversation, /exit or /quit (or Ctrl-D) ends,\n"
    "/help shows this. End a line with \\ to go on to the next one; a paste of\n"
    "several lines is one message. Ctrl-C stops a reply, or ends at the prompt.\n";

/* Runs a command typed at the prompt ("/reset"); false for /exit and /quit. */
static bool chat_command(Chat *c, const char *command, bool interactive) {
    if (strcmp(command, "/exit") == 0 || strcmp(command, "/quit") == 0) return false;
    if (strcmp(command, "/reset") == 0) {
        chat_reset(c);
        if (interactive) fprintf(stderr, "(new conversation)\n");
    } else if (strcmp(command, "/help") == 0) {
        fputs(chat_commands_help, stderr);
    } else {
        fprintf(stderr, "(unknown command %s; /help lists the commands)\n", command);
    }
    return true;
}

/* One turn: the conversation so far and the user's message become the
 * prompt (the oldest turns dropped when the context is full), and the
 * reply is streamed between reply_on and reply_off and added to c. */
static StopReason chat_turn(Session *s, Chat *c, const char *message, const char *reply_on, const char *reply_off) {
    chat_add(c, "user", message);
    TokenIds ids = {0};
    int dropped, context = s->model.max_context;
    Error e;
    if (chat_prompt(c, context, &ids, &dropped, &e) != 0) {
        char advice[160];
        fprintf(stderr, "(%s: %s)\n", e.msg,
                context_advice(advice, sizeof advice, &s->model, "shorten it, or start chat again with a larger -c"));
        chat_remove_last(c);
        token_ids_free(&ids);
        return STOP_NONE;
    }
    if (dropped) fprintf(stderr, "(the context is full: the oldest %d message%s dropped)\n", dropped, dropped == 1 ? " was" : "s were");
    sequence_start(&s->seq, ids.ids, (int)ids.n);
    token_ids_free(&ids);
    fputs(reply_on, stdout);
    char *reply = NULL;
    size_t reply_len = 0;
    StopReason stop = session_reply(s, &reply, &reply_len);
    printf("%s\n", reply_off);
    fflush(stdout);
    chat_add(c, "assistant", reply ? reply : "");
    free(reply);
    if (stop == STOP_CONTEXT_FULL)
        fprintf(stderr, "(the context of %d positions is full: the reply was cut; the next message drops the oldest "
                        "turns, /reset starts afresh)\n", context);
    Grammar *g = s->opt.grammar;
    if (g && grammar_error(g)) fprintf(stderr, "(the grammar stopped the reply: %s)\n", grammar_error(g));
    return stop;
}

void session_chat(Session *s, Chat *c) {
    bool interactive = isatty(STDIN_FILENO), colour = interactive && console_colour();
    const char *prompt = colour ? "\033[1;32m> \033[0m" : "> ", *more = colour ? "\033[1;32m. \033[0m" : ". ";
    const char *reply_on = colour ? "\033[36m" : "", *reply_off = colour ? "\033[0m" : "";
    s->thinking_on = colour ? "\033[2m" : "";
    s->thinking_off = reply_on;
    if (interactive) console_paste_mode();
    if (interactive)
        fprintf(stderr, "chatting with %s (context %d tokens). /help lists the commands.\n", s->path, s->model.max_context);
    else if (s->seq.config.sampling.temperature > 0)
        fprintf(stderr, "seed %llu\n", (unsigned long long)s->seq.config.sampling.seed);
    StopReason stop = STOP_NONE;
    for (;;) {
        signals_take();  /* a Ctrl-C that stopped the last reply is spent */
        char *message = console_read_message(interactive, prompt, more);
        if (!message) break;
        /* A command is one word beginning with '/'. */
        bool command = message[0] == '/' && !strchr(message, ' ') && !strchr(message, '\n');
        bool go_on = command ? chat_command(c, message, interactive) : true;
        if (!command && message[0]) {
            StopReason turn = chat_turn(s, c, message, reply_on, reply_off);
            if (turn != STOP_NONE) stop = turn;
        }
        free(message);
        if (!go_on) break;
    }
    if (interactive) {
        putchar('\n');
        session_print_stats(s, stop);
    }
}
