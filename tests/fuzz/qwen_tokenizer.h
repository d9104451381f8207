/* qwen_tokenizer.h - the real Qwen2.5 tokenizer for the fuzz targets that
 * encode or decode: loaded once, from tests/data (run from the repository
 * root, after make fuzz has unpacked it). */
#ifndef QWEN_TOKENIZER_H
#define QWEN_TOKENIZER_H

#include <stdio.h>
#include <stdlib.h>

#include "../../tokenizer.h"

static Tokenizer *tokenizer;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    Error e;
    tokenizer = tokenizer_load("tests/data/qwen2.5-tokenizer.json", &e);
    if (!tokenizer) {
        fprintf(stderr, "%s (run from the repository root, after make fuzz)\n", e.msg);
        exit(1);
    }
    return 0;
}

#endif
