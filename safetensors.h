/* safetensors.h - read-only access to tensors stored in the safetensors format.
 *
 * A safetensors file is: an 8-byte little-endian header length N, N bytes of
 * JSON mapping each tensor name to {dtype, shape, data_offsets}, then the raw
 * data. The file is mapped read-only and every offset in the header is checked
 * before any is used; tensors are then views into the mapping. A sharded
 * checkpoint (model.safetensors.index.json naming several files) opens as one. */
#ifndef SAFETENSORS_H
#define SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define ST_MAX_DIMS 8

typedef enum { DTYPE_F32, DTYPE_F16, DTYPE_BF16 } DType;

typedef struct {
    char *name;
    DType dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t numel;           /* product of the shape */
    const void *data;       /* numel elements of dtype, inside the mapping */
    size_t nbytes;
    const char *file;       /* the file it lives in, for messages */
} Tensor;

typedef struct {
    char *path;
    const void *map;        /* the whole file, mapped read-only */
    size_t size;
} MappedFile;

typedef struct {
    MappedFile *files;      /* [n_files]: one per shard */
    int n_files;
    Tensor *tensors;        /* [n_tensors], sorted by name */
    size_t n_tensors;
} SafeTensors;

/* Opens a .safetensors file, or a sharded checkpoint through its
 * model.safetensors.index.json, validating every header. */
int st_open(SafeTensors *st, const char *path, Error *e);

/* Validates the bytes of one whole safetensors file and appends its tensors
 * (views into `bytes`, which must outlive st). `label` names it in errors. */
int st_add_file(SafeTensors *st, const unsigned char *bytes, size_t size, const char *label, Error *e);

/* The tensor called name, or NULL. */
const Tensor *st_find(const SafeTensors *st, const char *name);

void st_close(SafeTensors *st);

/* The shape as text, e.g. "[151936, 896]", in buf; returns buf. */
const char *tensor_shape_text(const Tensor *t, char *buf, size_t size);

const char *dtype_name(DType t);
size_t dtype_size(DType t);

#endif
