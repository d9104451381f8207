/* main.c - the command line: one cmd_* function per subcommand.
 *
 * Exit status: 0 on success, 1 on a runtime error (a bad file, a prompt too
 * long for the context), 2 on a usage error (an unknown flag, a bad value). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "net.h"
#include "safetensors.h"
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

/* ---- loading a model ---- */

/* The flags every command that runs the model shares. */
static const char *model_flags_help =
    "  -c N            context length: positions the KV cache holds\n"
    "                  (default: min(max_position_embeddings, 4096))\n"
    "  -t N            threads (default: one per CPU)\n"
    "  --dtype T       weights as bf16/f16 (as stored), f32 or q8 (int8, blocks of 32)\n"
    "                  (default: as stored in the checkpoint)\n";

/* Consumes argv[*i] (and its value) if it is one of the model flags. */
static int parse_model_flag(int argc, char **argv, int *i, ModelOptions *opt) {
    const char *a = argv[*i];
    if (strcmp(a, "-c") == 0) opt->context = (int)parse_long(a, flag_value(argc, argv, i), 1, 1 << 24);
    else if (strcmp(a, "-t") == 0) opt->threads = (int)parse_long(a, flag_value(argc, argv, i), 1, 1024);
    else if (strcmp(a, "--dtype") == 0) {
        opt->dtype = flag_value(argc, argv, i);
        if (strcmp(opt->dtype, "bf16") && strcmp(opt->dtype, "f16") && strcmp(opt->dtype, "f32") && strcmp(opt->dtype, "q8"))
            die_usage("--dtype: expected bf16, f16, f32 or q8, got '%s'", opt->dtype);
    } else return 0;
    return 1;
}

static void load_model(Model *m, const char *path, const ModelOptions *opt) {
    Error e;
    if (model_load(m, path, opt, &e) != 0) die("%s", e.msg);
}

static void check_token(const Model *m, long id) {
    if (id < 0 || id >= m->config.vocab_size)
        die("token id %ld is outside the vocabulary [0, %d)", id, m->config.vocab_size);
}

/* ---- info ---- */

static int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    ModelOptions opt = {0};
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) {
            printf("usage: run info MODEL [flags]\n\n"
                   "Prints the model's configuration, every tensor (name, dtype, shape, bytes),\n"
                   "the parameter count and the memory a run needs.\n\nflags:\n%s", model_flags_help);
            return 0;
        }
        if (parse_model_flag(argc, argv, &i, &opt)) continue;
        if (argv[i][0] == '-' || path) die_usage("info: unexpected argument '%s'", argv[i]);
        path = argv[i];
    }
    if (!path) die_usage("info: MODEL is missing");
    Model m;
    load_model(&m, path, &opt);
    const Config *c = &m.config;
    printf("model: %s\n", path);
    printf("architecture: Qwen2, %d layers, hidden %d, MLP %d, %d query heads, %d key/value heads, head_dim %d\n",
           c->n_layers, c->dim, c->hidden_dim, c->n_heads, c->n_kv_heads, c->head_dim);
    printf("vocab %d, max positions %d, rope_theta %g, rms_norm_eps %g, tied embeddings: %s\n", c->vocab_size,
           c->max_pos, c->rope_theta, c->norm_eps, c->tied_embeddings ? "yes" : "no");
    printf("bos id: ");
    if (c->bos_id >= 0) printf("%d", c->bos_id);
    else printf("none");
    printf(", eos ids:");
    for (int i = 0; i < c->n_eos; i++) printf(" %d", c->eos_ids[i]);
    printf("%s\n", c->n_eos ? "" : " none");

    printf("\ntensors (%zu in %d file%s):\n", m.st.n_tensors, m.st.n_files, m.st.n_files == 1 ? "" : "s");
    size_t params = 0, bytes = 0;
    for (size_t i = 0; i < m.st.n_tensors; i++) {
        const Tensor *t = &m.st.tensors[i];
        char shape[128] = "[";
        size_t at = 1;
        for (int d = 0; d < t->ndim; d++) at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        snprintf(shape + at, sizeof shape - at, "]");
        printf("  %-52s %-4s %-14s %12zu bytes\n", t->name, dtype_name(t->dtype), shape, t->nbytes);
        params += t->numel;
        bytes += t->nbytes;
    }
    printf("\nparameters: %zu (%.2f B), %.1f MB on disk\n", params, params / 1e9, bytes / 1e6);
    size_t weights = model_weight_bytes(&m), kv = model_kv_bytes(&m);
    printf("memory to run: weights %.1f MB (%s%s) + KV cache %.1f MB (context %d, f32) = %.1f MB\n", weights / 1e6,
           weight_type_name(m.dtype), m.dtype == WEIGHT_F32 || m.dtype == WEIGHT_Q8 ? ", converted at load" : ", mapped from the file",
           kv / 1e6, m.seq_len, (weights + kv) / 1e6);
    model_free(&m);
    return 0;
}

/* ---- fwd ---- */

/* Prints the 5 highest logits of one position. */
static void print_top5(const float *logits, int vocab) {
    int top[5];
    int n = 0;
    for (int id = 0; id < vocab; id++) {
        int at = n < 5 ? n++ : 5;
        while (at > 0 && logits[id] > logits[top[at - 1]]) {
            if (at < 5) top[at] = top[at - 1];
            at--;
        }
        if (at < 5) top[at] = id;
    }
    for (int i = 0; i < n; i++) printf("  %d. id %-7d logit %.6f\n", i + 1, top[i], logits[top[i]]);
}

/* "9707,11,1879" -> ids; a usage error for anything else. */
static int *parse_ids(const char *text, int *n) {
    int cap = 16, count = 0;
    int *ids = xmalloc((size_t)cap * sizeof *ids);
    const char *p = text;
    for (;;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 1 << 30) die_usage("--tokens: expected comma-separated token ids, got '%s'", text);
        if (count == cap) ids = xrealloc(ids, (size_t)(cap *= 2), sizeof *ids);
        ids[count++] = (int)v;
        if (*end == '\0') break;
        if (*end != ',') die_usage("--tokens: expected comma-separated token ids, got '%s'", text);
        p = end + 1;
    }
    *n = count;
    return ids;
}

static void write_floats(FILE *f, const char *path, const float *v, size_t n) {
    if (fwrite(v, sizeof(float), n, f) != n) die("%s: write failed", path);
}

static int cmd_fwd(int argc, char **argv) {
    const char *path = NULL, *tokens_arg = NULL, *logits_path = NULL, *positional[2] = {NULL, NULL};
    int n_positional = 0, verbose = 0;
    ModelOptions opt = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            printf("usage: run fwd MODEL TOKEN POS [flags]\n"
                   "       run fwd MODEL --tokens ID,ID,... [--logits FILE] [flags]\n\n"
                   "Runs the forward pass and prints the 5 most likely next tokens.\n"
                   "The first form feeds one token at position POS (earlier positions of the\n"
                   "KV cache are empty); the second feeds the tokens at positions 0..n-1.\n\n"
                   "flags:\n"
                   "  --tokens IDS    comma-separated token ids\n"
                   "  --logits FILE   write the logits of every position as raw little-endian\n"
                   "                  float32, n_tokens x vocab_size\n"
                   "  -v, -vv         trace each layer: first values and L2 norms of q, k, v and\n"
                   "                  of the residual stream (of the last token); -vv shows more\n%s",
                   model_flags_help);
            return 0;
        }
        if (parse_model_flag(argc, argv, &i, &opt)) continue;
        if (strcmp(a, "--tokens") == 0) tokens_arg = flag_value(argc, argv, &i);
        else if (strcmp(a, "--logits") == 0) logits_path = flag_value(argc, argv, &i);
        else if (strcmp(a, "-v") == 0) verbose = 1;
        else if (strcmp(a, "-vv") == 0) verbose = 2;
        else if (a[0] == '-' && a[1] != '\0') die_usage("fwd: unknown flag '%s'", a);
        else if (!path) path = a;
        else if (n_positional < 2) positional[n_positional++] = a;
        else die_usage("fwd: unexpected argument '%s'", a);
    }
    if (!path) die_usage("fwd: MODEL is missing");
    if (!tokens_arg && n_positional != 2) die_usage("fwd: give TOKEN POS, or --tokens");
    if (tokens_arg && n_positional) die_usage("fwd: give TOKEN POS or --tokens, not both");

    int n, pos = 0, *ids;
    if (tokens_arg) {
        ids = parse_ids(tokens_arg, &n);
    } else {
        ids = xmalloc(sizeof *ids);
        ids[0] = (int)parse_long("TOKEN", positional[0], 0, 1 << 30);
        pos = (int)parse_long("POS", positional[1], 0, 1 << 30);
        n = 1;
    }
    Model m;
    load_model(&m, path, &opt);
    for (int i = 0; i < n; i++) check_token(&m, ids[i]);
    if ((long)pos + n > m.seq_len) die("%d tokens at position %d do not fit the context of %d (-c)", n, pos, m.seq_len);
    m.trace = verbose ? stdout : NULL;
    m.trace_level = verbose;
    FILE *out = NULL;
    if (logits_path && !(out = fopen(logits_path, "wb"))) die("%s: cannot create", logits_path);

    /* Blocks of tokens, keeping every position's logits when they are written out. */
    const float *last = NULL;
    int vocab = m.config.vocab_size;
    for (int done = 0; done < n; done += m.state.max_tokens) {
        int block = n - done < m.state.max_tokens ? n - done : m.state.max_tokens;
        const float *logits = forward(&m, ids + done, block, pos + done, out != NULL);
        if (out) write_floats(out, logits_path, logits, (size_t)block * vocab);
        last = out ? logits + (size_t)(block - 1) * vocab : logits;
    }
    if (out && fclose(out) != 0) die("%s: write failed", logits_path);
    printf("next token after id %d at position %d:\n", ids[n - 1], pos + n - 1);
    print_top5(last, vocab);
    free(ids);
    model_free(&m);
    return 0;
}

/* ---- bench ---- */

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int argmax(const float *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

static int cmd_bench(int argc, char **argv) {
    const char *path = NULL;
    int n_prompt = 128, n_gen = 64, repeats = 3, depth = 0;
    ModelOptions opt = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            printf("usage: run bench MODEL [flags]\n\n"
                   "Times prefill of a prompt (one batch) and decoding (one token at a time),\n"
                   "and prints the median speed of the repeats as its last two lines:\n"
                   "  ppP: X tok/s   and   tgN: Y tok/s\n\n"
                   "flags:\n"
                   "  -p N            prompt tokens to prefill (default 128)\n"
                   "  -n N            tokens to decode (default 64)\n"
                   "  -r N            repeats (default 3)\n"
                   "  --depth D       tokens already in the KV cache before each test (default 0),\n"
                   "                  to measure speed at long context\n%s",
                   model_flags_help);
            return 0;
        }
        if (parse_model_flag(argc, argv, &i, &opt)) continue;
        if (strcmp(a, "-p") == 0) n_prompt = (int)parse_long(a, flag_value(argc, argv, &i), 1, 1 << 20);
        else if (strcmp(a, "-n") == 0) n_gen = (int)parse_long(a, flag_value(argc, argv, &i), 1, 1 << 20);
        else if (strcmp(a, "-r") == 0) repeats = (int)parse_long(a, flag_value(argc, argv, &i), 1, 1000);
        else if (strcmp(a, "--depth") == 0) depth = (int)parse_long(a, flag_value(argc, argv, &i), 0, 1 << 24);
        else if (a[0] == '-' || path) die_usage("bench: unexpected argument '%s'", a);
        else path = a;
    }
    if (!path) die_usage("bench: MODEL is missing");
    if (!opt.context) opt.context = depth + (n_prompt > n_gen ? n_prompt : n_gen);
    Model m;
    load_model(&m, path, &opt);
    int vocab = m.config.vocab_size, longest = n_prompt > depth ? n_prompt : depth;
    if ((long)depth + n_prompt > m.seq_len || (long)depth + n_gen > m.seq_len)
        die("depth %d + %d tokens do not fit the context of %d (-c)", depth, n_prompt > n_gen ? n_prompt : n_gen, m.seq_len);

    /* A fixed, arbitrary prompt of valid ids. */
    int *tokens = xmalloc((size_t)longest * sizeof *tokens);
    for (int i = 0; i < longest; i++) tokens[i] = (int)((i * 7919L + 13) % vocab);
    printf("model %s: %s weights, %.1f MB, %d threads\n", path, weight_type_name(m.dtype), model_weight_bytes(&m) / 1e6,
           pool_size(m.pool));

    /* A first token maps the weights in; then the cache is filled to the depth. */
    forward(&m, tokens, 1, 0, false);
    if (depth > 0) {
        double t0 = now_seconds();
        forward_prompt(&m, tokens, depth, 0);
        printf("filled the KV cache to depth %d in %.2f s\n", depth, now_seconds() - t0);
    }
    double *pp = xmalloc((size_t)repeats * sizeof *pp), *tg = xmalloc((size_t)repeats * sizeof *tg);
    for (int r = 0; r < repeats; r++) {
        double t0 = now_seconds();
        forward_prompt(&m, tokens, n_prompt, depth);
        pp[r] = n_prompt / (now_seconds() - t0);

        int token = tokens[0];
        t0 = now_seconds();
        for (int i = 0; i < n_gen; i++) token = argmax(forward(&m, &token, 1, depth + i, false), vocab);
        tg[r] = n_gen / (now_seconds() - t0);
        printf("repeat %d: prefill %.1f tok/s, decode %.1f tok/s\n", r + 1, pp[r], tg[r]);
    }
    printf("pp%d: %.1f tok/s\n", n_prompt, median(pp, repeats));
    printf("tg%d: %.1f tok/s\n", n_gen, median(tg, repeats));
    free(pp);
    free(tg);
    free(tokens);
    model_free(&m);
    return 0;
}

/* ---- subcommands ---- */

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);  /* argv[0] is the subcommand's name */
    const char *summary;
} Command;

static const Command commands[] = {
    {"info", cmd_info, "print a checkpoint's configuration, tensors and memory needs"},
    {"fwd", cmd_fwd, "run the forward pass on token ids; print the top next tokens"},
    {"bench", cmd_bench, "time prefill and decoding (tokens per second)"},
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
