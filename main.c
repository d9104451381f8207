/* main.c - the command line: arguments, help and printing, one cmd_*
 * function per subcommand. The model is the first operand or -m/--model's
 * value, for every command (args.c reads them); the flags follow
 * llama.cpp's names. The work is done by the modules: checkpoint.c loads,
 * session.c runs gen and chat (the reply loop, chat's turns), console.c is
 * the terminal, bench.c and perplexity.c time and score; no loop over
 * tokens is here.
 *
 * Exit status, everywhere: 0 on success, 1 on a runtime error (a bad file, a
 * prompt too long for the context), 2 on a usage error (an unknown flag, a
 * bad value), 130 when gen is interrupted with Ctrl-C. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "bench.h"
#include "chat.h"
#include "checkpoint.h"
#include "config.h"
#include "console.h"
#include "embed.h"
#include "engine.h"
#include "generate.h"
#include "kernels.h"
#include "net.h"
#include "perplexity.h"
#include "report.h"
#include "safetensors.h"
#include "sampler.h"
#include "schema.h"
#include "server.h"
#include "session.h"
#include "threads.h"
#include "tokenizer.h"
#include "trace.h"
#include "util.h"

#define RUN_VERSION "0.3.0"

/* ---- the model flags ---- */

static const char *model_flags_help =
    "  -m, --model MODEL    the checkpoint, instead of the first argument\n"
    "  -c, --ctx-size N     context length: positions the KV cache holds\n"
    "                       (default: min(max_position_embeddings, 4096))\n"
    "  -t, --threads N      threads (default: one per CPU this process may use)\n"
    "  --dtype T            the big matrices as stored (bf16 or f16: the default),\n"
    "                       converted to f32, or quantized to q8 (int8, blocks of\n"
    "                       32) or q4 (4 bits, blocks of 32; embedding and output\n"
    "                       head q8)\n"
    "  --math M             exact (default): fp32 activations; bf16: bf16 weights\n"
    "                       times activations rounded to bf16, faster on CPUs with\n"
    "                       AVX-512 BF16, less exact\n"
    "  --no-prepared        lay the weights out in memory at every start instead of\n"
    "                       mapping the prepared file (made once per format beside\n"
    "                       the checkpoint, or in ~/.cache/run; see 'run prepare'),\n"
    "                       and build the tokenizer's tables from tokenizer.json\n"
    "                       instead of mapping tokenizer.run (made the same way)\n"
    "  -ctk, --cache-type-k T  the KV cache's keys: f32 (default, exact), bf16, or\n"
    "                       q8_0 (int8, an f16 scale per block of 32: about a\n"
    "                       quarter of f32's memory)\n"
    "  -ctv, --cache-type-v T  the KV cache's values: the same types\n";

static DTypeChoice parse_dtype(const Args *a, const char *value) {
    static const struct {
        const char *name;
        DTypeChoice dtype;
    } names[] = {{"bf16", DTYPE_AS_BF16}, {"f16", DTYPE_AS_F16}, {"f32", DTYPE_AS_F32}, {"q8", DTYPE_AS_Q8},
                 {"q4", DTYPE_AS_Q4}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(value, names[i].name) == 0) return names[i].dtype;
    usage_error(a, "--dtype: expected bf16, f16, f32, q8 or q4, got '%s'", value);
}

static MathMode parse_math(const Args *a, const char *value) {
    if (strcmp(value, "exact") == 0) return MATH_EXACT;
    if (strcmp(value, "bf16") == 0) return MATH_BF16;
    usage_error(a, "--math: expected exact or bf16, got '%s'", value);
}

static KVType parse_cache_type(const Args *a, const char *flag, const char *value) {
    KVType t;
    Error e;
    if (kv_type_parse(&t, value, &e) != 0) usage_error(a, "%s: %s", flag, e.msg);
    return t;
}

/* Consumes the current argument (and its value) if it is a model flag. */
static bool model_flag(Args *a, ModelOptions *opt) {
    if (is_flag(a, "-c|--ctx-size")) opt->context = (int)parse_long(a, "-c", flag_value(a), 1, 1 << 24);
    else if (is_flag(a, "-t|--threads")) opt->threads = (int)parse_long(a, "-t", flag_value(a), 1, 1024);
    else if (is_flag(a, "--dtype")) opt->dtype = parse_dtype(a, flag_value(a));
    else if (is_flag(a, "--math")) opt->math = parse_math(a, flag_value(a));
    else if (is_flag(a, "--no-prepared")) no_value(a), opt->no_prepared = true;
    else if (is_flag(a, "-ctk|--cache-type-k")) opt->cache_type_k = parse_cache_type(a, "--cache-type-k", flag_value(a));
    else if (is_flag(a, "-ctv|--cache-type-v")) opt->cache_type_v = parse_cache_type(a, "--cache-type-v", flag_value(a));
    else return false;
    return true;
}

/* ---- info ---- */

/* Sliding layers (their window, and what their ring of keys costs) and
 * Gemma's scalings. */
static void print_sliding(const Config *c, int context) {
    int sliding = 0;
    for (int l = 0; l < c->n_layers; l++) sliding += layer_is_sliding(c, l);
    if (sliding > 0) {
        printf("sliding layers: %d of %d, window %s", sliding, c->n_layers, c->sliding_window ? "" : "unlimited");
        if (c->sliding_window) printf("%d positions; their KV cache is a ring of %d positions each", c->sliding_window,
                                      kv_cache_ring(c, context));
        if (c->rope_local_theta > 0) printf("; their RoPE base %g, unscaled", c->rope_local_theta);
        printf("\n");
    }
    if (c->arch == ARCH_GEMMA3)
        printf("embedding scale %g, attention scale %g, soft caps: attention %g, logits %g (0: none)\n", c->embed_scale,
               c->attn_scale, c->attn_softcap, c->final_softcap);
    if (c->multimodal) printf("image-text checkpoint: the language model runs; the vision tower is not used\n");
}

/* A mixture of experts: how many, how many a token takes, which layers. */
static void print_experts(const Config *c) {
    if (c->moe.n_experts == 0) return;
    int sparse = 0;
    for (int l = 0; l < c->n_layers; l++) sparse += layer_is_sparse(c, l);
    printf("experts: %d per sparse layer (%d of %d layers), %d chosen per token, width %d, weights %s\n", c->moe.n_experts,
           sparse, c->n_layers, c->moe.n_used, c->moe.hidden_dim, c->moe.norm_topk_prob ? "renormalised" : "as the softmax gives them");
}

/* The weights in each format, with every expert, and what a decoded token
 * reads of them (the bound on decoding speed: those bytes / bandwidth). */
static void print_formats(const Config *c, WeightType run_as, WeightType stored) {
    WeightType formats[] = {stored, WEIGHT_F32, WEIGHT_Q8, WEIGHT_Q4};
    WeightPlan plan;
    weight_plan(&plan, c, stored, run_as);
    printf("parameters per token: %.0f active of %.0f in the matrices (%.2f %s of %.2f %s; the embedding counted)\n",
           plan.active_params, plan.params, plan.active_params >= 1e9 ? plan.active_params / 1e9 : plan.active_params / 1e6,
           plan.active_params >= 1e9 ? "B" : "M", plan.params >= 1e9 ? plan.params / 1e9 : plan.params / 1e6,
           plan.params >= 1e9 ? "B" : "M");
    printf("read per decoded token: %zu bytes of weights (%.1f MB, %s)\n", plan.bytes_per_token, plan.bytes_per_token / 1e6,
           weight_type_name(run_as));
    printf("by format:  weights (every expert)  read per decoded token\n");
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        weight_plan(&plan, c, stored, formats[i]);
        printf("  %-6s %18.1f MB %19.1f MB\n", weight_type_name(formats[i]), plan.bytes / 1e6, plan.bytes_per_token / 1e6);
    }
}

/* The KV cache in each format (keys and values alike): at the context, and
 * what each 1024 positions more add. */
static void print_kv_types(const Config *c, int context) {
    printf("KV cache by type (-ctk, -ctv), keys and values:\n");
    for (int i = 0; i < KV_TYPES; i++) {
        KVType t = (KVType)i;
        size_t at = kv_cache_bytes(c, context, t, t), more = kv_cache_bytes(c, context + 1024, t, t) - at;
        if (kv_type_fits(t, c->head_dim))
            printf("  %-5s %10.1f MB at context %d, %.1f MB per 1024 positions more\n", kv_type_name(t), at / 1e6, context,
                   more / 1e6);
        else
            printf("  %-5s needs head_dim a multiple of %d\n", kv_type_name(t), QUANT_BLOCK);
    }
}

/* Where the weights come from at a run: the prepared file, if it is made
 * and up to date (only its header and table are read), else what a run
 * will do. */
static void print_prepared(Model *m, bool no_prepared, size_t bytes) {
    Error why;
    if (no_prepared) {
        printf("prepared weights: not used (--no-prepared): laid out in memory at load\n");
        return;
    }
    if (prepared_find(&m->prepared, m->weights_path, prepared_key(&m->st), m->dtype, &why) == 0) {
        printf("prepared weights: %s (%.1f MB, mapped)\n", m->prepared.path, m->prepared.size / 1e6);
        return;
    }
    printf("prepared weights: none up to date for %s (%s); the first run writes one (%.1f MB)\n", weight_type_name(m->dtype),
           why.msg, bytes / 1e6);
}

/* The tokenizer.json info did not read: its size, or that there is none. */
static void print_tokenizer_file(const char *path) {
    char *tok_path = model_path(path, "tokenizer.json");
    struct stat st;
    if (stat(tok_path, &st) == 0) printf("tokenizer: tokenizer.json, %.1f MB (not read; --check reads it)\n", st.st_size / 1e6);
    else printf("tokenizer: none (no tokenizer.json)\n");
    free(tok_path);
}

static int cmd_info(Args *a) {
    ModelOptions opt = {0};
    bool check = false;
    for (a->i = 1; a->i < a->argc; a->i++) {
        if (is_flag(a, "-h|--help")) {
            printf("usage: run info MODEL [flags]\n\n"
                   "Prints the model's configuration, every tensor (name, dtype, shape, bytes),\n"
                   "the parameter count and the memory a run needs. Reads the headers only:\n"
                   "no weight, and not tokenizer.json unless --check.\n\nflags:\n"
                   "  --check              also load tokenizer.json and check it against the model,\n"
                   "                       as every command that runs text does\n%s",
                   model_flags_help);
            return 0;
        }
        if (is_flag(a, "--check")) check = true;
        else if (!model_flag(a, &opt)) other_argument(a);
    }
    const char *path = command_model(a, 0, "");
    Model m;
    Tokenizer *tokenizer =
        checkpoint_load(&m, path, &opt, check ? TOKENIZER_NEEDED : TOKENIZER_UNREAD, false);  /* no weight is read */
    const Config *c = &m.config;
    printf("model: %s\n", path);
    printf("architecture: %s, %d layers, hidden %d, MLP %d, %d query heads, %d key/value heads, head_dim %d\n",
           architecture_name(c->arch), c->n_layers, c->dim, c->hidden_dim, c->n_heads, c->n_kv_heads, c->head_dim);
    printf("vocab %d, max positions %d, rope_theta %g, rms_norm_eps %g, tied embeddings: %s\n", c->vocab_size,
           c->max_pos, c->rope_theta, c->norm_eps, c->tied_embeddings ? "yes" : "no");
    if (c->rope_scaling.kind == ROPE_LLAMA3)
        printf("RoPE scaling: llama3, factor %g, low/high frequency factors %g/%g, original context %d\n",
               c->rope_scaling.factor, c->rope_scaling.low_freq_factor, c->rope_scaling.high_freq_factor,
               c->rope_scaling.original_max_pos);
    if (c->rope_scaling.kind == ROPE_LINEAR) printf("RoPE scaling: linear, factor %g\n", c->rope_scaling.factor);
    printf("biases: q/k/v %s, o %s, MLP %s; q/k norm: %s; MLP activation: %s\n", c->qkv_bias ? "yes" : "no",
           c->o_bias ? "yes" : "no", c->mlp_bias ? "yes" : "no", c->qk_norm ? "yes" : "no",
           c->act == ACT_GELU_TANH ? "GELU (tanh)" : "SiLU");
    print_sliding(c, m.max_context);
    print_experts(c);
    printf("bos id: ");
    if (c->bos_id >= 0) printf("%d", c->bos_id);
    else printf("none");
    printf(", eos ids:");
    for (int i = 0; i < c->n_eos; i++) printf(" %d", c->eos_ids[i]);
    printf("%s\n", c->n_eos ? "" : " none");
    if (tokenizer) printf("tokenizer: %d ids, checked against the model\n", tokenizer_vocab_size(tokenizer));
    else print_tokenizer_file(path);

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
    WeightPlan plan;
    weight_plan(&plan, c, m.stored, m.dtype);
    size_t kv = kv_cache_bytes(c, m.max_context, m.cache_type_k, m.cache_type_v);
    printf("memory to run: weights %.1f MB (%s) + KV cache %.1f MB (context %d, keys %s, values %s) = %.1f MB\n",
           plan.bytes / 1e6, weight_type_name(m.dtype), kv / 1e6, m.max_context, kv_type_name(m.cache_type_k),
           kv_type_name(m.cache_type_v), (plan.bytes + kv) / 1e6);
    print_kv_types(c, m.max_context);
    print_prepared(&m, opt.no_prepared, plan.bytes);
    print_formats(c, m.dtype, m.stored);
    model_free(&m);
    tokenizer_free(tokenizer);
    return 0;
}

/* ---- prepare ---- */

static int cmd_prepare(Args *a) {
    ModelOptions opt = {0};
    for (a->i = 1; a->i < a->argc; a->i++) {
        if (is_flag(a, "-h|--help")) {
            printf("usage: run prepare MODEL [--dtype T] [-t N]\n\n"
                   "Writes the prepared weights of MODEL in format T now, so that the first run\n"
                   "starts as fast as the next: the matrices laid out as the products read them\n"
                   "(quantized for q8 and q4), beside the checkpoint when its folder is writable,\n"
                   "else in $XDG_CACHE_HOME/run (~/.cache/run). Runs map the file read-only; it is\n"
                   "written again when the checkpoint changes. Nothing is done when it is up to\n"
                   "date. A file written now is read back into memory (in 2 MB pages where the\n"
                   "kernel can) for the next run. The tokenizer's tables are prepared too\n"
                   "(tokenizer.run, in the same places), when tokenizer.json is there.\n\nflags:\n%s",
                   model_flags_help);
            return 0;
        }
        if (!model_flag(a, &opt)) other_argument(a);
    }
    const char *path = command_model(a, 0, "");
    if (opt.no_prepared) usage_error(a, "--no-prepared: prepare makes the prepared file");
    if (opt.math != MATH_EXACT) usage_error(a, "--math: the prepared file is the same for every --math");
    if (opt.cache_type_k != KV_F32 || opt.cache_type_v != KV_F32)
        usage_error(a, "--cache-type-k/-v: prepare makes no KV cache");
    Model m;
    Tokenizer *tokenizer = checkpoint_load(&m, path, &opt, TOKENIZER_IF_PRESENT, true);
    if (!m.prepared.path) die("no prepared file was written (%s)", m.prepared_note.msg);
    if (m.prepared.made_now) prepared_warm(&m.prepared);  /* the next run's pages in memory */
    printf("%s: %s, %.1f MB (%s)\n", m.prepared.path, m.prepared.made_now ? "written" : "up to date", m.prepared.size / 1e6,
           weight_type_name(m.dtype));
    model_free(&m);
    tokenizer_free(tokenizer);
    return 0;
}

/* ---- fwd ---- */

/* Prints the 5 highest logits of one position, with each token's text. */
static void print_top5(const float *logits, int vocab, const Tokenizer *t) {
    int top[5], n = top_indices(top, 5, logits, vocab);
    for (int i = 0; i < n; i++) {
        printf("  %d. id %-7d logit %10.6f  ", i + 1, top[i], logits[top[i]]);
        trace_token_text(stdout, t, top[i]);
        putchar('\n');
    }
}

/* fwd --logits FILE: raw float32 rows as forward_prompt_each gives them. */
typedef struct {
    FILE *f;
    const char *path;
    int vocab;
} LogitsFile;

static void write_logit_rows(void *ctx, const float *rows, int first, int n_rows) {
    const LogitsFile *out = ctx;
    size_t n = (size_t)n_rows * out->vocab;
    (void)first;
    if (fwrite(rows, sizeof(float), n, out->f) != n) die("%s: write failed", out->path);
}

static int cmd_fwd(Args *a) {
    const char *tokens_arg = NULL, *logits_path = NULL, *report_path = NULL;
    int verbose = 0;
    ModelOptions opt = {0};
    for (a->i = 1; a->i < a->argc; a->i++) {
        if (is_flag(a, "-h|--help")) {
            printf("usage: run fwd MODEL TOKEN POS [flags]\n"
                   "       run fwd MODEL --tokens IDS [--logits FILE] [flags]\n\n"
                   "Runs the forward pass and prints the 5 most likely next tokens.\n"
                   "The first form feeds one token at position POS (earlier positions of the\n"
                   "KV cache are empty); the second feeds the tokens at positions 0..n-1.\n\n"
                   "flags:\n"
                   "  --tokens IDS         token ids separated by commas or spaces; '-' reads them\n"
                   "                       from standard input\n"
                   "  --logits FILE        write the logits of every position as raw little-endian\n"
                   "                       float32, n_tokens x vocab_size\n"
                   "  --report FILE.html   with --tokens: write a page showing the pass from inside:\n"
                   "                       attention maps, the logit lens, residual-stream\n"
                   "                       statistics\n"
                   "  -v, -vv              trace each layer: first values and L2 norms of q, k, v\n"
                   "                       and of the residual stream (of the last token);\n"
                   "                       -vv shows every step\n%s",
                   model_flags_help);
            return 0;
        }
        if (model_flag(a, &opt)) continue;
        if (is_flag(a, "--tokens")) tokens_arg = flag_value(a);
        else if (is_flag(a, "--logits")) logits_path = flag_value(a);
        else if (is_flag(a, "--report")) report_path = flag_value(a);
        else if (is_flag(a, "-v")) no_value(a), verbose = 1;
        else if (is_flag(a, "-vv")) no_value(a), verbose = 2;
        else other_argument(a);
    }
    const char *path = command_model(a, 2, "");
    if (!tokens_arg && a->n_operands != 2) usage_error(a, "give TOKEN POS, or --tokens");
    if (tokens_arg && a->n_operands) usage_error(a, "give TOKEN POS or --tokens, not both");
    if (report_path && !tokens_arg) usage_error(a, "--report needs --tokens (a pass from position 0)");

    int n, pos = 0, *ids;
    if (tokens_arg) {
        size_t len;
        char *text = strcmp(tokens_arg, "-") == 0 ? console_read_all(&len) : xstrdup(tokens_arg);
        ids = parse_ids(a, "--tokens", text, &n);
        free(text);
        if (n == 0) usage_error(a, "--tokens: no token ids given");
    } else {
        ids = xmalloc(sizeof *ids);
        ids[0] = (int)parse_long(a, "TOKEN", operand(a, 0), 0, 1 << 30);
        pos = (int)parse_long(a, "POS", operand(a, 1), 0, 1 << 30);
        n = 1;
    }
    Model m;
    double t0 = now_seconds();
    Tokenizer *tokenizer = checkpoint_load(&m, path, &opt, TOKENIZER_IF_PRESENT, true);
    double load_seconds = now_seconds() - t0;
    checkpoint_check_tokens(&m, ids, (size_t)n);
    char advice[160];
    if ((long)pos + n > m.max_context)
        die("the last token's position, %ld, is past the context of %d positions: %s", (long)pos + n - 1, m.max_context,
            context_advice(advice, sizeof advice, &m, tokens_arg ? "give fewer tokens" : "give a smaller POS"));
    Trace trace = {.out = stdout, .level = verbose};
    Probe probe = {.ctx = &trace, .vectors = trace_vectors};
    if (verbose) m.probe = &probe;
    Report *report = report_path ? report_new(&m, tokenizer, verbose ? &probe : NULL) : NULL;
    LogitsFile out = {.path = logits_path, .vocab = m.config.vocab_size};
    if (logits_path && !(out.f = fopen(logits_path, "wb"))) die("%s: cannot create: %s", logits_path, strerror(errno));

    /* Every position's logits go to the file as they come. */
    KVCache kv;
    kv_cache_init(&kv, &m, m.max_context);
    t0 = now_seconds();
    const float *last = forward_prompt_each(&m, &kv, ids, n, pos, out.f ? write_logit_rows : NULL, &out);
    double seconds = now_seconds() - t0;
    if (out.f && fclose(out.f) != 0) die("%s: write failed", logits_path);
    printf("next token after id %d at position %d:\n", ids[n - 1], pos + n - 1);
    print_top5(last, m.config.vocab_size, tokenizer);
    if (report) {
        ReportRun run = {.command = "fwd", .model = path, .threads = pool_size(m.pool),
                         .kv_bytes = kv_cache_bytes(&m.config, kv.capacity, kv.key_type, kv.value_type), .load_seconds = load_seconds,
                         .prompt_tokens = n, .prompt_seconds = seconds};
        Error e;
        if (report_write(report, report_path, ids, n, &run, &e) != 0) die("%s", e.msg);
        fprintf(stderr, "report written to %s\n", report_path);
        report_free(report);
    }
    free(ids);
    kv_cache_free(&kv);
    model_free(&m);
    tokenizer_free(tokenizer);
    return 0;
}

/* ---- bench ---- */

/* BenchProgress: the line of each repeat (or of filling the cache). */
static void show_repeat(void *ctx, int repeat, double prefill, double decode) {
    const BenchOptions *o = ctx;
    if (repeat < 0) {
        printf("filled the KV cache to depth %d in %.2f s\n", o->depth, prefill);
        return;
    }
    printf("repeat %d:", repeat + 1);
    if (o->n_prompt) printf(" prefill %.1f tok/s%s", prefill, o->n_gen ? "," : "");
    if (o->n_gen) printf(" decode %.1f tok/s", decode);
    printf("\n");
    fflush(stdout);
}

static int cmd_bench(Args *a) {
    BenchOptions b = {.n_prompt = 128, .n_gen = 64, .repeats = 3, .depth = 0};
    ModelOptions opt = {0};
    for (a->i = 1; a->i < a->argc; a->i++) {
        if (is_flag(a, "-h|--help")) {
            printf("usage: run bench MODEL [flags]\n\n"
                   "Times prefill of a prompt (one batch) and decoding (one token at a time),\n"
                   "and prints the median speed of the repeats as its last two lines:\n"
                   "  ppP: X tok/s   and   tgN: Y tok/s\n\n"
                   "flags:\n"
                   "  -p N                 prompt tokens to prefill (default 128; 0: no prefill test)\n"
                   "  -n N                 tokens to decode (default 64; 0: no decoding test)\n"
                   "  -r N                 repeats (default 3)\n"
                   "  -d, --depth D        tokens already in the KV cache before each test\n"
                   "                       (default 0), to measure speed at long context\n"
                   "  -m, --model MODEL    the checkpoint, instead of the first argument\n"
                   "  -c, --ctx-size N     context length (default: depth + the larger of -p and -n)\n"
                   "  -t, --threads N      threads (default: one per CPU this process may use)\n"
                   "  --dtype T, --math M  as for info: bf16, f16, f32, q8 or q4; exact or bf16\n"
                   "  -ctk T, -ctv T       the KV cache's keys and values: f32 (default), bf16, q8_0\n");
            return 0;
        }
        if (model_flag(a, &opt)) continue;
        if (is_flag(a, "-p")) b.n_prompt = (int)parse_long(a, "-p", flag_value(a), 0, 1 << 20);
        else if (is_flag(a, "-n")) b.n_gen = (int)parse_long(a, "-n", flag_value(a), 0, 1 << 20);
        else if (is_flag(a, "-r")) b.repeats = (int)parse_long(a, "-r", flag_value(a), 1, 1000);
        else if (is_flag(a, "-d|--depth")) b.depth = (int)parse_long(a, "--depth", flag_value(a), 0, 1 << 24);
        else other_argument(a);
    }
    const char *path = command_model(a, 0, "");
    if (b.n_prompt == 0 && b.n_gen == 0) usage_error(a, "-p 0 and -n 0: nothing to time");
    int most = b.n_prompt > b.n_gen ? b.n_prompt : b.n_gen;
    if (!opt.context) opt.context = b.depth + most;
    Model m;
    Tokenizer *tokenizer = checkpoint_load(&m, path, &opt, TOKENIZER_IF_PRESENT, true);
    char advice[160];
    if ((long)b.depth + most > m.max_context)
        die("depth %d + %d tokens do not fit the context of %d positions: %s", b.depth, most, m.max_context,
            context_advice(advice, sizeof advice, &m, "lower -p, -n or --depth"));
    int threads = pool_size(m.pool);
    printf("model %s: %s weights%s, %.1f MB, %d thread%s, %s kernels, KV cache %s/%s\n", path, weight_type_name(m.dtype),
           m.math == MATH_BF16 ? " (bf16 arithmetic)" : "", model_weight_bytes(&m) / 1e6, threads, threads == 1 ? "" : "s",
           kernels_in_use(), kv_type_name(m.cache_type_k), kv_type_name(m.cache_type_v));
    double *pp = xmalloc((size_t)b.repeats * sizeof *pp), *tg = xmalloc((size_t)b.repeats * sizeof *tg);
    bench_run(&m, &b, pp, tg, show_repeat, &b);
    if (b.n_prompt) printf("pp%d: %.1f tok/s\n", b.n_prompt, bench_median(pp, b.repeats));
    if (b.n_gen) printf("tg%d: %.1f tok/s\n", b.n_gen, bench_median(tg, b.repeats));
    free(pp);
    free(tg);
    model_free(&m);
    tokenizer_free(tokenizer);
    return 0;
}

/* ---- tok and detok ---- */

static void warn_invalid_utf8(size_t bad) {
    if (bad) warn("%zu invalid UTF-8 sequence%s in the input replaced by U+FFFD", bad, bad == 1 ? "" : "s");
}

static int cmd_tok(Args *a) {
    const char *file = NULL;
    bool pieces = false, plain = false, special = true, prepared = true;
    for (a->i = 1; a->i < a->argc; a->i++) {
        if (is_flag(a, "-h|--help")) {
            printf("usage: run tok MODEL [TEXT | -f FILE] [--pieces] [--plain] [--no-special]\n"
                   "\n"
                   "Prints the token ids of TEXT, of FILE, or of standard input when neither is\n"
                   "given (or TEXT is '-'), separated by spaces on one line, as Hugging Face\n"
                   "encodes it: with the special tokens the tokenizer adds (Llama 3's\n"
                   "<|begin_of_text|> first; Qwen's add none). Only MODEL's tokenizer.json is read\n"
                   "(and its prepared tables, tokenizer.run, written beside it at the first run).\n"
                   "\n"
                   "  -m, --model MODEL  the checkpoint, instead of the first argument\n"
                   "  -f, --file FILE    read the text from FILE\n"
                   "  --pieces           print one line per token instead: the id, a tab, and the\n"
                   "                     token as tokenizer.json spells it (a space shows as \"\xC4\xA0\",\n"
                   "                     a newline as \"\xC4\x8A\")\n"
                   "  --plain            read added tokens such as <|im_end|> in the text as plain text\n"
                   "  --no-special       add no special tokens (add_special_tokens=False)\n"
                   "  --no-prepared      build the tokenizer's tables from tokenizer.json, neither\n"
                   "                     reading nor writing tokenizer.run\n"
                   "  -h, --help         print this help\n");
            return 0;
        }
        if (is_flag(a, "-f|--file")) file = flag_value(a);
        else if (is_flag(a, "--pieces")) no_value(a), pieces = true;
        else if (is_flag(a, "--plain")) no_value(a), plain = true;
        else if (is_flag(a, "--no-special")) no_value(a), special = false;
        else if (is_flag(a, "--no-prepared")) no_value(a), prepared = false;
        else other_argument(a);
    }
    const char *model = command_model(a, 1, " (quote the text)"), *text = operand(a, 0);
    if (text && file) usage_error(a, "give the text or -f FILE, not both");

    char *data;
    size_t len;
    Tokenizer *t = checkpoint_tokenizer(model, prepared);
    if (text && strcmp(text, "-") != 0) {
        data = xstrdup(text);
        len = strlen(text);
    } else if (file) {
        Error e;
        if (read_file(file, &data, &len, &e) != 0) die("%s", e.msg);
    } else {
        data = console_read_all(&len);
    }
    TokenIds ids = {0};
    EncodeMode mode = (plain ? ENCODE_PLAIN : ENCODE_ADDED_TOKENS) | (special ? ENCODE_ADD_SPECIAL : 0);
    warn_invalid_utf8(tokenizer_encode(t, data, len, mode, &ids));
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
    return 0;
}

static int cmd_detok(Args *a) {
    bool prepared = true;
    for (a->i = 1; a->i < a->argc; a->i++) {
        if (is_flag(a, "-h|--help")) {
            printf("usage: run detok MODEL [ID...]\n"
                   "\n"
                   "Writes the text of the token ids, exactly as Hugging Face decodes them (added\n"
                   "tokens as their text, ill-formed UTF-8 as U+FFFD), with nothing added: no\n"
                   "newline at the end. The ids are the arguments, or standard input when there\n"
                   "are none (separated by spaces, commas or newlines, as tok prints them).\n"
                   "Only MODEL's tokenizer.json is read (and its prepared tables, tokenizer.run).\n"
                   "\n"
                   "  -m, --model MODEL  the checkpoint, instead of the first argument\n"
                   "  --no-prepared      build the tokenizer's tables from tokenizer.json, neither\n"
                   "                     reading nor writing tokenizer.run\n"
                   "  -h, --help         print this help\n");
            return 0;
        }
        if (is_flag(a, "--no-prepared")) no_value(a), prepared = false;
        else other_argument(a);
    }
    const char *model = command_model(a, a->argc, "");
    char *list;
    if (a->n_operands == 0) {
        size_t len;
        list = console_read_all(&len);
    } else {
        /* The ids of every argument, one list. */
        size_t len = 0;
        for (int i = 0; i < a->n_operands; i++) len += strlen(a->operands[i]) + 1;
        char *end = list = xmalloc(len + 1);
        *end = '\0';
        for (int i = 0; i < a->n_operands; i++) end += sprintf(end, " %s", a->operands[i]);
    }
    Tokenizer *t = checkpoint_tokenizer(model, prepared);
    int n, *ids = parse_ids(a, "token ids", list, &n);
    for (int i = 0; i < n; i++)
        if (ids[i] >= tokenizer_vocab_size(t))
            usage_error(a, "token id %d is outside the tokenizer's [0, %d)", ids[i], tokenizer_vocab_size(t));
    size_t len;
    char *text = tokenizer_decode(t, ids, (size_t)n, &len);
    fwrite(text, 1, len, stdout);
    free(text);
    free(ids);
    free(list);
    tokenizer_free(t);
    return 0;
}

/* ---- generation flags ---- */

/* The generation flags as given; NAN or NOT_GIVEN for "not given". */
enum { NOT_GIVEN = -2 };
typedef struct {
    double temperature, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty;
    long long top_k, seed, max_new;
    bool ignore_eos;           /* --ignore-eos */
    const char *stops[MAX_STOP_STRINGS]; /* -r/--reverse-prompt and --stop, as given */
    int n_stops;
    bool escapes;              /* -e: \n, \t, ... in the prompt, system message and stop strings */
    int verbose;               /* -v: a line per token; -vv: and each layer's statistics */
    const char *report;        /* --report FILE.html, or NULL */
    const char *grammar, *grammar_file, *json_schema, *json_schema_file;  /* constraints, or NULL */
} GenerationFlags;

static const GenerationFlags no_generation_flags = {
    .temperature = NAN, .top_p = NAN, .min_p = NAN, .repeat_penalty = NAN, .presence_penalty = NAN,
    .frequency_penalty = NAN, .top_k = NOT_GIVEN, .seed = NOT_GIVEN, .max_new = NOT_GIVEN};

static const char *generation_flags_help =
    "  -n, --n-predict N    new tokens at most (default: %s); 0: read the prompt\n"
    "                       only; -1: until an end token or a full context (a\n"
    "                       prompt of p tokens in a context of c: c - p + 1 at most)\n"
    "  --temp, --temperature T\n"
    "                       temperature; 0 = greedy (default: generation_config.json's;\n"
    "                       without one, greedy, as in transformers)\n"
    "  --top-k K            keep the K most likely tokens; 0 = off\n"
    "                       (default: generation_config.json's, else 50)\n"
    "  --top-p P            keep the most likely tokens up to probability P; 1 = off\n"
    "                       (default: generation_config.json's, else 1)\n"
    "  --min-p P            drop tokens less likely than P x the most likely; 0 = off\n"
    "                       (default: generation_config.json's, else 0)\n"
    "  --repeat-penalty R   divide the positive logits of tokens already in the\n"
    "                       context by R, multiply the negative ones; 1 = off\n"
    "                       (default: generation_config.json's, else 1)\n"
    "  --presence-penalty P subtract P from the logits of tokens generated so far\n"
    "                       (OpenAI's; default 0)\n"
    "  --frequency-penalty F\n"
    "                       subtract F per time a token was generated so far\n"
    "                       (OpenAI's; default 0)\n"
    "  --seed S             seed of the sampler's random numbers; -1: from the clock\n"
    "                       (default -1; the seed used is printed with the statistics)\n"
    "  --ignore-eos         never end at an end token: none is sampled\n";

/* The flags that shape one reply's text (gen and chat; a request to serve
 * brings its own). */
static const char *reply_flags_help =
    "  -r, --reverse-prompt TEXT, --stop TEXT\n"
    "                       end the text before TEXT, which is not printed\n"
    "                       (repeatable, up to 4)\n"
    "  -e, --escape         read \\n, \\r, \\t, \\\\, \\', \\\" and \\xHH in the prompt,\n"
    "                       the system message and the stop strings as the\n"
    "                       characters they stand for\n";

/* The flags that look inside a run (gen and chat; serve refuses them). */
static const char *inside_flags_help =
    "  -v, -vv              a line per generated token on standard error: position,\n"
    "                       token, probability, the top 3 alternatives, time;\n"
    "                       -vv also each layer's statistics for the token\n"
    "  --report FILE.html   write a page showing the run from inside: tokens and\n"
    "                       each sampling stage, attention maps, the logit lens,\n"
    "                       residual-stream statistics (slower: extra work per layer)\n"
    "  --grammar GBNF       constrain the output to the grammar (llama.cpp's GBNF,\n"
    "                       start rule 'root'); the reply ends where it is complete\n"
    "  --grammar-file FILE  the same, the grammar read from FILE\n"
    "  -j, --json-schema JSON\n"
    "                       constrain the output to JSON valid under the JSON Schema\n"
    "  --json-schema-file FILE\n"
    "                       the same, the schema read from FILE\n";

/* Consumes the current argument (and its value) if it is a generation flag. */
static bool generation_flag(Args *a, GenerationFlags *f) {
    if (is_flag(a, "--temp|--temperature")) f->temperature = parse_double(a, "--temp", flag_value(a));
    else if (is_flag(a, "--top-p")) f->top_p = parse_double(a, "--top-p", flag_value(a));
    else if (is_flag(a, "--min-p")) f->min_p = parse_double(a, "--min-p", flag_value(a));
    else if (is_flag(a, "--repeat-penalty")) f->repeat_penalty = parse_double(a, "--repeat-penalty", flag_value(a));
    else if (is_flag(a, "--presence-penalty")) f->presence_penalty = parse_double(a, "--presence-penalty", flag_value(a));
    else if (is_flag(a, "--frequency-penalty")) f->frequency_penalty = parse_double(a, "--frequency-penalty", flag_value(a));
    else if (is_flag(a, "--top-k")) f->top_k = parse_long(a, "--top-k", flag_value(a), 0, 1 << 30);
    else if (is_flag(a, "--seed")) {
        const char *v = flag_value(a);
        char *end;
        errno = 0;
        long long seed = strtoll(v, &end, 10);
        if (*v == '\0' || *end != '\0' || errno || seed < -1)
            usage_error(a, "--seed: expected a non-negative integer, or -1 for a random seed, got '%s'", v);
        f->seed = seed;
    } else if (is_flag(a, "-n|--n-predict")) f->max_new = parse_long(a, "-n", flag_value(a), -1, 1 << 30);
    else if (is_flag(a, "--ignore-eos")) no_value(a), f->ignore_eos = true;
    else return false;
    return true;
}

/* Consumes the current argument (and its value) if it is a flag of one
 * reply's text or of looking inside the run: gen's and chat's, not serve's. */
static bool reply_flag(Args *a, GenerationFlags *f) {
    if (is_flag(a, "-r|--reverse-prompt|--stop")) {
        const char *stop = flag_value(a);
        if (f->n_stops == MAX_STOP_STRINGS) usage_error(a, "-r/--stop: at most %d stop strings", MAX_STOP_STRINGS);
        if (!stop[0]) usage_error(a, "-r/--stop: a stop string is empty");
        f->stops[f->n_stops++] = stop;
    } else if (is_flag(a, "-e|--escape")) no_value(a), f->escapes = true;
    else if (is_flag(a, "-v")) no_value(a), f->verbose = 1;
    else if (is_flag(a, "-vv")) no_value(a), f->verbose = 2;
    else if (is_flag(a, "--report")) f->report = flag_value(a);
    else if (is_flag(a, "--grammar")) f->grammar = flag_value(a);
    else if (is_flag(a, "--grammar-file")) f->grammar_file = flag_value(a);
    else if (is_flag(a, "-j|--json-schema")) f->json_schema = flag_value(a);
    else if (is_flag(a, "--json-schema-file")) f->json_schema_file = flag_value(a);
    else return false;
    return true;
}

/* The sampler settings a GenerationFlags gives on top of g's. */
static void apply_generation_flags(GenerationConfig *g, const GenerationFlags *f) {
    SamplerConfig *s = &g->sampling;
    if (!isnan(f->temperature)) s->temperature = f->temperature;
    if (!isnan(f->top_p)) s->top_p = f->top_p;
    if (!isnan(f->min_p)) s->min_p = f->min_p;
    if (!isnan(f->repeat_penalty)) s->repeat_penalty = f->repeat_penalty;
    if (!isnan(f->presence_penalty)) s->presence_penalty = f->presence_penalty;
    if (!isnan(f->frequency_penalty)) s->frequency_penalty = f->frequency_penalty;
    if (f->top_k != NOT_GIVEN) s->top_k = (int)f->top_k;
    if (f->max_new != NOT_GIVEN) g->max_new = (int)f->max_new;
    if (f->ignore_eos) g->ignore_eos = true;
    s->seed = f->seed >= 0 ? (uint64_t)f->seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
}

/* Checks the values given on the command line before any file is read, so
 * that a bad value is a usage error whatever the checkpoint holds. */
static void check_generation_flags(const Args *a, const GenerationFlags *f) {
    GenerationConfig g = {.sampling = {.temperature = 1, .top_p = 1, .repeat_penalty = 1}};
    apply_generation_flags(&g, f);
    Error e;
    if (sampler_check_config(&g.sampling, &e) != 0) usage_error(a, "%s", e.msg);
    for (int i = 0; i < f->n_stops; i++) free(flag_text(a, "-r/--stop", f->stops[i], f->escapes, false));
}

/* The grammar the flags ask for, compiled, or NULL for none. A bad grammar
 * or schema given on the command line is a usage error; one in a file, a
 * runtime error naming the file. */
static Grammar *grammar_from_flags(const Args *a, const GenerationFlags *f) {
    int given = (f->grammar != NULL) + (f->grammar_file != NULL) + (f->json_schema != NULL) + (f->json_schema_file != NULL);
    if (given == 0) return NULL;
    if (given > 1) usage_error(a, "give one of --grammar, --grammar-file, --json-schema and --json-schema-file");
    const char *file = f->grammar_file ? f->grammar_file : f->json_schema_file;
    bool schema = f->json_schema || f->json_schema_file;
    const char *flag = f->grammar ? "--grammar" : f->grammar_file ? "--grammar-file" : f->json_schema ? "--json-schema" : "--json-schema-file";
    char *text;
    size_t len;
    Error e;
    if (file) {
        if (read_file(file, &text, &len, &e) != 0) die("%s: %s", flag, e.msg);
    } else {
        text = xstrdup(f->grammar ? f->grammar : f->json_schema);
        len = strlen(text);
    }
    char *gbnf = text;
    size_t gbnf_len = len;
    if (schema) {
        gbnf = schema_to_gbnf(text, len, &e);
        gbnf_len = gbnf ? strlen(gbnf) : 0;
    }
    Grammar *g = gbnf ? grammar_new(gbnf, gbnf_len, &e) : NULL;
    if (gbnf != text) free(gbnf);
    free(text);
    if (!g && file) die("%s %s: %s", flag, file, e.msg);
    if (!g) usage_error(a, "%s: %s", flag, e.msg);
    return g;
}

/* The checkpoint's generation settings with the flags on top. */
static GenerationConfig generation_settings(const char *model, const Config *c, const GenerationFlags *f,
                                            int default_max_new) {
    GenerationConfig g;
    Error e;
    if (generation_config_load(&g, model, c, default_max_new, &e) != 0) die("%s", e.msg);
    apply_generation_flags(&g, f);
    if (sampler_check_config(&g.sampling, &e) != 0) die("%s: %s", model, e.msg);
    return g;
}

/* What gen and chat share before their first reply: the checkpoint, the
 * settings (generation_config.json's with the flags on top) and the flags'
 * stop strings (-e read in them), grammar (the session's from now on) and
 * watch. */
static void open_session(Session *s, const Args *a, const char *path, const ModelOptions *opt, const GenerationFlags *f,
                         Grammar *grammar, int default_max_new) {
    session_load(s, path, opt);
    GenerationConfig g = generation_settings(path, &s->model.config, f, default_max_new);
    char *stops[MAX_STOP_STRINGS];
    for (int i = 0; i < f->n_stops; i++) stops[i] = flag_text(a, "-r/--stop", f->stops[i], f->escapes, false);
    SessionOptions o = {.command = a->command, .verbose = f->verbose, .report_path = f->report,
                        .stops = (const char *const *)stops, .n_stops = f->n_stops, .grammar = grammar};
    session_start(s, &g, &o);
    for (int i = 0; i < f->n_stops; i++) free(stops[i]);
}

/* ---- gen ---- */

static int cmd_gen(Args *a) {
    const char *prompt = NULL, *file = NULL;
    ModelOptions opt = {0};
    GenerationFlags flags = no_generation_flags;
    for (a->i = 1; a->i < a->argc; a->i++) {
        if (is_flag(a, "-h|--help")) {
            printf("usage: run gen MODEL [PROMPT | -p TEXT | -f FILE | -] [flags]\n\n"
                   "Continues the prompt and streams the new text to standard output, ending it\n"
                   "with a newline. The prompt is PROMPT, TEXT, the contents of FILE, or standard\n"
                   "input ('-', or when none is given). It is fed as one batch and not echoed;\n"
                   "special tokens written in it (such as <|im_start|>) are read as such, and a\n"
                   "tokenizer that adds a BOS token gets it first. Statistics go to standard\n"
                   "error. Ctrl-C stops generation (exit status 130). '--' ends the flags.\n\n"
                   "flags:\n"
                   "  -p, --prompt TEXT    the prompt\n"
                   "  -f, --file FILE      read the prompt from FILE\n");
            printf(generation_flags_help, "256");
            printf("%s", reply_flags_help);
            printf("%s", inside_flags_help);
            printf("%s", model_flags_help);
            return 0;
        }
        if (model_flag(a, &opt) || generation_flag(a, &flags) || reply_flag(a, &flags)) continue;
        if (is_flag(a, "-p|--prompt")) {
            if (prompt) usage_error(a, "-p: a second prompt (give one)");
            prompt = flag_value(a);
        } else if (is_flag(a, "-f|--file")) {
            if (file) usage_error(a, "-f: a second prompt file (give one)");
            file = flag_value(a);
        } else {
            other_argument(a);
        }
    }
    const char *path = command_model(a, 1, " (quote the prompt)");
    if ((prompt != NULL) + (file != NULL) + (operand(a, 0) != NULL) > 1)
        usage_error(a, "two prompts given: give one, as PROMPT, -p TEXT, -f FILE or on standard input");
    if (!prompt) prompt = operand(a, 0);
    check_generation_flags(a, &flags);
    Grammar *grammar = grammar_from_flags(a, &flags);
    size_t len;
    char *text;
    if (file) {
        Error e;
        if (read_file(file, &text, &len, &e) != 0) die("%s", e.msg);
    } else if (prompt && strcmp(prompt, "-") != 0) {
        text = xstrdup(prompt);
        len = strlen(prompt);
    } else {
        if (isatty(STDIN_FILENO)) fprintf(stderr, "reading the prompt from standard input (end it with Ctrl-D)\n");
        text = console_read_all(&len);
    }
    if (flags.escapes) read_escapes(text, &len);

    if (len == 0) die("the prompt is empty");
    Session session;
    open_session(&session, a, path, &opt, &flags, grammar, 256);
    Model *m = &session.model;
    TokenIds ids = {0};
    warn_invalid_utf8(tokenizer_encode(session.tokenizer, text, len, ENCODE_PROMPT, &ids));
    free(text);
    char advice[160];
    if (ids.n > (size_t)m->max_context)
        die("the prompt is %zu tokens, longer than the context of %d positions: %s", ids.n, m->max_context,
            context_advice(advice, sizeof advice, m, "shorten it"));
    checkpoint_check_tokens(m, ids.ids, ids.n);
    sequence_start(&session.seq, ids.ids, (int)ids.n);
    token_ids_free(&ids);
    StopReason stop = session_reply(&session, NULL, NULL);
    putchar('\n');
    fflush(stdout);
    if (grammar && grammar_error(grammar)) warn("the grammar stopped the output: %s", grammar_error(grammar));
    session_print_stats(&session, stop);
    session_end(&session);
    return stop == STOP_INTERRUPTED ? 130 : 0;
}

/* ---- chat ---- */

static int cmd_chat(Args *a) {
    const char *system = NULL, *template_file = NULL;
    int thinking = -1;
    ModelOptions opt = {0};
    GenerationFlags flags = no_generation_flags;
    for (a->i = 1; a->i < a->argc; a->i++) {
        if (is_flag(a, "-h|--help")) {
            printf("usage: run chat MODEL [flags]\n\n"
                   "Chats with an instruction-tuned model, writing the conversation with the\n"
                   "checkpoint's own chat template. Type a message and Enter. The KV cache is\n"
                   "kept across turns, so each turn runs only its new tokens; when the context\n"
                   "fills, the oldest turns are dropped. When standard input is not a terminal,\n"
                   "only the replies are printed, each followed by a newline. NO_COLOR turns\n"
                   "colours off.\n%s\n"
                   "flags:\n"
                   "  -sys, --system-prompt, --system TEXT\n"
                   "                       the system message (default: the template's own)\n"
                   "  --chat-template-file FILE\n"
                   "                       the chat template (Jinja) in FILE instead of the\n"
                   "                       checkpoint's\n"
                   "  --think, --no-think  ask a model that can think aloud (Qwen3) to do so or not\n"
                   "                       (default: the template's default)\n",
                   chat_commands_help);
            printf(generation_flags_help, "-1");
            printf("%s", reply_flags_help);
            printf("%s", inside_flags_help);
            printf("%s", model_flags_help);
            return 0;
        }
        if (model_flag(a, &opt) || generation_flag(a, &flags) || reply_flag(a, &flags)) continue;
        if (is_flag(a, "-sys|--system-prompt|--system")) system = flag_value(a);
        else if (is_flag(a, "--chat-template-file")) template_file = flag_value(a);
        else if (is_flag(a, "--think")) no_value(a), thinking = 1;
        else if (is_flag(a, "--no-think")) no_value(a), thinking = 0;
        else other_argument(a);
    }
    const char *path = command_model(a, 0, "");
    check_generation_flags(a, &flags);
    char *system_text = system ? flag_text(a, "--system", system, flags.escapes, true) : NULL;
    Grammar *grammar = grammar_from_flags(a, &flags);

    Session session;
    open_session(&session, a, path, &opt, &flags, grammar, -1);
    Error e;
    Chat chat;
    if (chat_init(&chat, path, template_file, session.tokenizer, system_text, thinking, &e) != 0) die("%s", e.msg);
    free(system_text);
    session_chat(&session, &chat);
    chat_free(&chat);
    session_end(&session);
    return 0;
}

/* ---- ppl ---- */

/* A line per window on standard error: the perplexity so far. */
static void show_window(void *ctx, int index, int n_windows, int begin, int end, const PerplexityTotals *t) {
    (void)ctx;
    fprintf(stderr, "[%d/%d] tokens %d..%d: %ld scored, perplexity so far %.4f\n", index + 1, n_windows, begin, end - 1,
            t->n_scored, perplexity_value(t));
}

static int cmd_ppl(Args *a) {
    const char *file = NULL;
    int stride = 0;
    ModelOptions opt = {0};
    for (a->i = 1; a->i < a->argc; a->i++) {
        if (is_flag(a, "-h|--help")) {
            printf("usage: run ppl MODEL FILE [flags]   (or: run ppl MODEL -f FILE)\n\n"
                   "Prints the perplexity of the text in FILE ('-': standard input): exp of the\n"
                   "mean negative log-likelihood of its tokens, with its standard error, as\n"
                   "transformers' perplexity guide computes it. Windows of -c tokens (the\n"
                   "context length) start every S tokens; each scores only the tokens no earlier\n"
                   "window scored, each predicted from the window's tokens before it. A line per\n"
                   "window goes to standard error, the result to standard output:\n"
                   "  perplexity: P +/- E (N tokens scored, W windows of C tokens, stride S, DTYPE\n"
                   "  weights[, KV cache K/V when -ctk or -ctv is not f32])\n\n"
                   "flags:\n"
                   "  -f, --file FILE      the text (instead of the argument FILE)\n"
                   "  --stride S           tokens between the starts of windows (default: half\n"
                   "                       the window)\n"
                   "%s",
                   model_flags_help);
            return 0;
        }
        if (model_flag(a, &opt)) continue;
        if (is_flag(a, "--stride")) stride = (int)parse_long(a, "--stride", flag_value(a), 1, 1 << 24);
        else if (is_flag(a, "-f|--file")) {
            if (file) usage_error(a, "-f: a second file (give one)");
            file = flag_value(a);
        } else {
            other_argument(a);
        }
    }
    const char *path = command_model(a, 1, "");
    if (file && operand(a, 0)) usage_error(a, "two files given: give FILE or -f FILE");
    if (!file) file = operand(a, 0);
    if (!file) usage_error(a, "FILE is missing (the text to score: FILE, -f FILE, or '-' for standard input)");
    if (opt.context && opt.context < 2) usage_error(a, "-c: a window needs at least 2 tokens");
    if (opt.context && stride > opt.context) usage_error(a, "--stride %d is longer than the window of %d tokens", stride, opt.context);
    char *text;
    size_t len;
    if (strcmp(file, "-") == 0) {
        text = console_read_all(&len);
    } else {
        Error e;
        if (read_file(file, &text, &len, &e) != 0) die("%s", e.msg);
    }
    Model m;
    Tokenizer *tokenizer = checkpoint_load(&m, path, &opt, TOKENIZER_NEEDED, true);
    TokenIds ids = {0};
    warn_invalid_utf8(tokenizer_encode(tokenizer, text, len, ENCODE_PROMPT, &ids));
    free(text);
    if (ids.n < 2) die("%s: %zu token%s: perplexity needs at least 2", file, ids.n, ids.n == 1 ? "" : "s");
    if (ids.n > 1 << 30) die("%s: too many tokens", file);
    int window = m.max_context;
    if (window < 2) die("a window needs at least 2 tokens (-c)");
    if (!stride) stride = window / 2;
    if (stride > window) die("--stride %d is longer than the window of %d tokens", stride, window);
    PerplexityTotals t;
    double t0 = now_seconds();
    perplexity_run(&m, ids.ids, (int)ids.n, window, stride, &t, show_window, NULL);
    double seconds = now_seconds() - t0;
    int n_windows = perplexity_windows((int)ids.n, window, stride);
    char cache[64] = "";
    if (m.cache_type_k != KV_F32 || m.cache_type_v != KV_F32)
        snprintf(cache, sizeof cache, ", KV cache %s/%s", kv_type_name(m.cache_type_k), kv_type_name(m.cache_type_v));
    printf("perplexity: %.6f +/- %.6f (%ld tokens scored, %d window%s of %d tokens, stride %d, %s weights%s)\n",
           perplexity_value(&t), perplexity_error(&t), t.n_scored, n_windows, n_windows == 1 ? "" : "s", window, stride,
           weight_type_name(m.dtype), cache);
    fprintf(stderr, "%zu tokens in %.2f s\n", ids.n, seconds);
    token_ids_free(&ids);
    model_free(&m);
    tokenizer_free(tokenizer);
    return 0;
}

/* ---- embed ---- */

/* The vectors of the texts (or token ids) given: the engine runs them in
 * waves of up to 8 at once, each wave's prompts sharing forward passes. */
static int cmd_embed(Args *a) {
    bool json = false, as_ids = false;
    ModelOptions opt = {0};
    for (a->i = 1; a->i < a->argc; a->i++) {
        if (is_flag(a, "-h|--help")) {
            printf("usage: run embed MODEL TEXT... [flags]\n\n"
                   "Prints a vector for each TEXT ('-': standard input): the final norm's output\n"
                   "for its tokens, pooled as the checkpoint's sentence-transformers files say\n"
                   "(modules.json and the Pooling module's config.json: the last token, the mean\n"
                   "of the tokens or the first (CLS) token; a Normalize module: scaled to length\n"
                   "1). Without modules.json: the last token's, normalised. The texts run at once,\n"
                   "batched into shared forward passes. One vector per line, its numbers\n"
                   "separated by spaces, or JSON with --json.\n\n"
                   "flags:\n"
                   "  --json               {\"pooling\", \"normalized\", \"data\": [{\"index\", \"tokens\",\n"
                   "                       \"embedding\"}]}\n"
                   "  --ids                each TEXT is token ids (\"9707,11,1879\"), not text\n"
                   "%s",
                   model_flags_help);
            return 0;
        }
        if (model_flag(a, &opt)) continue;
        if (is_flag(a, "--json")) no_value(a), json = true;
        else if (is_flag(a, "--ids")) no_value(a), as_ids = true;
        else other_argument(a);
    }
    const char *path = command_model(a, a->argc, "");
    const char **texts = a->operands;
    int n = a->n_operands;
    if (n == 0) usage_error(a, "TEXT is missing");
    Error e;
    Pooling pooling;
    if (pooling_load(&pooling, path, &e) != 0) die("%s", e.msg);
    Model m;
    Tokenizer *tokenizer = checkpoint_load(&m, path, &opt, TOKENIZER_NEEDED, true);
    GenerationConfig settings;
    if (generation_config_load(&settings, path, &m.config, -1, &e) != 0) die("%s", e.msg);
    /* Each input's tokens, checked against the vocabulary and the context. */
    TokenIds *inputs = xcalloc((size_t)n, sizeof *inputs);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(texts[i]);
        char *text = strcmp(texts[i], "-") == 0 ? console_read_all(&len) : NULL;
        if (as_ids) {
            int count, *ids = parse_ids(a, "--ids", text ? text : texts[i], &count);
            checkpoint_check_tokens(&m, ids, (size_t)count);
            inputs[i] = (TokenIds){.ids = ids, .n = (size_t)count, .cap = (size_t)count};
        } else {
            warn_invalid_utf8(tokenizer_encode(tokenizer, text ? text : texts[i], len, ENCODE_PROMPT, &inputs[i]));
        }
        free(text);
        if (inputs[i].n == 0) die("text %d has no tokens: there is nothing to embed", i + 1);
        char advice[160];
        if ((int)inputs[i].n > m.max_context)
            die("text %d is %zu tokens, longer than the context of %d positions: %s", i + 1, inputs[i].n, m.max_context,
                context_advice(advice, sizeof advice, &m, "shorten it"));
    }
    int wave = n < 8 ? n : 8, dim = m.config.dim;
    Engine *engine = engine_start(&m, tokenizer, &(EngineOptions){.slots = wave, .queue = 0, .defaults = settings});
    float *vectors = xmalloc((size_t)n * dim * sizeof(float));
    EmbedOutcome done = embed_run(vectors, engine, inputs, n, wave, dim, &pooling, &settings, NULL, NULL);
    engine_stop(engine);
    engine_free(engine);
    if (done != EMBED_DONE) die("the engine did not run the texts");
    /* One line per vector, or one JSON object. */
    if (json)
        printf("{\"pooling\":\"%s\",\"normalized\":%s,\"data\":[", pooling_name(pooling.mode),
               pooling.normalize ? "true" : "false");
    for (int i = 0; i < n; i++) {
        if (json) printf("%s{\"index\":%d,\"tokens\":%zu,\"embedding\":[", i ? "," : "", i, inputs[i].n);
        for (int d = 0; d < dim; d++) printf("%s%.9g", d == 0 ? "" : json ? "," : " ", vectors[(size_t)i * dim + d]);
        printf(json ? "]}" : "\n");
    }
    if (json) printf("]}\n");
    for (int i = 0; i < n; i++) token_ids_free(&inputs[i]);
    free(inputs);
    free(vectors);
    model_free(&m);
    tokenizer_free(tokenizer);
    return 0;
}

/* ---- template ---- */

static int cmd_template(Args *a) {
    const char *file = NULL, *template_file = NULL;
    int generation_prompt = -1, thinking = -1;
    for (a->i = 1; a->i < a->argc; a->i++) {
        if (is_flag(a, "-h|--help")) {
            printf("usage: run template MODEL [-f CONVERSATION.json] [flags]\n\n"
                   "Prints the text that the checkpoint's chat template makes of a conversation,\n"
                   "exactly as transformers' apply_chat_template(..., tokenize=False) returns it:\n"
                   "what the model reads. The conversation (from FILE, or standard input) is JSON:\n"
                   "a list of messages such as [{\"role\": \"user\", \"content\": \"Hi\"}], or an\n"
                   "object with \"messages\" and the template's other variables, such as\n"
                   "\"add_generation_prompt\" (default false), \"enable_thinking\" or \"tools\".\n\n"
                   "flags:\n"
                   "  -f, --file FILE      read the conversation from FILE ('-': standard input)\n"
                   "  --generation-prompt  end with the start of the assistant's reply\n"
                   "                       (add_generation_prompt=True)\n"
                   "  --think, --no-think  enable_thinking true or false\n"
                   "  --chat-template-file FILE\n"
                   "                       the chat template (Jinja) in FILE instead of the\n"
                   "                       checkpoint's\n"
                   "  -m, --model MODEL    the checkpoint, instead of the first argument\n");
            return 0;
        }
        if (is_flag(a, "-f|--file")) file = flag_value(a);
        else if (is_flag(a, "--chat-template-file")) template_file = flag_value(a);
        else if (is_flag(a, "--generation-prompt")) no_value(a), generation_prompt = 1;
        else if (is_flag(a, "--think")) no_value(a), thinking = 1;
        else if (is_flag(a, "--no-think")) no_value(a), thinking = 0;
        else other_argument(a);
    }
    const char *model = command_model(a, 0, "");
    Error e;
    ChatTemplate t;
    if (chat_template_load_file(&t, model, template_file, &e) != 0) die("%s", e.msg);
    size_t len;
    char *json;
    if (file && strcmp(file, "-") != 0) {
        if (read_file(file, &json, &len, &e) != 0) die("%s", e.msg);
    } else {
        json = console_read_all(&len);
    }
    JsonDoc doc;
    if (json_parse(&doc, json, len, &e) != 0) die("%s: %s", file ? file : "standard input", e.msg);
    char *text = chat_template_render_json(&t, &doc.root, generation_prompt, thinking, &len, &e);
    if (!text) die("%s", e.msg);
    fwrite(text, 1, len, stdout);
    free(text);
    json_free(&doc);
    free(json);
    chat_template_free(&t);
    return 0;
}

/* ---- serve ---- */

/* The name a checkpoint path gives the model: its folder's last part. */
static char *model_name(const char *path) {
    char *name = xstrdup(path);
    size_t n = strlen(name);
    while (n > 1 && name[n - 1] == '/') name[--n] = '\0';
    if (ends_with(name, ".safetensors")) {
        char *slash = strrchr(name, '/');
        if (slash) *slash = '\0';
        else strcpy(name, ".");
    }
    char *slash = strrchr(name, '/');
    memmove(name, slash ? slash + 1 : name, strlen(slash ? slash + 1 : name) + 1);
    return name;
}

static int cmd_serve(Args *a) {
    const char *template_file = NULL;
    ModelOptions opt = {0};
    GenerationFlags flags = no_generation_flags;
    enum { MAX_CORS = 16 };
    const char *cors[MAX_CORS];
    ServerOptions so = {.host = "127.0.0.1", .port = 8080, .parallel = 4, .queue = 16, .max_connections = 64,
                        .max_body = 1 << 20, .timeout = 10, .cors = cors, .drain_timeout = 30};
    for (a->i = 1; a->i < a->argc; a->i++) {
        if (is_flag(a, "-h|--help")) {
            printf("usage: run serve MODEL [flags]\n\n"
                   "Serves the model over HTTP with an OpenAI-style API: POST /v1/chat/completions\n"
                   "(the checkpoint's chat template, as chat uses it), POST /v1/completions,\n"
                   "POST /v1/embeddings (pooled as 'run embed' does), GET /v1/models,\n"
                   "GET /health, POST /tokenize and POST /detokenize; GET / is a chat page for a\n"
                   "browser. Requests run at once in --parallel slots, batched into one forward\n"
                   "pass per step; a slot keeps its KV cache, and a request whose prompt starts\n"
                   "like a slot's last one computes only the rest. One line per request is\n"
                   "logged on standard error; GET /metrics (Prometheus), GET /props. SIGTERM or\n"
                   "SIGINT drains it: no new requests, /health says draining, the replies under\n"
                   "way finish, exit status 0.\n\n"
                   "flags:\n"
                   "  --host ADDR          the address to listen on (default 127.0.0.1: this\n"
                   "                       machine only; 0.0.0.0 for every interface)\n"
                   "  --port N             the port (default 8080; 0: any free port)\n"
                   "  --parallel N         slots: requests generated at once, each with a KV\n"
                   "                       cache of -c positions (default 4)\n"
                   "  --queue N            requests that may wait for a slot; more get 503\n"
                   "                       (default 16)\n"
                   "  --max-connections N  open connections at most; more get 503 (default 64)\n"
                   "  --api-key KEY        require 'Authorization: Bearer KEY' (not on /health)\n"
                   "  --max-body N         bytes of a request body at most (default 1048576)\n"
                   "  --timeout S          seconds a request's headers, then its body, may take\n"
                   "                       to arrive before the connection is dropped (default 10)\n"
                   "  --cors ORIGIN        let web pages from ORIGIN (e.g. https://app.example;\n"
                   "                       '*': any) call the API from a browser; repeatable\n"
                   "                       (default: none)\n"
                   "  --drain-timeout S    after SIGTERM or SIGINT, seconds the replies under way\n"
                   "                       may take to finish before they are ended (default 30);\n"
                   "                       a second signal ends them at once\n"
                   "  --log-format F       the access log on standard error: text (default) or\n"
                   "                       json (one object per line)\n"
                   "  --chat-template-file FILE\n"
                   "                       the chat template (Jinja) in FILE instead of the\n"
                   "                       checkpoint's\n"
                   "The generation flags are the defaults of requests that do not set them:\n");
            printf(generation_flags_help, "-1");
            printf("%s", model_flags_help);
            return 0;
        }
        if (model_flag(a, &opt) || generation_flag(a, &flags)) continue;
        /* gen's and chat's own flags: a request brings its own stop strings
         * and response_format, and the log has a line per request. */
        const char *arg = a->argv[a->i];
        if (reply_flag(a, &flags))
            usage_error(a, "%.*s is not available with serve: it is for gen and chat (a request sets its own \"stop\" "
                        "and \"response_format\"; the log has a line per request)", (int)strcspn(arg, "="), arg);
        if (is_flag(a, "--host")) so.host = flag_value(a);
        else if (is_flag(a, "--port")) so.port = (int)parse_long(a, "--port", flag_value(a), 0, 65535);
        else if (is_flag(a, "--parallel|-np")) so.parallel = (int)parse_long(a, "--parallel", flag_value(a), 1, 256);
        else if (is_flag(a, "--queue")) so.queue = (int)parse_long(a, "--queue", flag_value(a), 0, 1 << 20);
        else if (is_flag(a, "--max-connections")) so.max_connections = (int)parse_long(a, "--max-connections", flag_value(a), 1, 1 << 16);
        else if (is_flag(a, "--api-key")) so.api_key = flag_value(a);
        else if (is_flag(a, "--cors")) {
            if (so.n_cors == MAX_CORS) usage_error(a, "--cors: at most %d origins", MAX_CORS);
            cors[so.n_cors++] = flag_value(a);
        } else if (is_flag(a, "--drain-timeout")) {
            so.drain_timeout = parse_double(a, "--drain-timeout", flag_value(a));
            if (!(so.drain_timeout >= 0 && so.drain_timeout <= 86400)) usage_error(a, "--drain-timeout: expected seconds in [0, 86400]");
        } else if (is_flag(a, "--log-format")) {
            const char *f = flag_value(a);
            if (strcmp(f, "text") != 0 && strcmp(f, "json") != 0) usage_error(a, "--log-format: expected text or json, got '%s'", f);
            so.log_json = strcmp(f, "json") == 0;
        }
        else if (is_flag(a, "--max-body")) so.max_body = (size_t)parse_long(a, "--max-body", flag_value(a), 1, 1 << 30);
        else if (is_flag(a, "--timeout")) {
            so.timeout = parse_double(a, "--timeout", flag_value(a));
            if (so.timeout < 0.01 || so.timeout > 86400) usage_error(a, "--timeout: expected seconds in [0.01, 86400]");
        } else if (is_flag(a, "--chat-template-file")) {
            template_file = flag_value(a);
        } else {
            other_argument(a);
        }
    }
    const char *path = command_model(a, 0, "");
    check_generation_flags(a, &flags);
    Model m;
    Tokenizer *tokenizer = checkpoint_load(&m, path, &opt, TOKENIZER_NEEDED, true);
    so.defaults = generation_settings(path, &m.config, &flags, -1);
    so.seed_given = flags.seed >= 0;
    if (so.api_key && so.api_key[0] == '\0') die("--api-key: the key is empty");
    Error e;
    ChatTemplate template;
    bool has_template = chat_template_load_file(&template, path, template_file, &e) == 0;
    if (!has_template && template_file) die("%s", e.msg);
    if (!has_template) warn("%s; /v1/chat/completions answers 400", e.msg);
    char *name = model_name(path);
    so.model_name = name;
    Pooling pooling;
    Error no_pooling;
    if (pooling_load(&pooling, path, &no_pooling) == 0) so.pooling = &pooling;
    else warn("%s; /v1/embeddings answers 400", no_pooling.msg), so.no_pooling = no_pooling.msg;
    int rc = server_run(&m, tokenizer, has_template ? &template : NULL, &so, &e);
    if (has_template) chat_template_free(&template);
    free(name);
    model_free(&m);
    tokenizer_free(tokenizer);
    if (rc != 0) die("%s", e.msg);
    return 0;
}

/* ---- subcommands ---- */

typedef struct {
    const char *name;
    int (*run)(Args *a);       /* a->argv[0] is the subcommand's name */
    const char *summary;
} Command;

static const Command commands[] = {
    {"info", cmd_info, "print a checkpoint's configuration, tensors and memory needs"},
    {"prepare", cmd_prepare, "write the prepared weights of a format ahead of the first run"},
    {"tok", cmd_tok, "print the token ids of a text"},
    {"detok", cmd_detok, "print the text of token ids"},
    {"fwd", cmd_fwd, "run the forward pass on token ids; print the top next tokens"},
    {"gen", cmd_gen, "continue a prompt: stream generated text"},
    {"chat", cmd_chat, "chat with an instruction-tuned model"},
    {"ppl", cmd_ppl, "the perplexity of a text file (sliding windows)"},
    {"embed", cmd_embed, "print the embedding vector of each text"},
    {"template", cmd_template, "print the text a chat template makes of a conversation"},
    {"serve", cmd_serve, "serve the model over HTTP (an OpenAI-style API)"},
    {"bench", cmd_bench, "time prefill and decoding (tokens per second)"},
    {NULL, NULL, NULL},
};

static void usage(FILE *out) {
    fputs("usage: run COMMAND [ARGS...]\n"
          "\n"
          "Runs Qwen2, Qwen3, Qwen3-MoE, Llama, Mistral and Gemma 3 language models\n"
          "from a Hugging Face checkpoint folder (config.json, *.safetensors,\n"
          "tokenizer.json).\n"
          "\n"
          "commands:\n",
          out);
    for (const Command *c = commands; c->name; c++) fprintf(out, "  %-8s %s\n", c->name, c->summary);
    fputs("\n"
          "MODEL is a checkpoint folder, or a .safetensors file whose folder holds the rest;\n"
          "it is the first argument, or -m/--model MODEL anywhere.\n"
          "'run COMMAND --help' (or 'run help COMMAND') lists a command's flags and their\n"
          "defaults. Exit status: 0 success, 1 runtime error, 2 usage error.\n",
          out);
}

static const Command *find_command(const char *name) {
    for (const Command *c = commands; c->name; c++)
        if (strcmp(name, c->name) == 0) return c;
    die_usage("unknown command '%s' (see 'run --help')", name);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || (strcmp(argv[1], "help") == 0 && argc == 2)) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("run %s\n", RUN_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0) {
        char *help_argv[] = {argv[2], "--help", NULL};
        const char *operands[2];
        Args a = {.command = argv[2], .argc = 2, .argv = help_argv, .operands = operands};
        return find_command(argv[2])->run(&a);
    }
    Error e;
    if (kernels_use(getenv("RUN_KERNELS"), &e) != 0) die("RUN_KERNELS: %s", e.msg);
    const char **operands = xmalloc((size_t)argc * sizeof *operands);
    Args a = {.command = argv[1], .argc = argc - 1, .argv = argv + 1, .operands = operands};
    int status = find_command(argv[1])->run(&a);
    free(operands);
    return status;
}
