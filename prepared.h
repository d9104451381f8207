/* prepared.h - the prepared-weights file: a checkpoint's matrices laid out
 * as the products read them (the grouped layouts of kernels.h; converted to
 * f32 or quantized to q8/q4 when that format is asked for), written once and
 * then mapped read-only and shared (MAP_SHARED), so that a start copies and
 * quantizes nothing and two processes on one model hold its weights once.
 *
 * Where it goes: beside the checkpoint when that folder is writable,
 * <folder>/<stem>.run-<format> (stem: the weights file's name without
 * .safetensors or .safetensors.index.json, so model.run-q4), else in
 * $XDG_CACHE_HOME/run (or ~/.cache/run) as <hash of the weights file's real
 * path>-<stem>.run-<format>. Both places are looked in, beside first.
 *
 * The file, in host byte order (little-endian on x86-64):
 *   header, 64 bytes: magic "runprep\0"; u32 version (PREPARED_VERSION,
 *     raised whenever a layout or a quantization changes); u32 format (a
 *     WeightType); u64 key (the checkpoint's, prepared_key); u64 n_entries;
 *     u64 table_offset; u64 file_size; 16 bytes of 0.
 *   the matrices: each one's matrix_bytes() from an offset that is a
 *     multiple of PREPARED_ALIGN, in table order, none overlapping.
 *   the table at table_offset (after the matrices): n_entries entries of
 *     PREPARED_ENTRY_BYTES, in the order the loader asks for the matrices:
 *     name (128 bytes, NUL-padded), u32 format, i32 rows, i32 cols, u32 0,
 *     u64 offset, u64 bytes.
 * A file is rebuilt when its key, version or format is not the one wanted.
 * Otherwise it is checked like any file from outside before a byte of it
 * is used: header fields, the table inside the file, every entry's name,
 * format and shape equal to what the loader asks for, its byte count equal
 * to matrix_bytes of that shape, its offset aligned, inside the file and
 * past the previous entry's end. The weights' values are not checked (that
 * would read them all, which is what the file saves). */
#ifndef PREPARED_H
#define PREPARED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "safetensors.h"
#include "util.h"

enum { PREPARED_VERSION = 1, PREPARED_ALIGN = 4096, PREPARED_HEADER_BYTES = 64, PREPARED_ENTRY_BYTES = 160,
       PREPARED_NAME_BYTES = 128 };

/* The key of a checkpoint: a hash of each weights file's size, modification
 * time (to the nanosecond), inode and safetensors header bytes. A file
 * changed in any of them gives another key. */
uint64_t prepared_key(const SafeTensors *st);

/* An open prepared file: its mapping and the table being read in order. */
typedef struct {
    char *path;                /* NULL when none is open */
    const unsigned char *map;  /* the whole file, read-only */
    size_t size;
    bool mapped;               /* map is a mapping of path (else bytes given to prepared_check) */
    uint64_t n_entries;
    const unsigned char *table;/* [n_entries][PREPARED_ENTRY_BYTES] */
    uint64_t next;             /* the entry prepared_matrix reads next */
    uint64_t data_end;         /* the end of the bytes of the entries read so far */
    bool made_now;             /* this process wrote it */
} PreparedFile;

/* Checks the header and the table of a prepared file held in bytes
 * (label names it in errors). Returns 0 when it is usable, 1 when it is
 * well-formed but for another checkpoint, format or version (out of date),
 * -1 when it is damaged. The file then reads from bytes, which must
 * outlive it. */
int prepared_check(PreparedFile *f, const unsigned char *bytes, size_t size, const char *label, uint64_t key,
                   WeightType format, Error *e);

/* Looks for the prepared file of the weights file `weights` (as model_load
 * found it) in format `format` with key `key`, beside it and then in the
 * cache folder, and maps the first that prepared_check accepts. Returns 0
 * then; 1 when there is none or each is out of date; -1 when one is damaged
 * (e says how; it is to be made again). */
int prepared_find(PreparedFile *f, const char *weights, uint64_t key, WeightType format, Error *e);

/* The next matrix of the table, which must be `name`, of format `type` and
 * shape rows x cols: a view into the file (owns nothing). */
int prepared_matrix(PreparedFile *f, const char *name, WeightType type, int rows, int cols, Matrix *out, Error *e);

/* Every entry of the table must have been read. */
int prepared_check_end(const PreparedFile *f, Error *e);

void prepared_close(PreparedFile *f);

/* Maps part `part` of n_parts of the file's pages into this process at
 * once (Linux's MADV_POPULATE_READ; elsewhere nothing), so that threads
 * can share the work: a load does it because every token reads every
 * weight, and one call maps the pages for a fraction of what a fault on
 * each costs (a 1 GB file: ~10 ms against ~50 ms here). */
void prepared_map_pages(const PreparedFile *f, int part, int n_parts);

/* Reads every page of a mapped file into memory now (the page cache, in
 * 2 MB pages where the kernel can), so that the next run finds it there:
 * `run prepare` after writing one. */
void prepared_warm(const PreparedFile *f);

/* A prepared file being written: to a temporary file beside its final
 * place, renamed there when complete (so a reader never sees half of one). */
typedef struct {
    char *path, *temp;
    int fd;
    uint64_t key;
    WeightType format;
    uint64_t offset;           /* where the next matrix goes */
    unsigned char *table;      /* the entries so far */
    size_t n_entries, capacity;
} PreparedWriter;

/* Starts the prepared file of `weights` in `format`: beside it if that
 * folder is writable, else in the cache folder (created if need be).
 * Fails, writing nothing, when neither can be written or the disk has
 * not `bytes` (the matrices' size) free. */
int prepared_create(PreparedWriter *w, const char *weights, uint64_t key, WeightType format, size_t bytes, Error *e);

/* Appends the grouped matrix m (its matrix_bytes from m->data) as `name`. */
int prepared_add(PreparedWriter *w, const char *name, const Matrix *m, Error *e);

/* Writes the table and the header, flushes the file to disk and renames it
 * into place; on failure the temporary file is removed. */
int prepared_commit(PreparedWriter *w, Error *e);

/* Removes the temporary file of an unfinished writer. */
void prepared_abandon(PreparedWriter *w);

#endif
