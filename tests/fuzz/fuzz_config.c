/* fuzz_config.c - libFuzzer target: the bytes as a config.json. A config
 * that config_parse accepts must hold what the model's code relies on. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "../../config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Config c;
    Error e;
    if (config_parse(&c, (const char *)data, size, "config.json", &e) != 0) {
        assert(strncmp(e.msg, "config.json: ", 13) == 0);
        return 0;
    }
    assert(c.dim >= 1 && c.hidden_dim >= 1 && c.n_layers >= 1 && c.vocab_size >= 1 && c.max_pos >= 1);
    assert(c.n_heads >= 1 && c.n_kv_heads >= 1 && c.n_heads % c.n_kv_heads == 0);
    assert(c.head_dim >= 2 && c.head_dim % 2 == 0);
    assert(c.rope_theta > 0 && c.norm_eps > 0 && c.norm_eps < 1);
    assert(c.n_eos >= 0 && c.n_eos <= MAX_EOS_IDS && c.bos_id >= -1);
    return 0;
}
