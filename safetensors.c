/* safetensors.c - mapping safetensors files and validating their headers. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

/* The format's own limit on the JSON header. */
#define MAX_HEADER_BYTES 100000000u

static const struct {
    const char *name;
    DType dtype;
    size_t size;
} dtypes[] = {{"F32", DTYPE_F32, 4}, {"F16", DTYPE_F16, 2}, {"BF16", DTYPE_BF16, 2}};

const char *dtype_name(DType t) { return dtypes[t].name; }
size_t dtype_size(DType t) { return dtypes[t].size; }

/* ---- one tensor's header entry ---- */

static int parse_dtype(const char *label, const char *name, const JsonValue *v, DType *out, Error *e) {
    if (!v || v->type != JSON_STRING) return fail(e, "%s: tensor '%s': \"dtype\" missing or not a string", label, name);
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(v->string, dtypes[i].name) == 0) {
            *out = dtypes[i].dtype;
            return 0;
        }
    return fail(e, "%s: tensor '%s': unsupported dtype \"%.32s\" (run reads BF16, F16 and F32)", label, name, v->string);
}

/* A JSON value that must be a non-negative integer. */
static int get_count(const JsonValue *v, int64_t *out) {
    if (v->type != JSON_NUMBER || !v->number.is_integer || v->number.integer < 0) return -1;
    *out = v->number.integer;
    return 0;
}

static int parse_shape(const char *label, Tensor *t, const JsonValue *v, Error *e) {
    if (!v || v->type != JSON_ARRAY) return fail(e, "%s: tensor '%s': \"shape\" missing or not an array", label, t->name);
    if (v->len > ST_MAX_DIMS) return fail(e, "%s: tensor '%s': %zu dimensions (at most %d)", label, t->name, v->len, ST_MAX_DIMS);
    t->ndim = (int)v->len;
    t->numel = 1;
    for (size_t i = 0; i < v->len; i++) {
        if (get_count(&v->items[i], &t->shape[i]) != 0)
            return fail(e, "%s: tensor '%s': shape dimension %zu is not a non-negative integer", label, t->name, i);
        if ((uint64_t)t->shape[i] > SIZE_MAX || mul_size(t->numel, (size_t)t->shape[i], &t->numel) != 0)
            return fail(e, "%s: tensor '%s': shape is too large (its element count overflows)", label, t->name);
    }
    if (mul_size(t->numel, dtype_size(t->dtype), &t->nbytes) != 0)
        return fail(e, "%s: tensor '%s': shape is too large (its byte size overflows)", label, t->name);
    return 0;
}

/* Fills t from its header entry, with its offsets into the data area. */
static int parse_entry(const char *label, const JsonMember *m, Tensor *t, size_t *begin, size_t *end, Error *e) {
    if (memchr(m->key, '\0', m->key_len)) return fail(e, "%s: a tensor name contains a NUL byte", label);
    t->name = xstrdup(m->key);
    t->file = label;
    const JsonValue *v = &m->value;
    if (v->type != JSON_OBJECT) return fail(e, "%s: tensor '%s': entry is %s, not an object", label, t->name, json_type_name(v->type));
    if (parse_dtype(label, t->name, json_get(v, "dtype"), &t->dtype, e) != 0) return -1;
    if (parse_shape(label, t, json_get(v, "shape"), e) != 0) return -1;
    const JsonValue *off = json_get(v, "data_offsets");
    int64_t b, en;
    if (!off || off->type != JSON_ARRAY || off->len != 2 || get_count(&off->items[0], &b) != 0 ||
        get_count(&off->items[1], &en) != 0)
        return fail(e, "%s: tensor '%s': \"data_offsets\" must be two non-negative integers", label, t->name);
    if (en < b) return fail(e, "%s: tensor '%s': data_offsets [%lld, %lld] are reversed", label, t->name, (long long)b, (long long)en);
    if ((uint64_t)(en - b) != (uint64_t)t->nbytes)
        return fail(e, "%s: tensor '%s': data_offsets span %lld bytes but shape x dtype needs %zu", label, t->name,
                    (long long)(en - b), t->nbytes);
    *begin = (size_t)b;
    *end = (size_t)en;
    return 0;
}

/* ---- a whole file ---- */

typedef struct {
    size_t begin, end;
    Tensor *tensor;
} Span;

static int by_begin(const void *a, const void *b) {
    const Span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int by_name(const void *a, const void *b) { return strcmp(((const Tensor *)a)->name, ((const Tensor *)b)->name); }

/* The data area must be covered by the tensors exactly once: sorted by offset,
 * each starts where the previous one ended, and the last ends at the end. */
static int check_layout(const char *label, Span *spans, size_t n, size_t data_size, Error *e) {
    qsort(spans, n, sizeof *spans, by_begin);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (spans[i].end > data_size)
            return fail(e, "%s: tensor '%s': data_offsets end at %zu, past the %zu bytes of data (file truncated?)", label,
                        spans[i].tensor->name, spans[i].end, data_size);
        if (spans[i].begin < at) return fail(e, "%s: tensor '%s' overlaps the tensor before it", label, spans[i].tensor->name);
        if (spans[i].begin > at)
            return fail(e, "%s: %zu unused bytes before tensor '%s'", label, spans[i].begin - at, spans[i].tensor->name);
        at = spans[i].end;
    }
    if (at != data_size) return fail(e, "%s: %zu bytes of data after the last tensor", label, data_size - at);
    return 0;
}

int st_add_file(SafeTensors *st, const unsigned char *bytes, size_t size, const char *label, Error *e) {
    if (size < 8) return fail(e, "%s: file is %zu bytes, too short for a safetensors header", label, size);
    if (memcmp(bytes, "GGUF", 4) == 0)
        return fail(e, "%s is a GGUF file (llama.cpp's format), which run does not read: pass a Hugging Face checkpoint "
                    "folder (config.json, *.safetensors, tokenizer.json)", label);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | bytes[i];
    if (n == 0) return fail(e, "%s: header length is 0", label);
    if (n > size - 8) return fail(e, "%s: header length %llu runs past the end of the file (%zu bytes)", label, (unsigned long long)n, size);
    if (n > MAX_HEADER_BYTES) return fail(e, "%s: header length %llu is over the format's 100 MB limit", label, (unsigned long long)n);
    size_t data_offset = 8 + (size_t)n, data_size = size - data_offset;

    JsonDoc doc;
    Error je;
    if (json_parse(&doc, (const char *)bytes + 8, (size_t)n, &je) != 0) return fail(e, "%s: header: %s", label, je.msg);
    int rc = -1;
    Span *spans = NULL;
    if (doc.root.type != JSON_OBJECT) {
        fail(e, "%s: header is %s, not a JSON object", label, json_type_name(doc.root.type));
        goto out;
    }
    size_t first = st->n_tensors, count = 0;
    st->tensors = xrealloc(st->tensors, st->n_tensors + doc.root.len, sizeof(Tensor));
    spans = xcalloc(doc.root.len, sizeof(Span));
    for (size_t i = 0; i < doc.root.len; i++) {
        const JsonMember *m = &doc.root.members[i];
        if (strcmp(m->key, "__metadata__") == 0 && m->key_len == 12) {
            if (m->value.type != JSON_OBJECT) {
                fail(e, "%s: __metadata__ is %s, not an object", label, json_type_name(m->value.type));
                goto out;
            }
            continue;
        }
        Tensor *t = &st->tensors[first + count];
        memset(t, 0, sizeof *t);
        st->n_tensors++;  /* counted now so st_close frees its name on error */
        if (parse_entry(label, m, t, &spans[count].begin, &spans[count].end, e) != 0) goto out;
        if ((data_offset + spans[count].begin) % dtype_size(t->dtype) != 0) {
            fail(e, "%s: tensor '%s': data is not aligned to its %zu-byte dtype", label, t->name, dtype_size(t->dtype));
            goto out;
        }
        spans[count++].tensor = t;
    }
    if (check_layout(label, spans, count, data_size, e) != 0) goto out;
    for (size_t k = 0; k < count; k++) spans[k].tensor->data = bytes + data_offset + spans[k].begin;
    qsort(st->tensors, st->n_tensors, sizeof(Tensor), by_name);
    for (size_t i = 1; i < st->n_tensors; i++)
        if (strcmp(st->tensors[i - 1].name, st->tensors[i].name) == 0) {
            fail(e, "%s: tensor '%s' appears twice", label, st->tensors[i].name);
            goto out;
        }
    rc = 0;
out:
    free(spans);
    json_free(&doc);
    return rc;
}

/* ---- files and shards ---- */

/* Opens a regular file read-only (never blocking on a FIFO or device) and
 * maps all of it. */
static int add_path(SafeTensors *st, const char *path, Error *e) {
    st->files = xrealloc(st->files, (size_t)st->n_files + 1, sizeof(MappedFile));
    MappedFile *f = &st->files[st->n_files];
    if (map_file(path, &f->map, &f->size, e) != 0) return -1;
    f->path = xstrdup(path);
    st->n_files++;
    /* Only the header is read now: no read-around of the weights meanwhile
     * (a device may read megabytes around each page fault). */
    if (f->size) madvise((void *)f->map, f->size, MADV_RANDOM);
    int rc = st_add_file(st, f->map, f->size, f->path, e);
    if (f->size) madvise((void *)f->map, f->size, MADV_NORMAL);
    return rc;
}

/* A shard's name: not empty, no folder part, no NUL. */
static int is_plain_file_name(const char *s, size_t len) {
    return len > 0 && !memchr(s, '/', len) && !memchr(s, '\0', len) && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int by_string(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Opens each shard that a weight_map names, once each, in name order. */
static int open_shards(SafeTensors *st, const char *index_path, const JsonValue *map, Error *e) {
    const char **names = xcalloc(map->len, sizeof *names);
    int rc = 0;
    for (size_t i = 0; i < map->len && rc == 0; i++) {
        const JsonValue *file = &map->members[i].value;
        if (file->type != JSON_STRING || !is_plain_file_name(file->string, file->len))
            rc = fail(e, "%s: weight_map entry '%s' is not a file name in the checkpoint folder", index_path,
                      map->members[i].key);
        names[i] = file->string;
    }
    if (rc == 0) qsort(names, map->len, sizeof *names, by_string);
    for (size_t i = 0; i < map->len && rc == 0; i++) {
        if (i > 0 && strcmp(names[i], names[i - 1]) == 0) continue;
        char *shard = model_path(index_path, names[i]);
        rc = add_path(st, shard, e);
        free(shard);
    }
    free(names);
    return rc;
}

/* A sharded checkpoint: the index's "weight_map" names, for every tensor, the
 * file (in the index's own folder) that holds it. */
static int open_index(SafeTensors *st, const char *index_path, Error *e) {
    JsonDoc doc;
    if (json_parse_file(&doc, index_path, e) != 0) return -1;
    int rc = 0;
    const JsonValue *map = json_get(&doc.root, "weight_map");
    if (!map || map->type != JSON_OBJECT || map->len == 0)
        rc = fail(e, "%s: no \"weight_map\" object naming the shards", index_path);
    if (rc == 0) rc = open_shards(st, index_path, map, e);
    /* Every tensor the index names must be in the shard it names. */
    for (size_t i = 0; rc == 0 && i < map->len; i++) {
        const Tensor *t = st_find(st, map->members[i].key);
        if (!t || strcmp(base_name(t->file), map->members[i].value.string) != 0)
            rc = fail(e, "%s: tensor '%s' is not in %s", index_path, map->members[i].key, map->members[i].value.string);
    }
    json_free(&doc);
    return rc;
}

int st_open(SafeTensors *st, const char *path, Error *e) {
    memset(st, 0, sizeof *st);
    int rc = ends_with(path, ".json") ? open_index(st, path, e) : add_path(st, path, e);
    if (rc != 0) st_close(st);
    return rc;
}

const Tensor *st_find(const SafeTensors *st, const char *name) {
    size_t lo = 0, hi = st->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->tensors[mid].name, name);
        if (c == 0) return &st->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

void st_close(SafeTensors *st) {
    for (size_t i = 0; i < st->n_tensors; i++) free(st->tensors[i].name);
    free(st->tensors);
    for (int i = 0; i < st->n_files; i++) {
        unmap_file(st->files[i].map, st->files[i].size);
        free(st->files[i].path);
    }
    free(st->files);
    memset(st, 0, sizeof *st);
}

const char *tensor_shape_text(const Tensor *t, char *buf, size_t size) {
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < t->ndim && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (at < size) snprintf(buf + at, size - at, "]");
    return buf;
}
