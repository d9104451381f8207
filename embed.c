/* embed.c - the pooling a checkpoint asks for, and pooling itself. */
#include "embed.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json.h"

const char *pooling_name(PoolingMode mode) {
    return mode == POOL_MEAN ? "mean" : mode == POOL_CLS ? "CLS token" : "last token";
}

/* The pooling mode of a Pooling module's config.json: exactly one of the
 * modes it may switch on, and one this code does. */
static int read_pooling_config(Pooling *p, const char *path, Error *e) {
    JsonDoc doc;
    if (json_parse_file(&doc, path, e) != 0) return -1;
    static const struct {
        const char *key;
        int mode;              /* a PoolingMode, or -1: not done here */
    } modes[] = {{"pooling_mode_lasttoken", POOL_LAST}, {"pooling_mode_mean_tokens", POOL_MEAN},
                 {"pooling_mode_cls_token", POOL_CLS},  {"pooling_mode_max_tokens", -1},
                 {"pooling_mode_mean_sqrt_len_tokens", -1}, {"pooling_mode_weightedmean_tokens", -1}};
    int on = 0, rc = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0] && rc == 0; i++) {
        const JsonValue *v = json_get(&doc.root, modes[i].key);
        if (!v || v->type != JSON_BOOL || !v->boolean) continue;
        if (modes[i].mode < 0) rc = fail(e, "%s: %s is not supported (last token, mean or CLS)", path, modes[i].key);
        else p->mode = (PoolingMode)modes[i].mode, on++;
    }
    if (rc == 0 && on != 1) rc = fail(e, "%s: expected one pooling mode switched on, found %d", path, on);
    json_free(&doc);
    return rc;
}

int pooling_load(Pooling *p, const char *model, Error *e) {
    *p = (Pooling){.mode = POOL_LAST, .normalize = true};
    char *modules_path = model_path(model, "modules.json");
    struct stat st;
    if (stat(modules_path, &st) != 0) {
        free(modules_path);
        return 0;
    }
    JsonDoc doc;
    int rc = json_parse_file(&doc, modules_path, e);
    bool parsed = rc == 0;
    if (rc == 0 && doc.root.type != JSON_ARRAY) rc = fail(e, "%s: expected a list of modules", modules_path);
    bool pooled = false;
    p->normalize = false;
    for (size_t i = 0; parsed && rc == 0 && i < doc.root.len; i++) {
        const JsonValue *type = json_get(&doc.root.items[i], "type"), *path = json_get(&doc.root.items[i], "path");
        if (!type || type->type != JSON_STRING) {
            rc = fail(e, "%s: module %zu has no \"type\"", modules_path, i);
        } else if (strcmp(type->string, "sentence_transformers.models.Normalize") == 0) {
            p->normalize = true;
        } else if (strcmp(type->string, "sentence_transformers.models.Pooling") == 0) {
            if (!path || path->type != JSON_STRING || strstr(path->string, "..")) {
                rc = fail(e, "%s: the Pooling module has no usable \"path\"", modules_path);
                continue;
            }
            char *folder = model_path(model, path->string), *config = path_join(folder, "config.json");
            rc = read_pooling_config(p, config, e);
            free(folder), free(config);
            pooled = true;
        }
    }
    if (rc == 0 && !pooled) rc = fail(e, "%s: no sentence_transformers.models.Pooling module", modules_path);
    if (parsed) json_free(&doc);
    free(modules_path);
    return rc;
}

void pool(float *out, const float *hidden, int n, int dim, const Pooling *p) {
    /* The pooled vector, summed in double. */
    for (int d = 0; d < dim; d++) {
        double x;
        if (p->mode == POOL_MEAN) {
            x = 0;
            for (int t = 0; t < n; t++) x += hidden[(size_t)t * dim + d];
            x /= n;
        } else {
            x = hidden[(size_t)(p->mode == POOL_CLS ? 0 : n - 1) * dim + d];
        }
        out[d] = (float)x;
    }
    if (!p->normalize) return;
    double norm = 0;
    for (int d = 0; d < dim; d++) norm += (double)out[d] * out[d];
    norm = sqrt(norm);
    for (int d = 0; d < dim && norm > 0; d++) out[d] = (float)(out[d] / norm);
}
