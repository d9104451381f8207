/* args.c - a subcommand's arguments: flags, values, operands, the model. */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- flags and operands ---- */

/* A usage error of the subcommand, with the hint that says where help is. */
noreturn void usage_error(const Args *a, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    die_usage("%s: %s (see 'run %s --help')", a->command, msg, a->command);
}

/* Whether the current argument is one of `names` ("-t|--threads"), alone or
 * as name=value. */
bool is_flag(Args *a, const char *names) {
    const char *arg = a->argv[a->i];
    if (a->flags_done || arg[0] != '-') return false;
    size_t len = strcspn(arg, "=");
    for (const char *n = names; *n;) {
        size_t n_len = strcspn(n, "|");
        if (n_len == len && strncmp(n, arg, len) == 0) {
            a->attached = arg[len] == '=' ? arg + len + 1 : NULL;
            return true;
        }
        n += n_len + (n[n_len] == '|');
    }
    return false;
}

/* The value of the flag just matched: attached, or the next argument. */
const char *flag_value(Args *a) {
    if (a->attached) return a->attached;
    if (a->i + 1 >= a->argc) usage_error(a, "%s needs a value", a->argv[a->i]);
    return a->argv[++a->i];
}

/* Refuses a value given to a flag that takes none (--pieces=yes). */
void no_value(const Args *a) {
    if (a->attached) usage_error(a, "%.*s takes no value", (int)strcspn(a->argv[a->i], "="), a->argv[a->i]);
}

long parse_long(const Args *a, const char *what, const char *value, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (*value == '\0' || *end != '\0' || errno || v < lo || v > hi)
        usage_error(a, "%s: expected an integer in [%ld, %ld], got '%s'", what, lo, hi, value);
    return v;
}

double parse_double(const Args *a, const char *what, const char *value) {
    char *end;
    double v = strtod(value, &end);
    if (*value == '\0' || *end != '\0' || !isfinite(v)) usage_error(a, "%s: expected a number, got '%s'", what, value);
    return v;
}

/* An operand (not a flag): "-" alone is one (standard input). */
static bool is_operand(const Args *a) {
    const char *arg = a->argv[a->i];
    return a->flags_done || arg[0] != '-' || arg[1] == '\0';
}

/* An argument that no flag of the command took: "--" (the end of the
 * flags), -m/--model, an unknown flag (refused) or an operand, kept. */
void other_argument(Args *a) {
    const char *arg = a->argv[a->i];
    if (!a->flags_done && strcmp(arg, "--") == 0) {
        a->flags_done = true;
    } else if (is_flag(a, "-m|--model")) {
        if (a->model) usage_error(a, "-m: the model is given twice");
        a->model = flag_value(a);
    } else if (!is_operand(a)) {
        usage_error(a, "unknown flag '%s'", arg);
    } else {
        a->operands[a->n_operands++] = arg;
    }
}

/* After the arguments: the model (-m's, else the first operand, which it
 * takes from the operands). At most `most` operands may be left; `hint`
 * follows the message about one too many. */
const char *command_model(Args *a, int most, const char *hint) {
    const char *model = a->model;
    if (!model) {
        if (a->n_operands == 0) usage_error(a, "MODEL is missing (the first argument, or -m MODEL)");
        model = a->operands[0];
        a->operands++;
        a->n_operands--;
    }
    if (a->n_operands > most) usage_error(a, "unexpected argument '%s'%s", a->operands[most], hint);
    return model;
}

/* The i-th operand left after the model, or NULL. */
const char *operand(const Args *a, int i) { return i < a->n_operands ? a->operands[i] : NULL; }

/* ---- token ids ---- */

/* Token ids separated by spaces, commas or newlines ("9707, 11 1879"). */
int *parse_ids(const Args *a, const char *what, const char *text, int *n) {
    int cap = 16, count = 0;
    int *ids = xmalloc((size_t)cap * sizeof *ids);
    for (const char *p = text;;) {
        p += strspn(p, " \t\r\n");
        if (*p == '\0') break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > 1 << 30 || (*end && !strchr(" \t\r\n,", *end)))
            usage_error(a, "%s: expected token ids separated by spaces or commas, got '%.60s'", what, text);
        if (count == cap) ids = xrealloc(ids, (size_t)(cap *= 2), sizeof *ids);
        ids[count++] = (int)v;
        p = end + strspn(end, " \t\r\n");
        if (*p == ',') p++;
    }
    *n = count;
    return ids;
}

/* ---- escapes (-e) ---- */

/* The character an escape \c stands for, or -1 when it is none of \n, \r,
 * \t, \\, \' and \". */
static int escaped_char(char c) {
    switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '\\': case '\'': case '"': return c;
    default: return -1;
    }
}

/* Replaces the escapes in text[0..*len) (those of escaped_char, and \xHH)
 * by the characters they stand for, in place; any other backslash stays. */
void read_escapes(char *text, size_t *len) {
    size_t out = 0;
    for (size_t i = 0; i < *len; i++) {
        int c = i + 1 < *len && text[i] == '\\' ? escaped_char(text[i + 1]) : -1;
        if (c >= 0) {
            text[out++] = (char)c;
            i++;
        } else if (text[i] == '\\' && i + 3 < *len && text[i + 1] == 'x' && hex_digit(text[i + 2]) >= 0 &&
                   hex_digit(text[i + 3]) >= 0) {
            text[out++] = (char)(hex_digit(text[i + 2]) * 16 + hex_digit(text[i + 3]));
            i += 3;
        } else {
            text[out++] = text[i];
        }
    }
    *len = out;
}

/* A copy of a flag's text, its escapes read when `escapes`; a usage error
 * when it comes out empty and may not be. */
char *flag_text(const Args *a, const char *what, const char *text, bool escapes, bool may_be_empty) {
    char *copy = xstrdup(text);
    size_t len = strlen(copy);
    if (escapes) read_escapes(copy, &len);
    copy[len] = '\0';
    if (!may_be_empty && strlen(copy) == 0) usage_error(a, "%s: the text is empty", what);
    return copy;
}

