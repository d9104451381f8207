/* fuzz_prepared.c - libFuzzer target: the bytes as a prepared-weights file
 * (prepared.h) for the key 42 and format q8. When prepared_check accepts
 * them, every matrix its table names (read from the table itself, as a
 * loader would ask for it) must lie inside the bytes, past the header,
 * aligned, not overlapping the one before. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "../../prepared.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    PreparedFile f;
    Error e;
    int rc = prepared_check(&f, data, size, "fuzz.prepared", 42, WEIGHT_Q8, &e);
    if (rc != 0) {
        assert(strncmp(e.msg, "fuzz.prepared: ", 15) == 0);
        prepared_close(&f);
        return 0;
    }
    const uint8_t *end = data;
    for (uint64_t i = 0; i < f.n_entries; i++) {
        const uint8_t *entry = f.table + i * PREPARED_ENTRY_BYTES;
        char name[PREPARED_NAME_BYTES + 1];
        memcpy(name, entry, PREPARED_NAME_BYTES);
        name[PREPARED_NAME_BYTES] = '\0';
        uint32_t type;
        int32_t rows, cols;
        memcpy(&type, entry + 128, 4);
        memcpy(&rows, entry + 132, 4);
        memcpy(&cols, entry + 136, 4);
        if (type > WEIGHT_Q4 || rows < 1 || cols < 1 || rows > (1 << 20) || cols > (1 << 20)) break;
        Matrix m;
        if (prepared_matrix(&f, name, (WeightType)type, rows, cols, &m, &e) != 0) {
            assert(strncmp(e.msg, "fuzz.prepared: ", 15) == 0);
            break;
        }
        size_t bytes = matrix_bytes(&m);
        const uint8_t *p = m.data;
        assert(p >= data + PREPARED_HEADER_BYTES && p >= end && bytes <= size && p <= data + size - bytes);
        assert((size_t)(p - data) % PREPARED_ALIGN == 0 && p + bytes <= f.table);
        if (m.scales) assert((const uint8_t *)m.scales >= p && (const uint8_t *)m.scales <= p + bytes);
        /* Touch both ends, so that ASan sees any read outside. */
        if (bytes) assert(p[0] == data[p - data] && p[bytes - 1] == data[p - data + bytes - 1]);
        end = p + bytes;
    }
    prepared_close(&f);
    return 0;
}
