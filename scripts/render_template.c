/* render_template.c - renders a chat template with template.c, for
 * comparing with jinja2 (scripts/check_templates.sh, make_template_golden.py)
 * and for timing (scripts/bench_template.sh).
 *
 *   render_template [--repeat N] TEMPLATE_FILE VARS_JSON_FILE [YYYY-MM-DD HH:MM:SS]
 *
 * TEMPLATE_FILE holds the template's text; VARS_JSON_FILE a JSON object of
 * its variables. The optional time is what strftime_now formats (default:
 * now). Writes the rendered text to standard output; on an error, writes
 * "error: <message>" to standard error and exits with status 1. With
 * --repeat, parses and renders N times more first and writes the best time
 * of a parse and of a render to standard error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../json.h"
#include "../template.h"
#include "../util.h"

/* The best of n timed parses and renders, in microseconds. */
static void time_it(const char *text, size_t len, const JsonValue *vars, const struct tm *now, long n) {
    double best_parse = 1e9, best_render = 1e9;
    for (long i = 0; i < n; i++) {
        Error e;
        double t0 = now_seconds();
        Template *t = template_parse(text, len, &e);
        double t1 = now_seconds();
        size_t out_len;
        char *out = t ? template_render(t, vars, now, &out_len, &e) : NULL;
        double t2 = now_seconds();
        if (!out) die("%s", e.msg);
        if (t1 - t0 < best_parse) best_parse = t1 - t0;
        if (t2 - t1 < best_render) best_render = t2 - t1;
        free(out);
        template_free(t);
    }
    fprintf(stderr, "parse %.1f us, render %.1f us (best of %ld)\n", best_parse * 1e6, best_render * 1e6, n);
}

int main(int argc, char **argv) {
    long repeat = 0;
    if (argc > 2 && strcmp(argv[1], "--repeat") == 0) {
        repeat = atol(argv[2]);
        argc -= 2;
        argv += 2;
    }
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: render_template [--repeat N] TEMPLATE_FILE VARS_JSON_FILE [YYYY-MM-DD HH:MM:SS]\n");
        return 2;
    }
    struct tm when = {0}, *now = NULL;
    if (argc == 4) {
        if (sscanf(argv[3], "%d-%d-%d %d:%d:%d", &when.tm_year, &when.tm_mon, &when.tm_mday, &when.tm_hour,
                   &when.tm_min, &when.tm_sec) != 6)
            die_usage("bad time '%s' (want YYYY-MM-DD HH:MM:SS)", argv[3]);
        when.tm_year -= 1900;
        when.tm_mon -= 1;
        when.tm_isdst = -1;
        timegm(&when); /* fills in the day of the week and of the year */
        now = &when;
    }
    char *text;
    size_t len;
    Error e;
    if (read_file(argv[1], &text, &len, &e) != 0) die("%s", e.msg);
    JsonDoc vars;
    if (json_parse_file(&vars, argv[2], &e) != 0) die("%s", e.msg);
    if (repeat > 0) time_it(text, len, &vars.root, now, repeat);
    Template *t = template_parse(text, len, &e);
    char *out = NULL;
    size_t out_len = 0;
    if (t) out = template_render(t, &vars.root, now, &out_len, &e);
    if (!out) {
        fprintf(stderr, "error: %s\n", e.msg);
        return 1;
    }
    fwrite(out, 1, out_len, stdout);
    free(out);
    template_free(t);
    json_free(&vars);
    free(text);
    return 0;
}
