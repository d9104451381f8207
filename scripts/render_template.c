/* render_template.c - renders a chat template with template.c, for
 * comparing with jinja2 (scripts/check_templates.sh, make_template_golden.py).
 *
 *   render_template TEMPLATE_FILE VARS_JSON_FILE [YYYY-MM-DD HH:MM:SS]
 *
 * TEMPLATE_FILE holds the template's text; VARS_JSON_FILE a JSON object of
 * its variables. The optional time is what strftime_now formats (default:
 * now). Writes the rendered text to standard output; on an error, writes
 * "error: <message>" to standard error and exits with status 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../json.h"
#include "../template.h"
#include "../util.h"

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: render_template TEMPLATE_FILE VARS_JSON_FILE [YYYY-MM-DD HH:MM:SS]\n");
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
