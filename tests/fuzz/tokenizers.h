/* tokenizers.h - the tokenizers of the fuzz targets that encode or decode,
 * loaded once from tests/data (run from the repository root, after make
 * fuzz has unpacked them), one for each pipeline:
 *   0  the real Qwen2.5 one: NFC, Qwen2's regex, no special tokens added;
 *   1  the small Llama 3 style one: no normalizer, Llama 3's regex,
 *      ignore_merges, TemplateProcessing that puts a BOS first;
 *   2  the small GPT-2 style one: ByteLevel's own regex, "<s> $A </s>";
 *   3  the small Llama 2 style one (tests/data/sp): SentencePiece-style BPE
 *      with byte fallback, normalizer Prepend and Replace, "<s> $A", a
 *      decoder of Replace, ByteFallback, Fuse and Strip. */
#ifndef FUZZ_TOKENIZERS_H
#define FUZZ_TOKENIZERS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../tokenizer.h"

enum { N_TOKENIZERS = 4 };

static const char *const tokenizer_files[N_TOKENIZERS] = {
    "tests/data/qwen2.5-tokenizer.json", "tests/data/llama-style-tokenizer.json", "tests/data/gpt2-style-tokenizer.json",
    "tests/data/sp/llama2.json"};

/* Whether tokenizer i's normalizer is NFC (the others have none). */
static const bool tokenizer_nfc[N_TOKENIZERS] = {true, false, false, false};

/* Whether tokenizer i is SentencePiece-style: a typed '▁' decodes to a
 * space, and the first space of the text is the normalizer's. */
static const bool tokenizer_sp[N_TOKENIZERS] = {false, false, false, true};

static Tokenizer *tokenizers[N_TOKENIZERS];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    for (int i = 0; i < N_TOKENIZERS; i++) {
        Error e;
        tokenizers[i] = tokenizer_load(tokenizer_files[i], &e);
        if (!tokenizers[i]) {
            fprintf(stderr, "%s (run from the repository root, after make fuzz)\n", e.msg);
            exit(1);
        }
    }
    return 0;
}

#endif
