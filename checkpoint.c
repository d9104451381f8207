/* checkpoint.c - loading a checkpoint for a command. */
#include "checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "console.h"
#include "generate.h"
#include "threads.h"
#include "util.h"

/* What the progress line says while the weights load. */
static const char *weights_phase(const ModelOptions *o) {
    if (!o->no_prepared) return "reading the weights of";
    if (o->dtype == DTYPE_AS_Q8 || o->dtype == DTYPE_AS_Q4) return "quantizing the weights of";
    return o->dtype == DTYPE_AS_F32 ? "converting the weights of" : "laying out the weights of";
}

Tokenizer *checkpoint_load(Model *m, const char *path, const ModelOptions *options, TokenizerUse use, bool weights) {
    Error e;
    Progress *progress = progress_start(path);
    progress_phase(progress, weights_phase(options));
    ModelOptions opt = *options;
    opt.progress = progress_writing;
    opt.progress_ctx = progress;
    if ((weights ? model_load : model_open)(m, path, &opt, &e) != 0) progress_end(progress), die("%s", e.msg);
    if (m->prepared_note.msg[0]) warn("%s", m->prepared_note.msg);

    /* generation_config.json is checked now, whatever the command. */
    progress_phase(progress, "loading the tokenizer of");
    GenerationConfig unused;
    char *tok_path = model_path(path, "tokenizer.json");
    Tokenizer *t = NULL;
    int rc = generation_config_load(&unused, path, &m->config, -1, &e);
    if (rc == 0 && (use == TOKENIZER_NEEDED || (use == TOKENIZER_IF_PRESENT && access(tok_path, F_OK) == 0))) {
        t = (opt.no_prepared ? tokenizer_load : tokenizer_load_prepared)(tok_path, &e);
        rc = t ? 0 : -1;
        /* The tokenizer must not make ids that the model has no embedding for. */
        Error why;
        if (t && tokenizer_fit(t, m->config.vocab_size, &why) != 0) rc = fail(&e, "%s: %s", tok_path, why.msg);
    }
    progress_end(progress);
    free(tok_path);
    if (rc != 0) die("%s", e.msg);
    if (m->config.multimodal)
        fprintf(stderr, "run: %s is an image-text checkpoint: its language model runs, the vision tower is not used\n", path);
    if (opt.threads > cpu_count())
        warn("-t %d: this process may use %d CPU%s; more threads than that wait for each other", opt.threads, cpu_count(),
             cpu_count() == 1 ? "" : "s");
    return t;
}

Tokenizer *checkpoint_tokenizer(const char *path, bool prepared) {
    Error e;
    char *tok_path = model_path(path, "tokenizer.json");
    Tokenizer *t = (prepared ? tokenizer_load_prepared : tokenizer_load)(tok_path, &e);
    free(tok_path);
    if (!t) die("%s", e.msg);
    return t;
}

void checkpoint_check_tokens(const Model *m, const int *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->config.vocab_size)
            die("token id %d is outside the vocabulary [0, %d)", ids[i], m->config.vocab_size);
}

const char *context_advice(char *buf, size_t size, const Model *m, const char *shorten) {
    if (m->max_context < m->config.max_pos)
        snprintf(buf, size, "%s, or raise -c (the model allows up to %d)", shorten, m->config.max_pos);
    else
        snprintf(buf, size, "%s (%d positions is the most the model allows)", shorten, m->config.max_pos);
    return buf;
}
