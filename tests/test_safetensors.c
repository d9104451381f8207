/* test_safetensors.c - header validation on well-formed and broken files:
 * every broken one must be refused with a message naming the problem, before
 * any offset from it is used. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../safetensors.h"
#include "test.h"

/* Stands for "the header's real length" in image(). */
#define ACTUAL_LENGTH (~0ull)

/* A file image: the 8-byte little-endian header length, the header padded
 * with spaces to a multiple of 8 (as writers do, so the data is aligned),
 * then data_len bytes of data (0, 1, 2, ...). `declared` overrides the length. */
static unsigned char *image(const char *header, size_t data_len, unsigned long long declared, size_t *size) {
    size_t n = strlen(header), padded = (n + 7) / 8 * 8;
    *size = 8 + padded + data_len;
    unsigned char *buf = malloc(*size);
    unsigned long long len = declared == ACTUAL_LENGTH ? padded : declared;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(len >> (8 * i));
    memcpy(buf + 8, header, n);
    memset(buf + 8 + n, ' ', padded - n);
    for (size_t i = 0; i < data_len; i++) buf[8 + padded + i] = (unsigned char)i;
    return buf;
}

static void refuse(const char *what, const char *header, size_t data_len, unsigned long long declared, const char *want) {
    size_t size;
    unsigned char *buf = image(header, data_len, declared, &size);
    SafeTensors st = {0};
    Error e = {{0}};
    int rc = st_add_file(&st, buf, size, "bad.safetensors", &e);
    CHECK(rc == -1, "%s: refused", what);
    CHECK(strstr(e.msg, want) != NULL, "%s: error says '%s' (got '%s')", what, want, e.msg);
    CHECK(strncmp(e.msg, "bad.safetensors: ", 17) == 0, "%s: error names the file", what);
    st_close(&st);
    free(buf);
}

static void test_valid(void) {
    /* 8 bytes of padding in the header keep the data 8-aligned. */
    const char *h = "{\"__metadata__\":{\"format\":\"pt\"},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[4,20]},"
                    "\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                    "\"empty\":{\"dtype\":\"F16\",\"shape\":[0,5],\"data_offsets\":[20,20]}}";
    size_t size;
    unsigned char *buf = image(h, 20, ACTUAL_LENGTH, &size);
    size_t data_offset = 8 + (strlen(h) + 7) / 8 * 8;
    SafeTensors st = {0};
    Error e;
    CHECK(st_add_file(&st, buf, size, "ok.safetensors", &e) == 0, "valid file accepted");
    CHECK(st.n_tensors == 3, "three tensors (metadata skipped)");
    const Tensor *a = st_find(&st, "a"), *b = st_find(&st, "b"), *z = st_find(&st, "empty");
    CHECK(a && a->dtype == DTYPE_BF16 && a->ndim == 1 && a->shape[0] == 2 && a->nbytes == 4, "tensor a");
    CHECK(a && a->data == buf + data_offset, "tensor a's data starts the data area");
    CHECK(b && b->dtype == DTYPE_F32 && b->numel == 4 && b->data == buf + data_offset + 4, "tensor b at offset 4");
    CHECK(z && z->numel == 0 && z->nbytes == 0, "zero-sized tensor");
    CHECK(st_find(&st, "c") == NULL && st_find(&st, "") == NULL, "unknown names not found");
    st_close(&st);
    free(buf);
}

static void test_broken(void) {
    const char *one = "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t size;
    unsigned char *buf = image(one, 8, ACTUAL_LENGTH, &size);
    SafeTensors st = {0};
    Error e = {{0}};
    CHECK(st_add_file(&st, buf, 7, "bad.safetensors", &e) == -1 && strstr(e.msg, "too short"), "7-byte file refused");
    for (size_t cut = 8; cut < size; cut++) {  /* every truncation point */
        SafeTensors s2 = {0};
        int rc = st_add_file(&s2, buf, cut, "bad.safetensors", &e);
        CHECK(rc == -1, "file cut at %zu of %zu bytes refused", cut, size);
        st_close(&s2);
    }
    free(buf);

    refuse("header length 0", one, 8, 0, "header length is 0");
    refuse("header length 7", one, 8, 7, "header: line 1, column 7: unterminated string");
    refuse("header length past the end", one, 8, 1000, "runs past the end");
    refuse("header length 2^63", one, 8, 1ull << 63, "runs past the end");
    refuse("header not JSON", "{\"t\": nope}", 0, ACTUAL_LENGTH, "header: line 1, column 7");
    refuse("header an array", "[1, 2]", 0, ACTUAL_LENGTH, "not a JSON object");
    refuse("header a string", "\"abc\"", 0, ACTUAL_LENGTH, "not a JSON object");
    refuse("entry not an object", "{\"t\":[1]}", 0, ACTUAL_LENGTH, "not an object");
    refuse("metadata not an object", "{\"__metadata__\":3}", 0, ACTUAL_LENGTH, "__metadata__");
    refuse("unknown dtype", "{\"t\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, ACTUAL_LENGTH, "unsupported dtype \"I64\"");
    refuse("dtype not a string", "{\"t\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, "\"dtype\" missing");
    refuse("dtype missing", "{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, "\"dtype\" missing");
    refuse("shape missing", "{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, "\"shape\" missing");
    refuse("negative dimension", "{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, "not a non-negative integer");
    refuse("fractional dimension", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, "not a non-negative integer");
    refuse("string dimension", "{\"t\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, "not a non-negative integer");
    refuse("huge dimension", "{\"t\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, "not a non-negative integer");
    refuse("element count overflows", "{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, "overflows");
    refuse("byte size overflows", "{\"t\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, "overflows");
    refuse("too many dimensions", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, "dimensions");
    refuse("offsets not a pair", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, ACTUAL_LENGTH, "data_offsets");
    refuse("negative offset", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, ACTUAL_LENGTH, "data_offsets");
    refuse("offsets reversed", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, ACTUAL_LENGTH, "reversed");
    refuse("span disagrees with shape", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, "needs 8");
    refuse("offsets past the data", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, ACTUAL_LENGTH, "past the 4 bytes");
    refuse("offsets far out of range", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[9223372036854775800,9223372036854775804]}}", 4, ACTUAL_LENGTH, "past the");
    refuse("overlapping tensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
           12, ACTUAL_LENGTH, "overlaps");
    refuse("gap between tensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
           12, ACTUAL_LENGTH, "unused bytes");
    refuse("data after the last tensor", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 12, ACTUAL_LENGTH, "after the last tensor");
    refuse("misaligned data", "{\"a\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", 6, ACTUAL_LENGTH, "not aligned");
    refuse("duplicate names",
           "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8, ACTUAL_LENGTH, "appears twice");
    refuse("NUL in a name", "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, "NUL");
    char deep[1200] = "{\"t\":";
    memset(deep + 5, '[', 1000);
    strcpy(deep + 1005, "]}");
    refuse("deep nesting", deep, 0, ACTUAL_LENGTH, "nesting too deep");
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

static void test_files(void) {
    SafeTensors st;
    Error e;
    CHECK(st_open(&st, "tests/no-such-file.safetensors", &e) == -1 && strstr(e.msg, "No such file"), "missing file refused (%s)", e.msg);
    CHECK(st_open(&st, "tests", &e) == -1 && strstr(e.msg, "not a regular file"), "a folder refused (%s)", e.msg);
    CHECK(st_open(&st, "/dev/null", &e) == -1, "a device refused (%s)", e.msg);

    /* A sharded checkpoint: two shards named by an index. */
    mkdir("build", 0755);
    mkdir("build/test-st", 0755);
    size_t n1, n2;
    unsigned char *s1 = image("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, &n1);
    unsigned char *s2 = image("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, ACTUAL_LENGTH, &n2);
    write_file("build/test-st/one.safetensors", s1, n1);
    write_file("build/test-st/two.safetensors", s2, n2);
    const char *index = "{\"weight_map\": {\"a\": \"one.safetensors\", \"b\": \"two.safetensors\"}}";
    write_file("build/test-st/model.safetensors.index.json", index, strlen(index));
    CHECK(st_open(&st, "build/test-st/model.safetensors.index.json", &e) == 0, "sharded checkpoint opens");
    CHECK(st.n_files == 2 && st.n_tensors == 2 && st_find(&st, "a") && st_find(&st, "b"), "both shards' tensors found");
    st_close(&st);

    struct {
        const char *index, *want;
    } bad[] = {
        {"{\"weight_map\": {\"a\": \"../one.safetensors\"}}", "not a file name"},
        {"{\"weight_map\": {\"a\": \"/etc/passwd\"}}", "not a file name"},
        {"{\"weight_map\": {\"a\": 5}}", "not a file name"},
        {"{\"weight_map\": {}}", "weight_map"},
        {"{\"metadata\": {}}", "weight_map"},
        {"[1]", "weight_map"},
        {"{\"weight_map\": {\"a\": \"two.safetensors\"}}", "'a' is not in two.safetensors"},
        {"{\"weight_map\": {\"c\": \"one.safetensors\"}}", "'c' is not in one.safetensors"},
        {"{\"weight_map\": {\"a\": \"missing.safetensors\"}}", "missing.safetensors: No such file"},
        {"{\"weight_map\": {\"a\": \"one.safetensors\", \"b\": \"one.safetensors\"", "line 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file("build/test-st/bad.index.json", bad[i].index, strlen(bad[i].index));
        int rc = st_open(&st, "build/test-st/bad.index.json", &e);
        CHECK(rc == -1 && strstr(e.msg, bad[i].want), "bad index %zu refused with '%s' (got '%s')", i, bad[i].want, e.msg);
    }
    /* The same tensor in two shards. */
    write_file("build/test-st/two.safetensors", s1, n1);
    write_file("build/test-st/dup.index.json", index, strlen(index));
    CHECK(st_open(&st, "build/test-st/dup.index.json", &e) == -1 && strstr(e.msg, "appears twice"), "tensor in two shards refused (%s)", e.msg);
    free(s1);
    free(s2);
}

int main(void) {
    test_valid();
    test_broken();
    test_files();
    return test_summary("test_safetensors");
}
