/* args.h - reading a subcommand's arguments, as main.c's commands do: a
 * flag by its names, alone or as name=value, its value parsed and checked
 * (a usage error names the flag and says where help is), operands kept in
 * order, "--" ending the flags, and the model as the first operand or
 * -m/--model's value anywhere. Token id lists and -e's escapes are read
 * here too. */
#ifndef ARGS_H
#define ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdnoreturn.h>

typedef struct {
    const char *command;       /* the subcommand, for messages */
    int argc;
    char **argv;               /* argv[0] is the subcommand's name */
    int i;                     /* the argument being read */
    const char *attached;      /* the value given as --flag=value, or NULL */
    bool flags_done;           /* after "--", everything is an operand */
    const char *model;         /* -m/--model's value, or NULL */
    const char **operands;     /* [argc] the arguments that are not flags, in order */
    int n_operands;
} Args;

/* A usage error of the subcommand (exit status 2), with the hint that
 * says where its help is. */
noreturn void usage_error(const Args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether the current argument is one of `names` ("-t|--threads"), alone or
 * as name=value. */
bool is_flag(Args *a, const char *names);

/* The value of the flag just matched: attached, or the next argument. */
const char *flag_value(Args *a);

/* Refuses a value given to a flag that takes none (--pieces=yes). */
void no_value(const Args *a);

/* `value` of flag `what` as an integer in [lo, hi], or a number. */
long parse_long(const Args *a, const char *what, const char *value, long lo, long hi);
double parse_double(const Args *a, const char *what, const char *value);

/* An argument that no flag of the command took: "--" (the end of the
 * flags), -m/--model, an unknown flag (refused) or an operand, kept. */
void other_argument(Args *a);

/* After the arguments: the model (-m's, else the first operand, which it
 * takes from the operands). At most `most` operands may be left; `hint`
 * follows the message about one too many. */
const char *command_model(Args *a, int most, const char *hint);

/* The i-th operand left after the model, or NULL. */
const char *operand(const Args *a, int i);

/* Token ids separated by spaces, commas or newlines ("9707, 11 1879"), of
 * flag or argument `what`; a fresh array of *n. */
int *parse_ids(const Args *a, const char *what, const char *text, int *n);

/* -e: replaces the escapes \n, \r, \t, \\, \', \" and \xHH in
 * text[0..*len) by the characters they stand for, in place; any other
 * backslash stays. */
void read_escapes(char *text, size_t *len);

/* A copy of a flag's text, its escapes read when `escapes`; a usage error
 * when it comes out empty and may not be. */
char *flag_text(const Args *a, const char *what, const char *text, bool escapes, bool may_be_empty);

#endif
