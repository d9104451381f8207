/* kernels.c - the public kernels: the choice of a kernel path by CPUID, the
 * split of each product between threads, conversions of 16-bit floats, the
 * conversions and quantizations made at load time, and the formats of the
 * KV cache (how a row is stored). The arithmetic
 * itself is in kernels_plain.c, kernels_avx2.c and kernels_avx512.c. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_path.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define KERNELS_X86 1
#endif

/* Parts per thread a product is cut into: a few, so that a thread that is
 * descheduled or slow leaves its later parts to the others. */
enum { PARTS_PER_THREAD = 4 };

const char *weight_type_name(WeightType t) {
    static const char *names[] = {"f32", "f16", "bf16", "q8", "q4"};
    return names[t];
}

static size_t row_groups(int rows) { return ((size_t)rows + ROW_GROUP - 1) / ROW_GROUP; }

size_t matrix_bytes(const Matrix *m) {
    size_t padded = row_groups(m->rows) * ROW_GROUP * (size_t)m->cols;
    switch (m->type) {
    case WEIGHT_F32:
    case WEIGHT_F16:
    case WEIGHT_BF16:
        if (m->layout == LAYOUT_ROWS) return (size_t)m->rows * (size_t)m->cols * (m->type == WEIGHT_F32 ? 4 : 2);
        return row_groups(m->rows) * group_bytes(m->type, m->cols);
    case WEIGHT_Q8: return padded + padded / QUANT_BLOCK * 2;
    case WEIGHT_Q4: return padded / 2 + padded / QUANT_BLOCK * 2;
    }
    return 0;
}

/* ---- 16-bit floats ---- */

float bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); /* bf16 is the top half of a float */ }

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF, u;
    if (exp == 0x1F) {  /* infinity or NaN */
        u = sign | 0x7F800000 | (mant << 13);
    } else if (exp != 0) {  /* normal: rebias the exponent from 15 to 127 */
        u = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        u = sign;
    } else {  /* subnormal half: normalise it, it is a normal float */
        uint32_t shifts = 0;
        while (!(mant & 0x400)) mant <<= 1, shifts++;
        u = sign | ((113 - shifts) << 23) | ((mant & 0x3FF) << 13);
    }
    return bits_to_f32(u);
}

uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7FFFFFFF) > 0x7F800000) return (uint16_t)((u >> 16) | 0x40);  /* NaN stays quiet NaN */
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

uint16_t f32_to_f16(float f) {
    uint32_t u = f32_to_bits(f), sign = (u >> 16) & 0x8000;
    u &= 0x7FFFFFFF;
    if (u > 0x7F800000) return (uint16_t)(sign | 0x7E00);  /* NaN */
    if (u >= 0x477FF000) return (uint16_t)(sign | 0x7C00); /* 65520 and up round to infinity */
    if (u < 0x38800000)                                    /* below 2^-14: a multiple of 2^-24 */
        return (uint16_t)(sign | (uint32_t)nearbyintf(bits_to_f32(u) * 16777216.0f));
    /* Normal: rebias the exponent, round 23 mantissa bits to 10, to even. */
    return (uint16_t)(sign | ((u + 0xFFF + ((u >> 13) & 1) - 0x38000000) >> 13));
}

/* ---- the kernel path ---- */

#ifdef KERNELS_X86
/* The CPU's and the operating system's support: a path needs the
 * instructions and the OS saving the registers they use (XCR0). */
static bool cpu_has(int path) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
    if (!osxsave || !avx || !fma || !f16c) return false;
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & 0x6) != 0x6) return false;  /* XMM and YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    bool avx2 = b & (1u << 5), avx512f = b & (1u << 16), avx512bw = b & (1u << 30), avx512vl = b & (1u << 31),
         vnni = c & (1u << 11);
    if (path == 1) return avx2;
    unsigned a1 = 0, b1, c1, d1;
    __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1);
    bool bf16 = a1 & (1u << 5), zmm_state = (xcr0_lo & 0xE6) == 0xE6;
    return avx2 && avx512f && avx512bw && avx512vl && vnni && bf16 && zmm_state;
}
#endif

static const KernelPath *paths(int i) {
#ifdef KERNELS_X86
    static const KernelPath *const all[KERNEL_PATHS] = {&kernels_plain, &kernels_avx2, &kernels_avx512};
#else
    static const KernelPath *const all[KERNEL_PATHS] = {&kernels_plain, NULL, NULL};
#endif
    return all[i];
}

const char *kernel_path_name(int i) {
    static const char *names[KERNEL_PATHS] = {"plain", "avx2", "avx512"};
    return names[i];
}

bool kernel_path_supported(int i) {
    if (i == 0) return true;
#ifdef KERNELS_X86
    return paths(i) != NULL && cpu_has(i);
#else
    return false;
#endif
}

static _Atomic(const KernelPath *) current;

int kernels_use(const char *name, Error *e) {
    if (!name || !*name) {
        int best = 0;
        for (int i = 0; i < KERNEL_PATHS; i++)
            if (kernel_path_supported(i)) best = i;
        atomic_store(&current, paths(best));
        return 0;
    }
    for (int i = 0; i < KERNEL_PATHS; i++) {
        if (strcmp(name, kernel_path_name(i)) != 0) continue;
        if (!kernel_path_supported(i)) return fail(e, "kernel path %s: this CPU cannot run it", name);
        atomic_store(&current, paths(i));
        return 0;
    }
    return fail(e, "kernel path '%s' is unknown: choose plain, avx2 or avx512", name);
}

static const KernelPath *path(void) {
    const KernelPath *p = atomic_load(&current);
    if (p) return p;
    if (kernels_use(getenv("RUN_KERNELS"), NULL) != 0) kernels_use(NULL, NULL);
    return atomic_load(&current);
}

const char *kernels_in_use(void) { return path()->name; }

Bf16Dot bf16_dot_setting(void) {
    static _Atomic int setting; /* 0: not read yet */
    int s = atomic_load(&setting);
    if (s == 0) {
        const char *env = getenv("RUN_BF16_DOT");
        s = env && strcmp(env, "instruction") == 0 ? BF16_DOT_INSTRUCTION
            : env && strcmp(env, "fma") == 0       ? BF16_DOT_FMA
                                                   : BF16_DOT_FASTER;
        atomic_store(&setting, s);
    }
    return (Bf16Dot)s;
}

/* ---- products split between threads ---- */

/* Rows [*r0, *r1) of part `part` of n_parts: whole row groups. */
static void part_rows(int rows, int part, int n_parts, int *r0, int *r1) {
    size_t groups = row_groups(rows);
    size_t a = groups * (size_t)part / (size_t)n_parts * ROW_GROUP, b = groups * (size_t)(part + 1) / (size_t)n_parts * ROW_GROUP;
    *r0 = (int)(a < (size_t)rows ? a : (size_t)rows);
    *r1 = (int)(b < (size_t)rows ? b : (size_t)rows);
}

static int parts_for(int rows, ThreadPool *pool) {
    size_t groups = row_groups(rows), parts = (size_t)pool_size(pool) * PARTS_PER_THREAD;
    return (int)(groups < parts ? groups : parts);
}

/* One product of a batch with its activations prepared: its row groups are
 * groups first_group .. of the batch's. */
typedef struct {
    const Matrix *w;
    const float *x;             /* [n_tokens][cols] */
    const float *x_tiles;       /* f32, f16, bf16: x in tiles (kernels_path.h), rounded to bf16 for bf16 arithmetic */
    QuantizedRows xq;           /* q8, q4: x quantized */
    int n_tokens;
    float *out;
    size_t first_group;
    bool shares;                /* its activations are the previous product's */
} Prepared;

typedef struct {
    const KernelPath *path;
    Prepared *products;
    int n;
    size_t groups;              /* row groups of all the products */
    size_t tiles_to_prepare;    /* token tiles whose activations are prepared */
} MatmulJob;

static bool quantized(const Matrix *w) { return w->type == WEIGHT_Q8 || w->type == WEIGHT_Q4; }
static bool bf16_math(const Matrix *w) { return w->type == WEIGHT_BF16 && w->math == MATH_BF16; }

/* Where part `part` of n_parts of a batch's row groups starts: at
 * groups * (1 - ((n_parts - part) / n_parts)^2), so that parts shrink
 * from the first to the last (part i holds 2(n - i) - 1 of n^2 shares).
 * The threads take parts in order, so the last ones taken, as the threads
 * run out of work, are small, and a thread that finishes early waits for
 * a small part, not an average one. */
static size_t shrinking_boundary(size_t groups, int part, int n_parts) {
    size_t left = (size_t)(n_parts - part), n = (size_t)n_parts;
    return groups - groups * left * left / (n * n);
}

/* Row groups [g0, g1) of the batch: each product's share of them. */
static void matmul_part(void *arg, int part, int n_parts) {
    const MatmulJob *job = arg;
    size_t g0 = shrinking_boundary(job->groups, part, n_parts), g1 = shrinking_boundary(job->groups, part + 1, n_parts);
    for (int i = 0; i < job->n && g0 < g1; i++) {
        const Prepared *p = &job->products[i];
        size_t end = p->first_group + row_groups(p->w->rows);
        if (g0 >= end) continue;
        size_t a = (g0 - p->first_group) * ROW_GROUP, b = ((g1 < end ? g1 : end) - p->first_group) * ROW_GROUP;
        int r0 = (int)a, r1 = (int)(b < (size_t)p->w->rows ? b : (size_t)p->w->rows);
        if (quantized(p->w))
            job->path->matmul_quant(p->out, &p->xq, p->w, p->n_tokens, r0, r1);
        else if (bf16_math(p->w))
            job->path->matmul_bf16(p->out, p->x_tiles, p->w, p->n_tokens, r0, r1);
        else
            job->path->matmul_float(p->out, p->x_tiles, p->w, p->n_tokens, r0, r1);
        g0 = end;
    }
}

/* Bits of one float rounded to bf16 (for --math bf16), kept as a float. */
static float rounded_to_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }

/* Tile `tile` of product p's activations (tokens TOKEN_TILE * tile ..),
 * made ready for its format: quantized token by token, or written into
 * its [k][w] tile column by column, so that the writes run in order and
 * the tile's w rows are read side by side. */
static void prepare_tile(const KernelPath *path, const Prepared *p, int tile) {
    int n = p->n_tokens, K = p->w->cols, first = tile * TOKEN_TILE, w = tile_width(n, first);
    const float *x = p->x + (size_t)first * K;
    if (!p->x_tiles) {
        for (int t = first; t < first + w; t++) {
            size_t b = (size_t)t * (K / QUANT_BLOCK);
            path->quantize_row((int8_t *)p->xq.q + (size_t)t * K, (float *)p->xq.scale + b, (int32_t *)p->xq.sum + b,
                               p->x + (size_t)t * K, K);
        }
    } else if (bf16_math(p->w) && path->bf16_pairs && path->bf16_pairs()) {
        /* Column pair c of each token as one word: the even column's bf16
         * in the low half, the odd one's (0 past the end) in the high. */
        uint32_t *words = (uint32_t *)p->x_tiles + (size_t)first * K;
        for (int c = 0; c < (K + 1) / 2; c++)
            for (int j = 0; j < w; j++) {
                const float *xt = x + (size_t)j * K;
                uint32_t second = 2 * c + 1 < K ? f32_to_bf16(xt[2 * c + 1]) : 0;
                words[(size_t)c * w + j] = (uint32_t)f32_to_bf16(xt[2 * c]) | second << 16;
            }
    } else {
        float *tiles = (float *)p->x_tiles + (size_t)first * K;
        bool round = bf16_math(p->w);
        for (int k = 0; k < K; k++)
            for (int j = 0; j < w; j++) {
                float v = x[(size_t)j * K + k];
                tiles[(size_t)k * w + j] = round ? rounded_to_bf16(v) : v;
            }
    }
}

static int tiles_of(int n_tokens) { return (n_tokens + TOKEN_TILE - 1) / TOKEN_TILE; }

/* The activations' preparation: the token tiles of every product that
 * prepares its own split evenly between the parts. */
static void prepare_part(void *arg, int part, int n_parts) {
    const MatmulJob *job = arg;
    size_t from = job->tiles_to_prepare * (size_t)part / (size_t)n_parts, to = job->tiles_to_prepare * (size_t)(part + 1) / (size_t)n_parts;
    size_t first = 0;  /* the first of the product's tiles among all tiles to prepare */
    for (int i = 0; i < job->n && first < to; i++) {
        const Prepared *p = &job->products[i];
        bool own = !p->shares && (quantized(p->w) || p->x_tiles != p->x);
        if (!own) continue;
        size_t tiles = (size_t)tiles_of(p->n_tokens);
        for (size_t t = from > first ? from : first; t < to && t < first + tiles; t++) prepare_tile(job->path, p, (int)(t - first));
        first += tiles;
    }
}

/* How a product's activations are prepared: 0 quantized, 1 fp32 tiles,
 * 2 tiles rounded to bf16. Products with the same x, tokens, width and kind
 * share one preparation. */
static int preparation_kind(const Matrix *w) { return quantized(w) ? 0 : bf16_math(w) ? 2 : 1; }

/* Bytes of n prepared activations for w (scales and sums, then the int8
 * values; or floats), rounded up to whole cache lines so that the next
 * product's start aligned. */
static size_t activation_bytes(const Matrix *w, size_t n) {
    size_t bytes = quantized(w) ? n / QUANT_BLOCK * (sizeof(float) + sizeof(int32_t)) + n : n * sizeof(float);
    return (bytes + 63) / 64 * 64;
}

/* Lays out the batch and prepares the activations each format needs in the
 * pool's scratch memory; one token's fp32 tile is x itself. */
static void prepare(MatmulJob *job, const MatmulProduct *products, ThreadPool *pool) {
    size_t bytes = 0, values = 0;
    for (int i = 0; i < job->n; i++) {
        const MatmulProduct *in = &products[i];
        Prepared *p = &job->products[i], *prev = i > 0 ? &job->products[i - 1] : NULL;
        if (!quantized(in->w) && in->w->layout != LAYOUT_GROUPED)
            die("matmul: a %s matrix in the row-major layout of a file (matrix_grouped makes the product's layout)",
                weight_type_name(in->w->type));
        *p = (Prepared){.w = in->w, .x = in->x, .n_tokens = in->n_tokens, .out = in->out, .first_group = job->groups};
        job->groups += row_groups(in->w->rows);
        p->shares = prev && prev->x == in->x && prev->n_tokens == in->n_tokens && prev->w->cols == in->w->cols &&
                    preparation_kind(prev->w) == preparation_kind(in->w);
        size_t n = (size_t)in->n_tokens * (size_t)in->w->cols;
        if (p->shares || (!quantized(in->w) && in->n_tokens == 1 && !bf16_math(in->w))) continue;
        bytes += activation_bytes(in->w, n);
        values += n;
        job->tiles_to_prepare += (size_t)tiles_of(in->n_tokens);
    }
    char *buffer = bytes ? pool_scratch(pool, bytes) : NULL;
    for (int i = 0; i < job->n; i++) {
        Prepared *p = &job->products[i];
        size_t n = (size_t)p->n_tokens * (size_t)p->w->cols;
        if (p->shares) {
            p->x_tiles = job->products[i - 1].x_tiles;
            p->xq = job->products[i - 1].xq;
        } else if (quantized(p->w)) {
            size_t blocks = n / QUANT_BLOCK;
            p->xq.scale = (float *)buffer;
            p->xq.sum = (int32_t *)(p->xq.scale + blocks);
            p->xq.q = (int8_t *)(p->xq.sum + blocks);
            buffer += activation_bytes(p->w, n);
        } else if (p->n_tokens == 1 && !bf16_math(p->w)) {
            p->x_tiles = p->x;
        } else {
            p->x_tiles = (float *)buffer;
            buffer += activation_bytes(p->w, n);
        }
    }
    size_t parts = job->tiles_to_prepare < (size_t)pool_size(pool) ? job->tiles_to_prepare : (size_t)pool_size(pool);
    if (pool_parts_for_values(pool, values) == 1) parts = 1;
    pool_run_parts(pool, (int)parts, prepare_part, job);
}

/* The batch's row groups split into parts between the threads. */
static void run_products(const KernelPath *path, const MatmulProduct *products, int n, ThreadPool *pool) {
    Prepared small[4];
    MatmulJob job = {.path = path, .products = n <= 4 ? small : xmalloc((size_t)n * sizeof(Prepared)), .n = n};
    prepare(&job, products, pool);
    size_t parts = (size_t)pool_size(pool) * PARTS_PER_THREAD;
    pool_run_parts(pool, (int)(job.groups < parts ? job.groups : parts), matmul_part, &job);
    if (job.products != small) free(job.products);
}

void matmul_batch(const MatmulProduct *products, int n, ThreadPool *pool) { run_products(path(), products, n, pool); }

void matmul(float *out, const float *x, const Matrix *w, int n_tokens, ThreadPool *pool) {
    MatmulProduct product = {.out = out, .x = x, .w = w, .n_tokens = n_tokens};
    run_products(path(), &product, 1, pool);
}

void matmul_plain(float *out, const float *x, const Matrix *w, int n_tokens) {
    ThreadPool *one = pool_new(1);
    MatmulProduct product = {.out = out, .x = x, .w = w, .n_tokens = n_tokens};
    run_products(&kernels_plain, &product, 1, one);
    pool_free(one);
}

void attend(float *out, const float *q, size_t ld, int n_q, int pos, const void *keys, const void *values, int group,
            int hd, const AttendSpec *spec, float *scratch) {
    path()->attend(out, q, ld, n_q, pos, keys, values, group, hd, spec, scratch);
}

size_t attend_scratch_floats(int group, int n_q, int hd) {
    /* Per query vector the running maximum and sum and a tile of scores;
     * then a tile of keys and one of values as floats (attend_tiles). */
    return attend_tile_offset(group, n_q) + 2 * (size_t)ATTEND_KEY_BLOCK * (size_t)hd;
}

/* ---- the KV cache's formats ---- */

const char *kv_type_name(KVType t) {
    static const char *names[] = {"f32", "bf16", "q8_0"};
    return names[t];
}

int kv_type_parse(KVType *t, const char *name, Error *e) {
    for (int i = 0; i < KV_TYPES; i++)
        if (strcmp(name, kv_type_name((KVType)i)) == 0) {
            *t = (KVType)i;
            return 0;
        }
    return fail(e, "'%s' is not a KV cache type here: the types are f32 (exact), bf16 and q8_0", name);
}

bool kv_type_fits(KVType t, int hd) { return t != KV_Q8_0 || hd % QUANT_BLOCK == 0; }

size_t kv_row_bytes(KVType t, int hd) {
    switch (t) {
    case KV_BF16: return (size_t)hd * 2;
    case KV_Q8_0: return (size_t)hd / QUANT_BLOCK * Q8_0_BLOCK_BYTES;
    default: return (size_t)hd * 4;
    }
}

/* One block of llama.cpp's q8_0 (see kernels.h). */
static void store_q8_0_block(uint8_t *block, const float *x) {
    float amax = 0;
    for (int j = 0; j < QUANT_BLOCK; j++) amax = fmaxf(amax, fabsf(x[j]));
    uint16_t half = f32_to_f16(amax / 127.0f);
    if ((half & 0x7C00) == 0x7C00) half = 0x7BFF;  /* too large for an f16: its largest */
    float d = f16_to_f32(half);
    memcpy(block, &half, 2);
    for (int j = 0; j < QUANT_BLOCK; j++) {
        float q = d > 0 ? fminf(fmaxf(nearbyintf(x[j] / d), -127.0f), 127.0f) : 0;
        block[2 + j] = (uint8_t)(int8_t)q;
    }
}

void kv_row_store(void *row, KVType t, const float *x, int hd) {
    switch (t) {
    case KV_F32: memcpy(row, x, (size_t)hd * sizeof(float)); break;
    case KV_BF16:
        for (int i = 0; i < hd; i++) ((uint16_t *)row)[i] = f32_to_bf16(x[i]);
        break;
    case KV_Q8_0:
        for (int b = 0; b < hd / QUANT_BLOCK; b++) store_q8_0_block((uint8_t *)row + (size_t)b * Q8_0_BLOCK_BYTES, x + b * QUANT_BLOCK);
        break;
    }
}

void kv_rows_load(float *out, KVType t, const void *rows, size_t n) { kernels_plain.kv_load(out, t, rows, n); }

void softmax(float *x, int n) { path()->softmax(x, n); }

typedef struct {
    void (*gated)(float *gate, const float *up, size_t n);  /* a path's swiglu or gelu */
    float *gate;
    const float *up;
    size_t n;
} GatedJob;

/* Parts start at multiples of 16, so that each value is computed the same
 * way (in the same lane of a vector) whatever the split. */
static void gated_part(void *arg, int part, int n_parts) {
    const GatedJob *job = arg;
    size_t groups = (job->n + 15) / 16, from = groups * part / n_parts * 16, to = groups * (part + 1) / n_parts * 16;
    if (to > job->n) to = job->n;
    if (from < to) job->gated(job->gate + from, job->up + from, to - from);
}

static void run_gated(GatedJob *job, ThreadPool *pool) {
    pool_run_parts(pool, pool_parts_for_values(pool, job->n), gated_part, job);
}

void swiglu(float *gate, const float *up, size_t n, ThreadPool *pool) {
    GatedJob job = {path()->swiglu, gate, up, n};
    run_gated(&job, pool);
}

void gelu_tanh_gate(float *gate, const float *up, size_t n, ThreadPool *pool) {
    GatedJob job = {path()->gelu, gate, up, n};
    run_gated(&job, pool);
}

/* ---- conversions made at load time ---- */

/* Where weight (r, k) is in a f32, f16 or bf16 matrix of either layout. */
static size_t stored_index(const Matrix *w, int r, int k) {
    return w->layout == LAYOUT_ROWS ? (size_t)r * (size_t)w->cols + (size_t)k : grouped_index(w, r, k);
}

/* W[r][k] of any matrix, in either layout, as a float. */
static float weight_at(const Matrix *w, int r, int k) {
    size_t i = quantized(w) ? 0 : stored_index(w, r, k);
    switch (w->type) {
    case WEIGHT_F32: return ((const float *)w->data)[i];
    case WEIGHT_F16: return f16_to_f32(((const uint16_t *)w->data)[i]);
    case WEIGHT_BF16: return bf16_to_f32(((const uint16_t *)w->data)[i]);
    case WEIGHT_Q8:
    case WEIGHT_Q4: return (float)quant_value(w, r, k) * quant_scale(w, r, k / QUANT_BLOCK);
    }
    return 0;
}

void matrix_row(float *out, const Matrix *w, int row) {
    for (int k = 0; k < w->cols; k++) out[k] = weight_at(w, row, k);
}

typedef struct {
    const Matrix *src;
    Matrix *dst;
} ConvertJob;

/* Each weight of the parts' rows copied to its place in dst's grouped
 * layout (and a bf16 row's missing last column set to 0): as stored, or
 * widened when dst is f32. */
static void to_grouped_part(void *arg, int part, int n_parts) {
    ConvertJob *job = arg;
    const Matrix *src = job->src, *dst = job->dst;
    int r0, r1, K = src->cols;
    part_rows(src->rows, part, n_parts, &r0, &r1);
    for (int r = r0; r < r1; r++) {
        if (dst->type == WEIGHT_F32) {
            float *to = (float *)dst->owned + grouped_index(dst, r, 0);
            for (int k = 0; k < K; k++) to[(size_t)k * ROW_GROUP] = weight_at(src, r, k);
        } else {  /* f16 or bf16 as a file stores them: the common case, kept quick */
            const uint16_t *from = (const uint16_t *)src->data + (size_t)r * (size_t)K;
            uint16_t *to = (uint16_t *)dst->owned + grouped_index(dst, r, 0);
            if (dst->type == WEIGHT_BF16)
                for (int k = 0; k < K + K % 2; k++) to[(size_t)(k / 2) * 2 * ROW_GROUP + (size_t)(k % 2)] = k < K ? from[k] : 0;
            else
                for (int k = 0; k < K; k++) to[(size_t)k * ROW_GROUP] = from[k];
        }
    }
}

/* A grouped matrix of `type` filled from src; the padding rows of the last
 * group are 0. */
static Matrix grouped_copy(const Matrix *src, WeightType type, ThreadPool *pool) {
    Matrix m = {type, src->rows, src->cols, NULL, NULL, NULL, src->math, LAYOUT_GROUPED};
    size_t bytes = matrix_bytes(&m), last_group = group_bytes(type, src->cols);
    m.owned = xmalloc_huge(bytes);
    memset((char *)m.owned + bytes - last_group, 0, last_group);
    m.data = m.owned;
    ConvertJob job = {src, &m};
    pool_run_parts(pool, parts_for(src->rows, pool), to_grouped_part, &job);
    return m;
}

Matrix matrix_grouped(const Matrix *src, ThreadPool *pool) {
    if (src->layout != LAYOUT_ROWS || src->type == WEIGHT_Q8 || src->type == WEIGHT_Q4)
        die("matrix_grouped: a %s matrix that is grouped already", weight_type_name(src->type));
    return grouped_copy(src, src->type, pool);
}

Matrix matrix_to_f32(const Matrix *src, ThreadPool *pool) {
    Matrix m = grouped_copy(src, WEIGHT_F32, pool);
    m.math = MATH_EXACT;
    return m;
}

/* x rounded to the nearest integer, ties to even, for |x| < 2^22: adding
 * 1.5 * 2^23 leaves no bits below the units (inline where nearbyintf would
 * be a call on a baseline x86-64 build). */
static float round_even(float x) { return (x + 12582912.0f) - 12582912.0f; }

/* x limited to [lo, hi] (comparisons: fminf and fmaxf are calls there too). */
static float clamp(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

/* Where byte i (0..3) of the 4-byte word of row `lane`, step k4, block b,
 * group g is, in a layout of `steps` steps per block. */
static size_t quant_byte(size_t g, size_t blocks, size_t b, int steps, int k4, int lane, int i) {
    return ((g * blocks + b) * (size_t)steps + (size_t)k4) * 64 + (size_t)lane * 4 + (size_t)i;
}

/* Squared error of the block rounded with scale d to integers in [lo, hi],
 * and those integers in q. */
static float quant_try(const float *w, float d, float lo, float hi, int8_t q[QUANT_BLOCK]) {
    float inverse = d != 0 ? 1.0f / d : 0, v[QUANT_BLOCK], err[8] = {0};
    for (int j = 0; j < QUANT_BLOCK; j++) v[j] = round_even(clamp(w[j] * inverse, lo, hi));
    for (int j = 0; j < QUANT_BLOCK; j++) {  /* 8 partial sums: independent adds */
        float diff = w[j] - v[j] * d;
        err[j % 8] += diff * diff;
    }
    for (int j = 0; j < QUANT_BLOCK; j++) q[j] = (int8_t)v[j];
    return ((err[0] + err[1]) + (err[2] + err[3])) + ((err[4] + err[5]) + (err[6] + err[7]));
}

/* A block's scale: of value / divisor for each candidate divisor, rounded
 * to f16, the one whose rounding of the block has the least squared error
 * (the first on ties); its integers in q. */
static uint16_t best_scale(const float *w, float value, const float *divisors, int n, float lo, float hi,
                           int8_t q[QUANT_BLOCK]) {
    uint16_t best = 0;
    float best_err = INFINITY;
    int8_t trial[QUANT_BLOCK];
    for (int c = 0; c < n; c++) {
        uint16_t h = f32_to_f16(value / divisors[c]);
        float err = quant_try(w, f16_to_f32(h), lo, hi, trial);
        if (c == 0 || err < best_err) best_err = err, best = h, memcpy(q, trial, QUANT_BLOCK);
    }
    return best;
}

/* q8: value max|w|; divisor 127 maps it to the end of -127..127 (a search
 * as q4's gave 3.7% less RMS error on Gaussian weights, but no better
 * logits: the rounding of the activations dominates). q4: value M, the weight of largest magnitude
 * with its sign; -8 maps it to the end of -8..7 that is one step longer
 * (llama.cpp's Q4_0), the others trade clipping M for finer steps (3.9%
 * less RMS error than -8 alone). */
static const float q8_divisors[] = {127.0f};
static const float q4_divisors[] = {-8.0f, -7.5f, -8.5f, -9.0f};

static void quantize_q8_block(const float *w, uint8_t *data, uint16_t *scale, size_t g, size_t blocks, size_t b, int lane) {
    float amax = 0;
    for (int j = 0; j < QUANT_BLOCK; j++) amax = fabsf(w[j]) > amax ? fabsf(w[j]) : amax;
    int8_t q[QUANT_BLOCK] = {0};
    *scale = best_scale(w, amax, q8_divisors, sizeof q8_divisors / sizeof q8_divisors[0], -127, 127, q);
    for (int j = 0; j < QUANT_BLOCK; j++) data[quant_byte(g, blocks, b, 8, j / 4, lane, j % 4)] = (uint8_t)q[j];
}

static void quantize_q4_block(const float *w, uint8_t *data, uint16_t *scale, size_t g, size_t blocks, size_t b, int lane) {
    float max = 0;
    for (int j = 0; j < QUANT_BLOCK; j++)
        if (fabsf(w[j]) > fabsf(max)) max = w[j];
    int8_t q[QUANT_BLOCK] = {0};
    *scale = best_scale(w, max, q4_divisors, sizeof q4_divisors / sizeof q4_divisors[0], -8, 7, q);
    for (int j = 0; j < 16; j++)
        data[quant_byte(g, blocks, b, 4, j / 4, lane, j % 4)] = (uint8_t)((q[j] + 8) | (q[j + 16] + 8) << 4);
}

static void to_quant_part(void *arg, int part, int n_parts) {
    ConvertJob *job = arg;
    const Matrix *src = job->src;
    Matrix *dst = job->dst;
    int r0, r1;
    part_rows(src->rows, part, n_parts, &r0, &r1);
    size_t blocks = (size_t)src->cols / QUANT_BLOCK;
    float *row = xmalloc((size_t)src->cols * sizeof(float));
    uint8_t *data = dst->owned;
    uint16_t *scales = (uint16_t *)dst->scales;
    for (int r = r0; r < r1; r++) {
        matrix_row(row, src, r);
        size_t g = (size_t)r / ROW_GROUP;
        int lane = r % ROW_GROUP;
        for (size_t b = 0; b < blocks; b++) {
            uint16_t *scale = scales + (g * blocks + b) * ROW_GROUP + (size_t)lane;
            if (dst->type == WEIGHT_Q8) quantize_q8_block(row + b * QUANT_BLOCK, data, scale, g, blocks, b, lane);
            else quantize_q4_block(row + b * QUANT_BLOCK, data, scale, g, blocks, b, lane);
        }
    }
    free(row);
}

/* The bytes of a quantized matrix's weights, before its scales. */
static size_t quant_data_bytes(WeightType type, int rows, int cols) {
    size_t padded = row_groups(rows) * ROW_GROUP * (size_t)cols;
    return type == WEIGHT_Q8 ? padded : padded / 2;
}

/* One allocation, zeroed (the padding rows of the last group stay 0 weights
 * with 0 scales): the weights, then the scales. */
static Matrix quantize(const Matrix *src, WeightType type, ThreadPool *pool) {
    Matrix m = {type, src->rows, src->cols, NULL, NULL, NULL, MATH_EXACT, LAYOUT_GROUPED};
    size_t bytes = matrix_bytes(&m), data_bytes = quant_data_bytes(type, src->rows, src->cols);
    m.owned = xmalloc_huge(bytes);
    memset(m.owned, 0, bytes);
    if (type == WEIGHT_Q4) memset(m.owned, 0x88, data_bytes);  /* nibble 8 is 0 */
    m.data = m.owned;
    m.scales = (uint16_t *)((uint8_t *)m.owned + data_bytes);
    ConvertJob job = {src, &m};
    pool_run_parts(pool, parts_for(src->rows, pool), to_quant_part, &job);
    return m;
}

Matrix matrix_to_q8(const Matrix *src, ThreadPool *pool) { return quantize(src, WEIGHT_Q8, pool); }
Matrix matrix_to_q4(const Matrix *src, ThreadPool *pool) { return quantize(src, WEIGHT_Q4, pool); }

void matrix_free(Matrix *m) {
    free(m->owned);
    m->owned = NULL;
}

Matrix matrix_view(WeightType type, int rows, int cols, const void *bytes) {
    Matrix m = {type, rows, cols, bytes, NULL, NULL, MATH_EXACT, LAYOUT_GROUPED};
    if (type == WEIGHT_Q8 || type == WEIGHT_Q4) m.scales = (const uint16_t *)((const uint8_t *)bytes + quant_data_bytes(type, rows, cols));
    return m;
}
