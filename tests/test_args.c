/* test_args.c - reading a subcommand's arguments: flags by their names,
 * alone or as name=value, "--", -m/--model anywhere, the operands left,
 * token id lists, and -e's escapes (each expected byte written by hand).
 * The usage errors (which exit) are run end to end by test_cli.sh and
 * test_gen.sh. */
#include <stdlib.h>
#include <string.h>

#include "../args.h"
#include "test.h"

/* Args over a NULL-terminated list, argv[0] the command. */
static Args args_of(char **argv, const char **operands) {
    int argc = 0;
    while (argv[argc]) argc++;
    return (Args){.command = argv[0], .argc = argc, .argv = argv, .operands = operands};
}

static void test_flags(void) {
    char *argv[] = {"gen", "--temp=0.5", "hi", "-m", "M", "-n", "7", "--", "-p", NULL};
    const char *operands[10];
    Args a = args_of(argv, operands);
    double temp = 0;
    long n = 0;
    for (a.i = 1; a.i < a.argc; a.i++) {
        if (is_flag(&a, "--temp|--temperature")) temp = parse_double(&a, "--temp", flag_value(&a));
        else if (is_flag(&a, "-n|--n-predict")) n = parse_long(&a, "-n", flag_value(&a), -1, 100);
        else if (is_flag(&a, "-p")) CHECK(false, "-p after -- is not a flag");
        else other_argument(&a);
    }
    CHECK(temp == 0.5 && n == 7, "--temp=0.5 attached, -n 7 as the next argument");
    CHECK(a.model && strcmp(a.model, "M") == 0, "-m M taken as the model");
    const char *model = command_model(&a, 2, "");
    CHECK(strcmp(model, "M") == 0 && a.n_operands == 2 && strcmp(operand(&a, 0), "hi") == 0 &&
              strcmp(operand(&a, 1), "-p") == 0 && operand(&a, 2) == NULL,
          "with -m, every operand is left: 'hi' and '-p' (after --)");

    char *argv2[] = {"tok", "MODEL", "text", NULL};
    Args b = args_of(argv2, operands);
    for (b.i = 1; b.i < b.argc; b.i++) other_argument(&b);
    model = command_model(&b, 1, "");
    CHECK(strcmp(model, "MODEL") == 0 && b.n_operands == 1 && strcmp(operand(&b, 0), "text") == 0,
          "without -m, the first operand is the model");

    char *argv3[] = {"gen", "--temperature", "2", "-", NULL};
    Args c = args_of(argv3, operands);
    for (c.i = 1; c.i < c.argc; c.i++) {
        if (is_flag(&c, "--temp|--temperature")) temp = parse_double(&c, "--temp", flag_value(&c));
        else other_argument(&c);
    }
    CHECK(temp == 2 && c.n_operands == 1 && strcmp(c.operands[0], "-") == 0, "a long name; '-' alone is an operand");
}

static void test_ids(void) {
    char *argv[] = {"fwd", NULL};
    Args a = args_of(argv, NULL);
    int n, *ids = parse_ids(&a, "--tokens", " 9707, 11\n1879,\t0 ", &n);
    CHECK(n == 4 && ids[0] == 9707 && ids[1] == 11 && ids[2] == 1879 && ids[3] == 0, "ids by spaces, commas, newlines");
    free(ids);
    ids = parse_ids(&a, "--tokens", "", &n);
    CHECK(n == 0, "no ids");
    free(ids);
}

static void test_escapes(void) {
    char text[] = "a\\nb\\t\\\\\\'\\\"\\x41\\x7a\\q\\x4\\";
    size_t len = strlen(text);
    read_escapes(text, &len);
    const char want[] = {'a', '\n', 'b', '\t', '\\', '\'', '"', 'A', 'z', '\\', 'q', '\\', 'x', '4', '\\'};
    CHECK(len == sizeof want && memcmp(text, want, len) == 0,
          "\\n \\t \\\\ \\' \\\" \\x41 \\x7a read; \\q, a short \\x4 and a last backslash kept (%zu bytes)", len);
    char zero[] = "x\\x00y";
    len = strlen(zero);
    read_escapes(zero, &len);
    CHECK(len == 3 && zero[0] == 'x' && zero[1] == '\0' && zero[2] == 'y', "\\x00: a zero byte inside the text");
    char *argv[] = {"gen", NULL};
    Args a = args_of(argv, NULL);
    char *copy = flag_text(&a, "--system", "Be\\x20brief.", true, true);
    CHECK(strcmp(copy, "Be brief.") == 0, "flag_text reads the escapes of a copy");
    free(copy);
    copy = flag_text(&a, "--system", "Be\\x20brief.", false, true);
    CHECK(strcmp(copy, "Be\\x20brief.") == 0, "... only with -e");
    free(copy);
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    test_flags();
    test_ids();
    test_escapes();
    return test_summary("test_args");
}
