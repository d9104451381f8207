/* main.c - the command line: one cmd_* function per subcommand.
 *
 * Exit status: 0 on success, 1 on a runtime error (a bad file, a prompt too
 * long for the context), 2 on a usage error (an unknown flag, a bad value). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "kernels.h"
#include "net.h"
#include "safetensors.h"
#include "sampler.h"
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

/* ---- loading a model ---- */

/* The flags every command that runs the model shares. */
static const char *model_flags_help =
    "  -c N                 context length: positions the KV cache holds\n"
    "                       (default: min(max_position_embeddings, 4096))\n"
    "  -t N                 threads (default: one per CPU)\n"
    "  --dtype T            the weights as stored (bf16 or f16: the default),\n"
    "                       converted to f32, or quantized to q8 (int8, blocks of 32)\n";

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

/* Defined with the generation settings below. */
static void check_generation_config(const char *model, const Config *c);

/* Loads the model and the tokenizer of checkpoint MODEL, and checks its
 * generation_config.json, so that every command refuses a broken folder
 * (download.sh and make chat trust `run info` to check one). The tokenizer
 * is optional for the commands that only run token ids (info, fwd, bench):
 * without tokenizer.json they get NULL. With warm_up, the weights' pages are
 * read in on a background thread while the tokenizer loads. */
static Tokenizer *load_checkpoint(Model *m, const char *path, const ModelOptions *opt, bool warm_up, bool need_tokenizer) {
    Error e;
    if (model_load(m, path, opt, &e) != 0) die("%s", e.msg);
    if (warm_up) model_warm_up(m);
    check_generation_config(path, &m->config);
    char *tok_path = model_path(path, "tokenizer.json");
    if (!need_tokenizer && access(tok_path, F_OK) != 0) {
        free(tok_path);
        return NULL;
    }
    Tokenizer *t = tokenizer_load(tok_path, &e);
    if (!t) die("%s", e.msg);
    /* The tokenizer must not make ids that the model has no embedding for. */
    if (tokenizer_vocab_size(t) > m->config.vocab_size)
        die("%s: token ids go up to %d, past the model's vocab_size of %d", tok_path, tokenizer_vocab_size(t) - 1,
            m->config.vocab_size);
    free(tok_path);
    return t;
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
    Tokenizer *tokenizer = load_checkpoint(&m, path, &opt, false, false);
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
    if (tokenizer) printf("tokenizer: %d ids\n", tokenizer_vocab_size(tokenizer));
    else printf("tokenizer: none (no tokenizer.json)\n");

    printf("\ntensors (%zu in %d file%s):\n", m.st.n_tensors, m.st.n_files, m.st.n_files == 1 ? "" : "s");
    size_t params = 0, bytes = 0;
    for (size_t i = 0; i < m.st.n_tensors; i++) {
        const Tensor *t = &m.st.tensors[i];
        char shape[128];
        printf("  %-52s %-4s %-14s %12zu bytes\n", t->name, dtype_name(t->dtype), tensor_shape_text(t, shape, sizeof shape),
               t->nbytes);
        params += t->numel;
        bytes += t->nbytes;
    }
    printf("\nparameters: %zu (%.2f %s), %.1f MB on disk\n", params, params >= 1e9 ? params / 1e9 : params / 1e6,
           params >= 1e9 ? "B" : "M", bytes / 1e6);
    size_t weights = model_weight_bytes(&m), kv = model_kv_bytes(&m);
    printf("memory to run: weights %.1f MB (%s%s) + KV cache %.1f MB (context %d, f32) = %.1f MB\n", weights / 1e6,
           weight_type_name(m.dtype), m.dtype == WEIGHT_F32 || m.dtype == WEIGHT_Q8 ? ", converted at load" : ", mapped from the file",
           kv / 1e6, m.seq_len, (weights + kv) / 1e6);
    model_free(&m);
    tokenizer_free(tokenizer);
    return 0;
}

/* ---- fwd ---- */

/* Prints the 5 highest logits of one position, with each token's text (C
 * escapes for control characters) when there is a tokenizer. */
static void print_top5(const float *logits, int vocab, const Tokenizer *t) {
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
    for (int i = 0; i < n; i++) {
        printf("  %d. id %-7d logit %10.6f", i + 1, top[i], logits[top[i]]);
        size_t len;
        char *text = t ? tokenizer_decode(t, &top[i], 1, &len) : NULL;
        if (text) {
            printf("  \"");
            for (size_t k = 0; k < len; k++) {
                unsigned char ch = (unsigned char)text[k];
                if (ch == '\n') printf("\\n");
                else if (ch == '"' || ch == '\\') printf("\\%c", ch);
                else if (ch < 0x20 || ch == 0x7F) printf("\\x%02x", ch);
                else putchar(ch);
            }
            putchar('"');
        }
        free(text);
        putchar('\n');
    }
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
                   "  --tokens IDS         comma-separated token ids\n"
                   "  --logits FILE        write the logits of every position as raw little-endian\n"
                   "                       float32, n_tokens x vocab_size\n"
                   "  -v, -vv              trace each layer: first values and L2 norms of q, k, v\n"
                   "                       and of the residual stream (of the last token);\n"
                   "                       -vv shows more\n%s",
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
    Tokenizer *tokenizer = load_checkpoint(&m, path, &opt, true, false);
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
    print_top5(last, vocab, tokenizer);
    free(ids);
    model_free(&m);
    tokenizer_free(tokenizer);
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
                   "  -p N                 prompt tokens to prefill (default 128)\n"
                   "  -n N                 tokens to decode (default 64)\n"
                   "  -r N                 repeats (default 3)\n"
                   "  --depth D            tokens already in the KV cache before each test\n"
                   "                       (default 0), to measure speed at long context\n%s",
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
    Tokenizer *tokenizer = load_checkpoint(&m, path, &opt, true, false);
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
    tokenizer_free(tokenizer);
    return 0;
}

/* ---- tok and detok ---- */

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
    "usage: run tok MODEL [TEXT | -f FILE] [--pieces] [--plain] [--no-special]\n"
    "\n"
    "Prints the token ids of TEXT, of FILE, or of standard input when neither is\n"
    "given, separated by spaces on one line, as Hugging Face encodes it: with the\n"
    "special tokens the tokenizer adds (Llama 3's <|begin_of_text|> first; Qwen's\n"
    "add none). Only MODEL's tokenizer.json is read.\n"
    "\n"
    "  -f FILE       read the text from FILE\n"
    "  --pieces      print one line per token instead: the id, a tab, and the token\n"
    "                as tokenizer.json spells it (a space shows as \"\xC4\xA0\", a newline\n"
    "                as \"\xC4\x8A\")\n"
    "  --plain       read added tokens such as <|im_end|> in the text as plain text\n"
    "  --no-special  add no special tokens (add_special_tokens=False)\n"
    "  -h, --help    print this help\n";

static int cmd_tok(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL;
    bool pieces = false, plain = false, special = true, flags_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!flags_done && is_help(a)) {
            fputs(TOK_USAGE, stdout);
            return 0;
        }
        if (!flags_done && strcmp(a, "-f") == 0) file = flag_value(argc, argv, &i);
        else if (!flags_done && strcmp(a, "--pieces") == 0) pieces = true;
        else if (!flags_done && strcmp(a, "--plain") == 0) plain = true;
        else if (!flags_done && strcmp(a, "--no-special") == 0) special = false;
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
    EncodeMode mode = (plain ? ENCODE_PLAIN : ENCODE_ADDED_TOKENS) | (special ? ENCODE_ADD_SPECIAL : 0);
    size_t bad = tokenizer_encode(t, data, len, mode, &ids);
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
    size_t len;
    char *text = tokenizer_decode(t, ids, (size_t)n, &len);
    fwrite(text, 1, len, stdout);
    free(text);
    free(ids);
    tokenizer_free(t);
    free(path);
    return 0;
}

/* ---- generation settings ---- */

/* How to generate: the sampler's settings, the length limit and the ids
 * that end a reply. */
typedef struct {
    SamplerConfig sampling;
    int max_new;                /* tokens to generate at most; -1: until an eos id or the context is full */
    int eos_ids[MAX_EOS_IDS];
    int n_eos;
} Generation;

/* The generation flags as given; NAN / -2 for "not given". */
typedef struct {
    double temperature, top_p, min_p, repeat_penalty;
    long long top_k, seed, max_new;
} GenerationFlags;

static const GenerationFlags no_generation_flags = {NAN, NAN, NAN, NAN, -2, -2, -2};

static const char *generation_flags_help =
    "  -n N                 new tokens at most; -1: until an end token or a full\n"
    "                       context (default: %s)\n"
    "  --temp T             temperature; 0 = greedy\n"
    "                       (default: generation_config.json's; without one, greedy,\n"
    "                       as in transformers)\n"
    "  --top-k K            keep the K most likely tokens; 0 = off\n"
    "                       (default: generation_config.json's, else 50)\n"
    "  --top-p P            keep the most likely tokens up to probability P; 1 = off\n"
    "                       (default: generation_config.json's, else 1)\n"
    "  --min-p P            drop tokens less likely than P x the most likely; 0 = off\n"
    "                       (default: generation_config.json's, else 0)\n"
    "  --repeat-penalty R   divide the positive logits of tokens already in the\n"
    "                       context by R, multiply the negative ones; 1 = off\n"
    "                       (default: generation_config.json's, else 1)\n"
    "  --seed S             seed of the sampler's random numbers (default: from the\n"
    "                       clock, printed with the statistics to repeat a run)\n";

static double parse_double(const char *flag, const char *value) {
    char *end;
    double v = strtod(value, &end);
    if (*value == '\0' || *end != '\0' || !isfinite(v)) die_usage("%s: expected a number, got '%s'", flag, value);
    return v;
}

/* Consumes argv[*i] (and its value) if it is a generation flag. */
static int parse_generation_flag(int argc, char **argv, int *i, GenerationFlags *f) {
    const char *a = argv[*i];
    if (strcmp(a, "--temp") == 0) f->temperature = parse_double(a, flag_value(argc, argv, i));
    else if (strcmp(a, "--top-p") == 0) f->top_p = parse_double(a, flag_value(argc, argv, i));
    else if (strcmp(a, "--min-p") == 0) f->min_p = parse_double(a, flag_value(argc, argv, i));
    else if (strcmp(a, "--repeat-penalty") == 0) f->repeat_penalty = parse_double(a, flag_value(argc, argv, i));
    else if (strcmp(a, "--top-k") == 0) f->top_k = parse_long(a, flag_value(argc, argv, i), 0, 1 << 30);
    else if (strcmp(a, "--seed") == 0) {
        const char *v = flag_value(argc, argv, i);
        char *end;
        unsigned long long seed = strtoull(v, &end, 10);
        if (*v == '\0' || *v == '-' || *end != '\0' || seed > (unsigned long long)INT64_MAX)
            die_usage("--seed: expected a non-negative integer, got '%s'", v);
        f->seed = (long long)seed;
    } else if (strcmp(a, "-n") == 0) f->max_new = parse_long(a, flag_value(argc, argv, i), -1, 1 << 30);
    else return 0;
    return 1;
}

/* Checks the values given on the command line before any file is read, so
 * that a bad value is a usage error whatever the checkpoint holds. */
static void check_generation_flags(const GenerationFlags *f) {
    SamplerConfig c = {isnan(f->temperature) ? 1.0 : f->temperature, f->top_k < 0 ? 0 : (int)f->top_k,
                       isnan(f->top_p) ? 1.0 : f->top_p, isnan(f->min_p) ? 0.0 : f->min_p,
                       isnan(f->repeat_penalty) ? 1.0 : f->repeat_penalty, 0};
    Error e;
    if (sampler_check_config(&c, &e) != 0) die_usage("%s", e.msg);
}

/* A number from generation_config.json, or `fallback` when it is absent. */
static double generation_number(const char *path, const JsonValue *root, const char *key, double fallback) {
    const JsonValue *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) return fallback;
    if (v->type != JSON_NUMBER) die("%s: \"%s\" must be a number, not %s", path, key, json_type_name(v->type));
    return v->number.value;
}

/* The defaults, as transformers' generate takes them: from the checkpoint's
 * generation_config.json when there is one (Qwen2.5-Instruct's samples with
 * temperature 0.7, top-p 0.8, top-k 20, repetition penalty 1.05 and stops at
 * ids 151645 and 151643), else greedy with config.json's eos ids. */
static Generation generation_defaults(const char *model, const Config *c, int default_max_new) {
    Generation g = {{0.0, 50, 1.0, 0.0, 1.0, 0}, default_max_new, {0}, c->n_eos};
    memcpy(g.eos_ids, c->eos_ids, sizeof g.eos_ids);
    char *path = model_path(model, "generation_config.json");
    Error e;
    if (access(path, F_OK) != 0) {
        free(path);
        return g;
    }
    JsonDoc doc;
    if (json_parse_file(&doc, path, &e) != 0) die("%s", e.msg);
    const JsonValue *root = &doc.root;
    if (root->type != JSON_OBJECT) die("%s: not a JSON object", path);
    const JsonValue *sample = json_get(root, "do_sample");
    if (sample && sample->type == JSON_BOOL && sample->boolean) g.sampling.temperature = generation_number(path, root, "temperature", 1.0);
    g.sampling.top_k = (int)fmin(fmax(generation_number(path, root, "top_k", 50), 0), 1 << 30);
    g.sampling.top_p = generation_number(path, root, "top_p", 1.0);
    g.sampling.min_p = generation_number(path, root, "min_p", 0.0);
    g.sampling.repeat_penalty = generation_number(path, root, "repetition_penalty", 1.0);
    double max_new = generation_number(path, root, "max_new_tokens", -2);
    if (max_new >= 1 && max_new <= 1 << 30) g.max_new = (int)max_new;
    if (read_eos_ids(path, root, g.eos_ids, &g.n_eos, &e) != 0) die("%s", e.msg);
    /* A bad value here is the file's fault, not the command line's. */
    if (sampler_check_config(&g.sampling, &e) != 0) die("%s: %s", path, e.msg);
    json_free(&doc);
    free(path);
    return g;
}

/* generation_config.json is read by gen and chat only, but every command
 * checks it, so that a folder run accepts is whole. */
static void check_generation_config(const char *model, const Config *c) { generation_defaults(model, c, -1); }

/* The defaults with the flags given on top, checked. */
static Generation generation_settings(const char *model, const Config *c, const GenerationFlags *f, int default_max_new) {
    Generation g = generation_defaults(model, c, default_max_new);
    if (!isnan(f->temperature)) g.sampling.temperature = f->temperature;
    if (!isnan(f->top_p)) g.sampling.top_p = f->top_p;
    if (!isnan(f->min_p)) g.sampling.min_p = f->min_p;
    if (!isnan(f->repeat_penalty)) g.sampling.repeat_penalty = f->repeat_penalty;
    if (f->top_k != -2) g.sampling.top_k = (int)f->top_k;
    if (f->max_new != -2) g.max_new = (int)f->max_new;
    g.sampling.seed = f->seed != -2 ? (uint64_t)f->seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    Error e;
    if (sampler_check_config(&g.sampling, &e) != 0) die("%s: %s", model, e.msg);
    return g;
}

/* ---- a conversation with the model ---- */

/* Everything generation needs: the model with its KV cache, the tokenizer,
 * the sampler, and the ids in the cache (the context the repetition penalty
 * looks at). */
typedef struct {
    Model model;
    Tokenizer *tokenizer;
    Sampler *sampler;
    Generation gen;
    TokenIds context;           /* the ids at positions 0..context.n-1 of the cache */
    double prefill_seconds, decode_seconds;
    int prefill_tokens, decode_tokens;
} Session;

static void session_open(Session *s, const char *model, const ModelOptions *opt, const GenerationFlags *flags,
                         int default_max_new) {
    memset(s, 0, sizeof *s);
    s->tokenizer = load_checkpoint(&s->model, model, opt, true, true);
    s->gen = generation_settings(model, &s->model.config, flags, default_max_new);
    Error e;
    s->sampler = sampler_new(&s->gen.sampling, s->model.config.vocab_size, &e);
    if (!s->sampler) die("%s", e.msg);
}

static void session_close(Session *s) {
    sampler_free(s->sampler);
    token_ids_free(&s->context);
    model_free(&s->model);
    tokenizer_free(s->tokenizer);
}

/* Encodes text and appends its ids to ids; warns about invalid UTF-8. */
static void encode(Session *s, const char *text, size_t len, EncodeMode mode, TokenIds *ids) {
    size_t bad = tokenizer_encode(s->tokenizer, text, len, mode, ids);
    if (bad) warn("%zu invalid UTF-8 sequence%s in the input replaced by U+FFFD", bad, bad == 1 ? "" : "s");
}

/* Runs ids through the model after the context; returns the last logits. */
static float *feed(Session *s, const TokenIds *ids) {
    for (size_t i = 0; i < ids->n; i++) check_token(&s->model, ids->ids[i]);
    double t0 = now_seconds();
    float *logits = forward_prompt(&s->model, ids->ids, (int)ids->n, (int)s->context.n);
    s->prefill_seconds += now_seconds() - t0;
    s->prefill_tokens += (int)ids->n;
    for (size_t i = 0; i < ids->n; i++) token_ids_push(&s->context, ids->ids[i]);
    return logits;
}

static bool is_eos(const Generation *g, int id) {
    for (int i = 0; i < g->n_eos; i++)
        if (g->eos_ids[i] == id) return true;
    return false;
}

typedef enum { STOP_EOS, STOP_LIMIT, STOP_CONTEXT_FULL } StopReason;

/* The sampler needs logits with no NaN and at least one finite: weights
 * holding NaN or infinities (a broken file) give neither. */
static void check_logits(const float *logits, int n) {
    bool finite = false;
    for (int i = 0; i < n; i++) {
        if (isnan(logits[i])) die("the model computed a NaN logit: its weights hold NaN or infinite values");
        finite = finite || isfinite(logits[i]);
    }
    if (!finite) die("the model computed no finite logit: its weights hold infinite values");
}

/* Samples tokens after `logits`, printing their text as it completes, until
 * an eos id (not printed), max_new tokens, or a full context. Each token but
 * an eos joins the context; with feed_last, the last one is also run
 * through the model so that the cache holds it (chat goes on from there). */
static StopReason generate(Session *s, float *logits, bool feed_last) {
    DecodeStream stream;
    decode_stream_init(&stream, s->tokenizer);
    StopReason stop = STOP_LIMIT;
    double t0 = now_seconds();
    for (int n = 0; s->gen.max_new < 0 || n < s->gen.max_new; n++) {
        check_logits(logits, s->model.config.vocab_size);
        int id = sampler_sample(s->sampler, logits, s->context.ids, s->context.n);
        if (is_eos(&s->gen, id)) {
            stop = STOP_EOS;
            break;
        }
        size_t len;
        const char *text = decode_stream_push(&stream, id, &len);
        fwrite(text, 1, len, stdout);
        fflush(stdout);
        s->decode_tokens++;
        int pos = (int)s->context.n;
        token_ids_push(&s->context, id);
        bool last = s->gen.max_new >= 0 && n + 1 == s->gen.max_new;
        if (pos == s->model.seq_len) {
            stop = STOP_CONTEXT_FULL;
            break;
        }
        if (!last || feed_last) logits = forward(&s->model, &id, 1, pos, false);
    }
    size_t len;
    const char *rest = decode_stream_flush(&stream, &len);
    fwrite(rest, 1, len, stdout);
    decode_stream_free(&stream);
    s->decode_seconds += now_seconds() - t0;
    return stop;
}

static void print_stats(const Session *s) {
    fprintf(stderr, "prompt: %d tokens, %.1f tok/s; generated: %d tokens, %.1f tok/s; seed %llu\n", s->prefill_tokens,
            s->prefill_tokens / fmax(s->prefill_seconds, 1e-9), s->decode_tokens,
            s->decode_tokens / fmax(s->decode_seconds, 1e-9), (unsigned long long)s->gen.sampling.seed);
}

/* ---- gen ---- */

static int cmd_gen(int argc, char **argv) {
    const char *path = NULL, *prompt = NULL;
    ModelOptions opt = {0};
    GenerationFlags flags = no_generation_flags;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            printf("usage: run gen MODEL [PROMPT] [flags]\n\n"
                   "Continues PROMPT (or standard input when PROMPT is not given) and streams\n"
                   "the new text to standard output, ending it with a newline. The prompt is\n"
                   "fed as one batch and not echoed; special tokens written in it (such as\n"
                   "<|im_start|>) are read as such. Statistics go to standard error.\n\n"
                   "flags:\n");
            printf(generation_flags_help, "256");
            printf("%s", model_flags_help);
            return 0;
        }
        if (parse_model_flag(argc, argv, &i, &opt) || parse_generation_flag(argc, argv, &i, &flags)) continue;
        if (a[0] == '-' && a[1] != '\0') die_usage("gen: unknown flag '%s'", a);
        if (!path) path = a;
        else if (!prompt) prompt = a;
        else die_usage("gen: unexpected argument '%s'", a);
    }
    if (!path) die_usage("gen: MODEL is missing");
    check_generation_flags(&flags);
    size_t len;
    char *text = prompt ? xstrdup(prompt) : read_standard_input(&len);
    if (prompt) len = strlen(prompt);

    Session s;
    session_open(&s, path, &opt, &flags, 256);
    TokenIds ids = {0};
    encode(&s, text, len, ENCODE_PROMPT, &ids);
    free(text);
    if (ids.n == 0) die("the prompt is empty");
    if (ids.n > (size_t)s.model.seq_len)
        die("the prompt is %zu tokens, longer than the context of %d (-c)", ids.n, s.model.seq_len);
    generate(&s, feed(&s, &ids), false);
    putchar('\n');
    fflush(stdout);
    print_stats(&s);
    token_ids_free(&ids);
    session_close(&s);
    return 0;
}

/* ---- chat ---- */

static const char *default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

/* Appends the ids of ChatML's "<|im_start|>ROLE\nTEXT<|im_end|>\n": the text
 * is plain text, so a typed "<|im_end|>" stays text and cannot end a turn. */
static void chatml_message(Session *s, int im_start, int im_end, const char *role, const char *text, TokenIds *ids) {
    token_ids_push(ids, im_start);
    size_t n = strlen(role) + 1 + strlen(text);
    char *body = xmalloc(n + 1);
    snprintf(body, n + 1, "%s\n%s", role, text);
    encode(s, body, n, ENCODE_PLAIN, ids);
    free(body);
    token_ids_push(ids, im_end);
    encode(s, "\n", 1, ENCODE_PLAIN, ids);
}

/* The ids that take the conversation to the model's next reply: the system
 * message first, or the end of the model's last reply, then the user's
 * message and the start of the assistant's. */
static void chat_turn_ids(Session *s, const char *system, const char *message, TokenIds *ids) {
    int im_start = tokenizer_find(s->tokenizer, "<|im_start|>", 12), im_end = tokenizer_find(s->tokenizer, "<|im_end|>", 10);
    if (im_start < 0 || im_end < 0) die("tokenizer.json has no <|im_start|> or <|im_end|> token: not a chat model");
    ids->n = 0;
    if (s->context.n == 0) {
        chatml_message(s, im_start, im_end, "system", system, ids);
    } else {
        token_ids_push(ids, im_end);
        encode(s, "\n", 1, ENCODE_PLAIN, ids);
    }
    chatml_message(s, im_start, im_end, "user", message, ids);
    token_ids_push(ids, im_start);
    encode(s, "assistant\n", 10, ENCODE_PLAIN, ids);
}

/* Reads a line without its newline; NULL at the end of input. */
static char *read_line(char **buf, size_t *cap) {
    ssize_t n = getline(buf, cap, stdin);
    if (n < 0) return NULL;
    while (n > 0 && ((*buf)[n - 1] == '\n' || (*buf)[n - 1] == '\r')) (*buf)[--n] = '\0';
    return *buf;
}

static int cmd_chat(int argc, char **argv) {
    const char *path = NULL, *system = default_system;
    ModelOptions opt = {0};
    GenerationFlags flags = no_generation_flags;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            printf("usage: run chat MODEL [flags]\n\n"
                   "Chats with an instruction-tuned model in Qwen2.5's ChatML format. Type a\n"
                   "message and Enter; /reset starts a new conversation; /exit or the end of\n"
                   "input (Ctrl-D) ends. The KV cache is kept across turns, so each turn runs\n"
                   "only its new tokens; a full context starts a new conversation.\n"
                   "When standard input is not a terminal, only the replies are printed, each\n"
                   "followed by a newline. NO_COLOR turns colours off.\n\n"
                   "flags:\n"
                   "  --system TEXT        the system message (default: \"You are Qwen, created by\n"
                   "                       Alibaba Cloud. You are a helpful assistant.\")\n");
            printf(generation_flags_help, "-1");
            printf("%s", model_flags_help);
            return 0;
        }
        if (parse_model_flag(argc, argv, &i, &opt) || parse_generation_flag(argc, argv, &i, &flags)) continue;
        if (strcmp(a, "--system") == 0) system = flag_value(argc, argv, &i);
        else if (a[0] == '-' || path) die_usage("chat: unexpected argument '%s'", a);
        else path = a;
    }
    if (!path) die_usage("chat: MODEL is missing");
    check_generation_flags(&flags);

    Session s;
    session_open(&s, path, &opt, &flags, -1);
    bool interactive = isatty(STDIN_FILENO), colour = interactive && isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
    const char *you = colour ? "\033[1;32m> \033[0m" : "> ", *reply_on = colour ? "\033[36m" : "", *reply_off = colour ? "\033[0m" : "";
    if (interactive)
        fprintf(stderr, "chatting with %s (context %d tokens). /reset starts over, /exit or Ctrl-D ends.\n", path,
                s.model.seq_len);
    TokenIds ids = {0};
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        if (interactive) {
            fputs(you, stdout);
            fflush(stdout);
        }
        if (!read_line(&line, &cap) || strcmp(line, "/exit") == 0) break;
        if (strcmp(line, "/reset") == 0) {
            s.context.n = 0;
            if (interactive) fprintf(stderr, "(new conversation)\n");
            continue;
        }
        if (line[0] == '\0') continue;
        chat_turn_ids(&s, system, line, &ids);
        if (s.context.n + ids.n > (size_t)s.model.seq_len) {  /* no room: start over with this message */
            fprintf(stderr, "(the context of %d tokens is full: starting a new conversation)\n", s.model.seq_len);
            s.context.n = 0;
            chat_turn_ids(&s, system, line, &ids);
            if (ids.n > (size_t)s.model.seq_len) {
                fprintf(stderr, "(that message is too long for the context of %d tokens)\n", s.model.seq_len);
                continue;
            }
        }
        fputs(reply_on, stdout);
        StopReason stop = generate(&s, feed(&s, &ids), true);
        printf("%s\n", reply_off);
        fflush(stdout);
        if (stop == STOP_CONTEXT_FULL) {
            fprintf(stderr, "(the context of %d tokens is full: starting a new conversation)\n", s.model.seq_len);
            s.context.n = 0;
        }
    }
    if (interactive) {
        putchar('\n');
        print_stats(&s);
    }
    free(line);
    token_ids_free(&ids);
    session_close(&s);
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
    {"tok", cmd_tok, "print the token ids of a text"},
    {"detok", cmd_detok, "print the text of token ids"},
    {"fwd", cmd_fwd, "run the forward pass on token ids; print the top next tokens"},
    {"gen", cmd_gen, "continue a prompt: stream generated text"},
    {"chat", cmd_chat, "chat with an instruction-tuned model (ChatML)"},
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
