/* template.c - a Jinja interpreter for chat templates (see template.h):
 * the public functions. The engine lives in jinja/, a file per stage
 * (lexer, parser, scope analysis, rendering, filters, methods, ...);
 * jinja/jinja.h lists them and holds what they share.
 *
 * Parsing checks the text, lexes, parses and analyses scopes under one
 * arena; rendering walks the tree under another. An error anywhere unwinds
 * (longjmp) to here, where that arena is freed whole. */
#include "template.h"

#include "jinja/jinja.h"

/* ======================================================================
 * The public functions
 * ====================================================================== */

void template_free(Template *t) {
    if (t) arena_free(t->chunks);
}

Template *template_parse(const char *text, size_t len, Error *e) {
    if (len > TEMPLATE_MAX_TEXT) {
        fail(e, "the template is larger than %zu KiB", TEMPLATE_MAX_TEXT >> 10);
        return NULL;
    }
    uint32_t c;
    bool truncated;
    for (size_t i = 0; i < len;) {
        size_t used = (unsigned char)text[i] < 0x80 ? 1 : utf8_next(text + i, len - i, &c, &truncated);
        if (used > 1 || (unsigned char)text[i] < 0x80) {
            if ((unsigned char)text[i] >= 0x80 && c == UTF8_INVALID) used = 0;
        }
        if (used == 0 || ((unsigned char)text[i] >= 0x80 && c == UTF8_INVALID)) {
            fail(e, "the template is not valid UTF-8 (byte %zu)", i);
            return NULL;
        }
        i += used;
    }
    jmp_buf unwind;
    Parser p = {.c = {.unwind = &unwind, .e = e, .line = 1, .limit = SIZE_MAX / 4}, .line = 1};
    Parser *volatile pp = &p;
    if (setjmp(unwind)) {
        arena_free(pp->c.chunks);
        return NULL;
    }
    Template *t = alloc(&p.c, sizeof *t);
    *t = (Template){0};
    p.t = t;
    for (int i = 0; i < N_PREDEFINED_NAMES; i++) intern(&p.c, t, str_c(predefined_names[i]));
    /* Newlines become \n, and one newline at the very end is dropped
     * (jinja2's keep_trailing_newline=False). */
    char *src = alloc(&p.c, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\r') {
            src[n++] = '\n';
            if (i + 1 < len && text[i + 1] == '\n') i++;
        } else src[n++] = text[i];
    }
    if (n > 0 && src[n - 1] == '\n') n--;
    src[n] = '\0';
    p.src = src;
    p.len = n;
    lex(&p);
    p.pos = 0;
    p.depth = 0;
    t->body = subparse(&p, NULL);
    if (p.unknown[0]) raise_at(&p.c, p.unknown_line, "%s", p.unknown);
    analyse_frame(&p, NULL, NULL, NULL, false, t->body, &t->locals, &t->n_locals);
    for (size_t i = 0; i < t->body.n; i++) mark_foldable(t->body.at[i]);
    t->chunks = p.c.chunks;
    return t;
}

char *template_render(const Template *t, const JsonValue *vars, const struct tm *now, size_t *out_len, Error *e) {
    if (!vars || vars->type != JSON_OBJECT) {
        fail(e, "template variables must be a JSON object");
        return NULL;
    }
    jmp_buf unwind;
    Render r = {.c = {.unwind = &unwind, .e = e, .line = 1, .limit = TEMPLATE_MAX_MEMORY}, .t = t};
    Render *volatile rp = &r;
    if (setjmp(unwind)) {
        arena_free(rp->c.chunks);
        return NULL;
    }
    r.out.c = &r.c;
    if (now) r.now = *now;
    else {
        struct timeval tv;
        gettimeofday(&tv, NULL);
        time_t secs = tv.tv_sec;
        localtime_r(&secs, &r.now);
        r.microseconds = (long)tv.tv_usec;
    }
    /* The variables the template names (the others cannot be reached), under
     * the template's own frame. */
    Scope *context = new_scope(&r, NULL);
    for (size_t i = 0; i < vars->len; i++) {
        const JsonMember *m = &vars->members[i];
        int id = find_name(t, (Str){m->key, m->key_len});
        if (id >= 0) scope_set(&r, context, id, from_json(&r, &m->value));
    }
    Scope *root = new_scope(&r, context);
    declare_locals(&r, root, t->locals, t->n_locals);
    exec_body(&r, t->body, root);
    char *text = xmalloc(r.out.n + 1);
    if (r.out.n) memcpy(text, r.out.p, r.out.n);
    text[r.out.n] = '\0';
    *out_len = r.out.n;
    arena_free(r.c.chunks);
    return text;
}
