/* test_prepared.c - the prepared-weights file: logits from it bit-identical
 * to those of matrices laid out in memory at load (every format, a dense
 * and a mixture-of-experts model), made once and then mapped, made again
 * when the checkpoint changes, damaged files refused before any byte of
 * them is used (and made again), and model_open reading no weight. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../net.h"
#include "../prepared.h"
#include "test.h"

enum { N_TOKENS = 9 };
static const int tokens[N_TOKENS] = {5, 900, 17, 1203, 4, 77, 1500, 2, 311};

/* Logits of every position, and whether the prepared file was made by this
 * load (made_now), mapped (mapped), and the note loading left. */
typedef struct {
    float *logits;
    bool made_now, mapped;
    Error note;
} Run;

static Run run_model(const char *dir, ModelOptions opt) {
    Run r = {0};
    Model m;
    Error e;
    if (model_load(&m, dir, &opt, &e) != 0) {
        CHECK(0, "model_load %s: %s", dir, e.msg);
        return r;
    }
    r.made_now = m.prepared.made_now;
    r.mapped = m.prepared.mapped;
    r.note = m.prepared_note;
    size_t vocab = (size_t)m.config.vocab_size;
    r.logits = xmalloc(N_TOKENS * vocab * sizeof(float));
    KVCache kv;
    kv_cache_init(&kv, &m, 64);
    memcpy(r.logits, forward(&m, &kv, tokens, N_TOKENS, 0, true), N_TOKENS * vocab * sizeof(float));
    kv_cache_free(&kv);
    model_free(&m);
    return r;
}

static size_t logits_bytes(const char *dir) {
    Model m;
    Error e;
    ModelOptions opt = {0};
    if (model_open(&m, dir, &opt, &e) != 0) return 0;
    size_t n = (size_t)m.config.vocab_size * N_TOKENS * sizeof(float);
    model_free(&m);
    return n;
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* In every format: laid out in memory, then the load that makes the file,
 * then one that maps it: the same bits. */
static void test_exact(const char *name, const char *args) {
    const char *dir = test_scratch(name);
    test_checkpoint(dir, args);
    size_t bytes = logits_bytes(dir);
    const DTypeChoice formats[] = {DTYPE_AS_STORED, DTYPE_AS_F32, DTYPE_AS_Q8, DTYPE_AS_Q4};
    const char *suffix[] = {"bf16", "f32", "q8", "q4"};
    for (int f = 0; f < 4; f++) {
        ModelOptions in_memory = {.threads = 2, .dtype = formats[f], .no_prepared = true};
        ModelOptions prepared = {.threads = 3, .dtype = formats[f]};
        char path[1024];
        snprintf(path, sizeof path, "%s/model.run-%s", dir, suffix[f]);
        Run fresh = run_model(dir, in_memory);
        CHECK(!exists(path), "%s %s: --no-prepared writes no file", name, suffix[f]);
        Run made = run_model(dir, prepared);
        CHECK(made.made_now && made.mapped && exists(path), "%s %s: the first load makes %s and maps it", name, suffix[f], path);
        Run mapped = run_model(dir, prepared);
        CHECK(!mapped.made_now && mapped.mapped && !mapped.note.msg[0], "%s %s: the second load maps it (note '%s')", name,
              suffix[f], mapped.note.msg);
        CHECK(fresh.logits && made.logits && memcmp(fresh.logits, made.logits, bytes) == 0,
              "%s %s: logits from the file just made = laid out in memory, bit for bit", name, suffix[f]);
        CHECK(fresh.logits && mapped.logits && memcmp(fresh.logits, mapped.logits, bytes) == 0,
              "%s %s: logits from the mapped file = laid out in memory, bit for bit", name, suffix[f]);
        free(fresh.logits);
        free(made.logits);
        free(mapped.logits);
    }
    /* No temporary file is left behind. */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp-", dir);
    CHECK(system(cmd) != 0, "%s: no temporary file left", name);
}

/* A checkpoint rewritten (here: its modification time) gets a new file. */
static void test_rebuilt(void) {
    const char *dir = test_scratch("prepared-changed");
    test_checkpoint(dir, "--seed 3 --set vocab_size=2048 --shards 2");
    ModelOptions opt = {.threads = 2, .dtype = DTYPE_AS_Q8};
    Run a = run_model(dir, opt), b = run_model(dir, opt);
    CHECK(a.made_now && !b.made_now, "made once, then reused");
    char shard[1024];
    snprintf(shard, sizeof shard, "%s/model-00002-of-00002.safetensors", dir);
    struct timespec times[2] = {{.tv_sec = 1000000000, .tv_nsec = 0}, {.tv_sec = 1000000000, .tv_nsec = 0}};
    CHECK(utimensat(AT_FDCWD, shard, times, 0) == 0, "touched %s", shard);
    Run c = run_model(dir, opt);
    CHECK(c.made_now && !c.note.msg[0], "a changed shard: made again, quietly (note '%s')", c.note.msg);
    size_t bytes = logits_bytes(dir);
    CHECK(a.logits && c.logits && memcmp(a.logits, c.logits, bytes) == 0, "the same logits after");
    free(a.logits);
    free(b.logits);
    free(c.logits);
}

/* ---- damaged files ---- */

static unsigned char *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = xmalloc(*size);
    size_t got = fread(buf, 1, *size, f);
    fclose(f);
    return got == *size ? buf : (free(buf), NULL);
}

static void spit(const char *path, const unsigned char *buf, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, size, f) != size) die("cannot write %s", path);
    fclose(f);
}

static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static uint64_t get64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* One damage: applied to a copy of the good file (of size `size`, which it
 * may change), written in its place; the next load must refuse it with a
 * note that says `want` (or, with want NULL, make it again quietly: out of
 * date), make it again and give the same logits. */
typedef struct {
    const char *what;
    void (*damage)(unsigned char *buf, size_t *size);
    const char *want;
} Damage;

static uint64_t table_of(const unsigned char *b) { return get64(b + 32); }

static void bad_magic(unsigned char *b, size_t *n) { (void)n, b[0] = 'X'; }
static void old_version(unsigned char *b, size_t *n) { (void)n, put32(b + 8, PREPARED_VERSION + 1); }
static void other_format(unsigned char *b, size_t *n) { (void)n, put32(b + 12, WEIGHT_F32); }
static void other_key(unsigned char *b, size_t *n) { (void)n, b[16] ^= 1; }
static void cut_short(unsigned char *b, size_t *n) { (void)b, *n -= 100; }
static void size_lies(unsigned char *b, size_t *n) { put64(b + 40, *n + 4096); }
static void huge_count(unsigned char *b, size_t *n) { (void)n, put64(b + 24, (uint64_t)1 << 60); }
static void table_outside(unsigned char *b, size_t *n) { (void)n, put64(b + 32, (uint64_t)-64); }
static void reserved_set(unsigned char *b, size_t *n) { (void)n, b[60] = 1; }
static void wrong_name(unsigned char *b, size_t *n) { (void)n, b[table_of(b) + 0] = 'X'; }
static void wrong_rows(unsigned char *b, size_t *n) { (void)n, put32(b + table_of(b) + 132, 17); }
static void wrong_bytes(unsigned char *b, size_t *n) { (void)n, put64(b + table_of(b) + 152, 12345); }
static void unaligned(unsigned char *b, size_t *n) { (void)n, put64(b + table_of(b) + 144, 4096 + 8); }
static void past_table(unsigned char *b, size_t *n) { (void)n, put64(b + table_of(b) + 144, table_of(b) & ~(uint64_t)4095); }
static void overlapping(unsigned char *b, size_t *n) { (void)n, put64(b + table_of(b) + 160 + 144, get64(b + table_of(b) + 144)); }
static void name_unended(unsigned char *b, size_t *n) { (void)n, memset(b + table_of(b), 'a', 128); }
static void entry_missing(unsigned char *b, size_t *n) { put64(b + 24, get64(b + 24) - 1), put64(b + 40, *n - 160), *n -= 160; }
static void header_only(unsigned char *b, size_t *n) { (void)b, *n = 40; }

static void test_damaged(void) {
    const char *dir = test_scratch("prepared-damaged");
    test_checkpoint(dir, "--seed 2 --set vocab_size=2048 --set num_key_value_heads=4");
    ModelOptions opt = {.threads = 2, .dtype = DTYPE_AS_Q4};
    Run good = run_model(dir, opt);
    char path[1024];
    snprintf(path, sizeof path, "%s/model.run-q4", dir);
    size_t size, bytes = logits_bytes(dir);
    unsigned char *original = slurp(path, &size);
    CHECK(original != NULL, "read %s", path);
    if (!original) return;
    const Damage damages[] = {
        {"bad magic", bad_magic, "not a prepared-weights file"},
        {"another layout version", old_version, NULL},
        {"another format", other_format, NULL},
        {"another checkpoint", other_key, NULL},
        {"cut short", cut_short, "cut short"},
        {"size field lies", size_lies, "cut short"},
        {"2^60 entries", huge_count, "does not end the file"},
        {"table offset outside", table_outside, "does not end the file"},
        {"reserved byte set", reserved_set, "reserved byte"},
        {"wrong name", wrong_name, "entry 0 is not 'model.embed_tokens.weight'"},
        {"wrong shape", wrong_rows, "is not a q8 matrix"},
        {"wrong byte count", wrong_bytes, "has 12345 bytes"},
        {"unaligned offset", unaligned, "unaligned"},
        {"data over the table", past_table, "outside"},
        {"overlapping entries", overlapping, "outside"},
        {"name without its NUL", name_unended, "entry 0 is not"},
        {"an entry short", entry_missing, "has no matrix for"},
        {"40 bytes", header_only, "not a prepared-weights file"},
    };
    for (size_t i = 0; i < sizeof damages / sizeof damages[0]; i++) {
        const Damage *d = &damages[i];
        unsigned char *copy = xmalloc(size);
        memcpy(copy, original, size);
        size_t n = size;
        d->damage(copy, &n);
        spit(path, copy, n);
        free(copy);
        Run r = run_model(dir, opt);
        if (d->want)
            CHECK(strstr(r.note.msg, d->want) && strstr(r.note.msg, "made again"), "%s: refused, '%s' (note '%s')", d->what,
                  d->want, r.note.msg);
        else
            CHECK(!r.note.msg[0], "%s: out of date, made again quietly (note '%s')", d->what, r.note.msg);
        CHECK(r.made_now && r.mapped, "%s: made again and mapped", d->what);
        CHECK(good.logits && r.logits && memcmp(good.logits, r.logits, bytes) == 0, "%s: the same logits", d->what);
        free(r.logits);
    }
    free(original);
    free(good.logits);
}

/* prepared_check on bytes alone: what the fuzz target drives. */
static void test_check_bytes(void) {
    unsigned char buf[PREPARED_HEADER_BYTES] = "runprep";
    PreparedFile f;
    Error e;
    put32(buf + 8, PREPARED_VERSION);
    put32(buf + 12, WEIGHT_Q8);
    put64(buf + 16, 42);
    put64(buf + 24, 0);
    put64(buf + 32, PREPARED_HEADER_BYTES);
    put64(buf + 40, sizeof buf);
    CHECK(prepared_check(&f, buf, sizeof buf, "x", 42, WEIGHT_Q8, &e) == 0, "an empty table is well-formed (%s)", e.msg);
    Matrix m;
    CHECK(prepared_matrix(&f, "a", WEIGHT_Q8, 16, 32, &m, &e) == -1 && strstr(e.msg, "x: has no matrix for 'a'"),
          "asking past the table: '%s'", e.msg);
    prepared_close(&f);
    CHECK(prepared_check(&f, buf, sizeof buf, "x", 43, WEIGHT_Q8, &e) == 1 && strstr(e.msg, "changed"), "another key: out of date");
    prepared_close(&f);
}

/* model_open (what info runs) touches no page of the weights: after the
 * file's pages are dropped from the page cache, none of its data is back. */
static void test_open_reads_no_weights(void) {
    const char *dir = test_scratch("prepared-open");
    test_checkpoint(dir, "--seed 4 --set vocab_size=2048 --set hidden_size=256 --set intermediate_size=1024 --set num_hidden_layers=4");
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int fd = open(path, O_RDONLY);
    struct stat s;
    CHECK(fd >= 0 && fstat(fd, &s) == 0, "open %s", path);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = ((size_t)s.st_size + page - 1) / page;
    void *map = mmap(NULL, (size_t)s.st_size, PROT_READ, MAP_SHARED, fd, 0);
    unsigned char *resident = xmalloc(pages);
    mincore(map, (size_t)s.st_size, resident);
    size_t before = 0, after = 0;
    for (size_t i = 0; i < pages; i++) before += resident[i] & 1;
    Model m;
    Error e;
    ModelOptions opt = {0};
    CHECK(model_open(&m, dir, &opt, &e) == 0, "model_open: %s", e.msg);
    model_free(&m);
    mincore(map, (size_t)s.st_size, resident);
    for (size_t i = 0; i < pages; i++) after += resident[i] & 1;
    /* The header and the read-ahead around it: at most 64 pages of ~3000. */
    CHECK(before < pages / 2 && after <= before + 64, "model_open read no weights: %zu of %zu pages resident (%zu before)", after,
          pages, before);
    printf("model_open: %zu of %zu pages of the checkpoint resident after (%zu before)\n", after, pages, before);
    free(resident);
    munmap(map, (size_t)s.st_size);
    close(fd);
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    test_check_bytes();
    test_exact("prepared-dense", "--seed 3 --set vocab_size=2048 --set hidden_size=128 --set num_attention_heads=8 "
                                 "--set num_key_value_heads=1 --set num_hidden_layers=3");
    test_exact("prepared-moe", "--set model_type='\"qwen3_moe\"' --set vocab_size=2048 --set head_dim=32 --seed 13 "
                               "--set num_experts=8 --set num_experts_per_tok=2 --set moe_intermediate_size=48 "
                               "--set num_hidden_layers=3 --set mlp_only_layers=[1] --set norm_topk_prob=true");
    test_rebuilt();
    test_damaged();
    test_open_reads_no_weights();
    return test_summary("test_prepared");
}
