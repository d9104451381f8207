/* main.c - the command line: one cmd_* function per subcommand.
 *
 * Exit status: 0 on success, 1 on a runtime error (a bad file, a prompt too
 * long for the context), 2 on a usage error (an unknown flag, a bad value). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- flag values ---- */

/* An integer flag value in [lo, hi], or a usage error naming the flag. */
static long parse_long(const char *flag, const char *value, long lo, long hi) {
    char *end;
    long v = strtol(value, &end, 10);
    if (*value == '\0' || *end != '\0' || v < lo || v > hi)
        die_usage("%s: expected an integer in [%ld, %ld], got '%s'", flag, lo, hi, value);
    return v;
}

/* The value after flag argv[*i], advancing *i; a usage error when missing. */
static const char *flag_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) die_usage("%s needs a value", argv[*i]);
    return argv[++*i];
}

static int is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

/* ---- subcommands ---- */

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);  /* argv[0] is the subcommand's name */
    const char *summary;
} Command;

static const Command commands[] = {
    {NULL, NULL, NULL},
};

static void usage(FILE *out) {
    fputs("usage: run COMMAND [ARGS...]\n"
          "\n"
          "Runs Qwen2-family language models from a Hugging Face checkpoint folder\n"
          "(config.json, model.safetensors, tokenizer.json).\n"
          "\n"
          "commands:\n",
          out);
    for (const Command *c = commands; c->name; c++) fprintf(out, "  %-7s %s\n", c->name, c->summary);
    fputs("\n"
          "MODEL is a checkpoint folder, or a .safetensors file whose folder holds the rest.\n"
          "'run COMMAND --help' lists a command's flags and their defaults.\n"
          "Exit status: 0 success, 1 runtime error, 2 usage error.\n",
          out);
}

int main(int argc, char **argv) {
    if (argc < 2 || is_help(argv[1])) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (const Command *c = commands; c->name; c++)
        if (strcmp(argv[1], c->name) == 0) return c->run(argc - 1, argv + 1);
    die_usage("unknown command '%s'", argv[1]);
}
