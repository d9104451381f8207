/* fuzz_safetensors.c - libFuzzer target: the bytes as one whole safetensors
 * file. What st_add_file accepts must lie inside the bytes it was given. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "../../safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    SafeTensors st = {0};
    Error e;
    if (st_add_file(&st, data, size, "fuzz.safetensors", &e) != 0) {
        assert(strncmp(e.msg, "fuzz.safetensors: ", 18) == 0);
        st_close(&st);
        return 0;
    }
    for (size_t i = 0; i < st.n_tensors; i++) {
        const Tensor *t = &st.tensors[i];
        const uint8_t *p = t->data;
        assert(p >= data + 8 && t->nbytes <= size && p <= data + size - t->nbytes);
        assert(t->nbytes == t->numel * dtype_size(t->dtype));
        assert(st_find(&st, t->name) == t);
        if (i > 0) assert(strcmp(st.tensors[i - 1].name, t->name) < 0);
        /* Touch both ends, so that ASan sees any read outside. */
        if (t->nbytes) assert(p[0] == data[p - data] && p[t->nbytes - 1] == data[p - data + t->nbytes - 1]);
    }
    st_close(&st);
    return 0;
}
