/* main.c - the command line: one cmd_* function per subcommand.
 *
 * Exit status: 0 on success, 1 on a runtime error (a bad file, a prompt too
 * long for the context), 2 on a usage error (an unknown flag, a bad value). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
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

/* The tokenizer of MODEL (its tokenizer.json, whose path goes to *path) for
 * tok and detok; a runtime error when it cannot be loaded. */
static Tokenizer *load_tokenizer(const char *model, char **path) {
    Error e;
    *path = model_path(model, "tokenizer.json");
    Tokenizer *t = tokenizer_load(*path, &e);
    if (!t) die("%s", e.msg);
    return t;
}

/* All of standard input. */
static char *read_standard_input(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, stdin)) > 0)
        if ((n += got) == cap) buf = xrealloc(buf, cap *= 2, 1);
    if (ferror(stdin)) die("standard input: read error");
    *len = n;
    return buf;
}

static const char TOK_USAGE[] =
    "usage: run tok MODEL [TEXT | -f FILE] [--pieces] [--plain]\n"
    "\n"
    "Prints the token ids of TEXT, of FILE, or of standard input when neither is\n"
    "given, separated by spaces on one line. Only MODEL's tokenizer.json is read.\n"
    "\n"
    "  -f FILE     read the text from FILE\n"
    "  --pieces    print one line per token instead: the id, a tab, and the token as\n"
    "              tokenizer.json spells it (a space shows as \"\xC4\xA0\", a newline as \"\xC4\x8A\")\n"
    "  --plain     read added tokens such as <|im_end|> in the text as plain text\n"
    "  -h, --help  print this help\n";

static int cmd_tok(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL;
    bool pieces = false, plain = false, flags_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!flags_done && is_help(a)) {
            fputs(TOK_USAGE, stdout);
            return 0;
        }
        if (!flags_done && strcmp(a, "-f") == 0) file = flag_value(argc, argv, &i);
        else if (!flags_done && strcmp(a, "--pieces") == 0) pieces = true;
        else if (!flags_done && strcmp(a, "--plain") == 0) plain = true;
        else if (!flags_done && strcmp(a, "--") == 0) flags_done = true;
        else if (!flags_done && a[0] == '-' && a[1] != '\0') die_usage("tok: unknown flag '%s'", a);
        else if (!model) model = a;
        else if (!text) text = a;
        else die_usage("tok: too many arguments (quote the text)");
    }
    if (!model) die_usage("tok: no MODEL given");
    if (text && file) die_usage("tok: give the text or -f FILE, not both");

    char *path, *data;
    size_t len;
    Tokenizer *t = load_tokenizer(model, &path);
    if (text) {
        data = xstrdup(text);
        len = strlen(text);
    } else if (file) {
        Error e;
        if (read_file(file, &data, &len, &e) != 0) die("%s", e.msg);
    } else {
        data = read_standard_input(&len);
    }
    TokenIds ids = {0};
    size_t bad = tokenizer_encode(t, data, len, plain ? ENCODE_PLAIN : ENCODE_ADDED_TOKENS, &ids);
    if (bad) warn("%zu invalid UTF-8 sequence%s in the input replaced by U+FFFD", bad, bad == 1 ? "" : "s");
    for (size_t i = 0; i < ids.n; i++) {
        if (pieces) {
            char *spelling = tokenizer_spelling(t, ids.ids[i]);
            printf("%d\t%s\n", ids.ids[i], spelling);
            free(spelling);
        } else {
            printf(i ? " %d" : "%d", ids.ids[i]);
        }
    }
    if (!pieces) putchar('\n');
    token_ids_free(&ids);
    free(data);
    tokenizer_free(t);
    free(path);
    return 0;
}

static const char DETOK_USAGE[] =
    "usage: run detok MODEL ID...\n"
    "\n"
    "Writes the text of the token ids, exactly as Hugging Face decodes them (added\n"
    "tokens as their text, ill-formed UTF-8 as U+FFFD), with nothing added: no\n"
    "newline at the end. Only MODEL's tokenizer.json is read.\n"
    "\n"
    "  -h, --help  print this help\n";

static int cmd_detok(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (is_help(argv[i])) {
            fputs(DETOK_USAGE, stdout);
            return 0;
        }
    if (argc < 2) die_usage("detok: no MODEL given");
    char *path;
    Tokenizer *t = load_tokenizer(argv[1], &path);
    int n = argc - 2, *ids = xmalloc((size_t)(n ? n : 1) * sizeof *ids);
    for (int i = 0; i < n; i++) ids[i] = (int)parse_long("detok: token id", argv[i + 2], 0, tokenizer_vocab_size(t) - 1);
    char *text;
    size_t len;
    Error e;
    if (tokenizer_decode(t, ids, (size_t)n, &text, &len, &e) != 0) die("%s: %s", path, e.msg);
    fwrite(text, 1, len, stdout);
    free(text);
    free(ids);
    tokenizer_free(t);
    free(path);
    return 0;
}

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);  /* argv[0] is the subcommand's name */
    const char *summary;
} Command;

static const Command commands[] = {
    {"tok", cmd_tok, "print the token ids of a text"},
    {"detok", cmd_detok, "print the text of token ids"},
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
