/* test_moe.c - the mixture of experts: the choice of experts against
 * torch.topk itself, ties included.
 *
 * tests/data/topk_golden.json (scripts/make_golden.py) holds probability
 * vectors with few distinct values - so most choices involve ties, which
 * torch.topk breaks by the order its sorting algorithms leave, not by expert
 * number - some with NaN, and the experts torch.topk returns for each, for
 * shapes that take both of its algorithms. The forward pass of qwen3_moe
 * checkpoints (routers with ties too) is tested against the reference in
 * test_net. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../json.h"
#include "../moe.h"
#include "test.h"

static void test_topk_golden(void) {
    JsonDoc doc;
    test_json(&doc, "topk_golden.json");
    const JsonValue *cases = json_get(&doc.root, "cases");
    int agree = 0, ties = 0;
    for (size_t i = 0; i < cases->len; i++) {
        const JsonValue *c = &cases->items[i], *probs = json_get(c, "probs"), *want = json_get(c, "experts");
        int n = (int)probs->len, k = (int)json_get(c, "k")->number.integer;
        float *p = malloc((size_t)n * sizeof *p);
        int *got = malloc((size_t)k * sizeof *got);
        ExpertCandidate *work = malloc((size_t)n * sizeof *work);
        for (int j = 0; j < n; j++) p[j] = probs->items[j].type == JSON_NULL ? NAN : (float)probs->items[j].number.value;
        top_experts(got, p, n, k, work);
        bool same = true, lowest_first = true;
        for (int j = 0; j < k; j++) same &= got[j] == want->items[j].number.integer;
        /* Would "equal ones by expert number" have done as well? */
        for (int j = 0; j + 1 < k; j++)
            if (p[want->items[j].number.integer] == p[want->items[j + 1].number.integer] &&
                want->items[j].number.integer > want->items[j + 1].number.integer)
                lowest_first = false;
        ties += !lowest_first;
        agree += same;
        if (!same) CHECK(false, "case %zu: %d experts, k %d: top_experts differs from torch.topk", i, n, k);
        free(p), free(got), free(work);
    }
    CHECK(agree == (int)cases->len, "top_experts = torch.topk on %d/%zu probability vectors", agree, cases->len);
    CHECK(ties > 50, "torch.topk put equal probabilities out of expert order in %d of them", ties);
    printf("top_experts = torch.topk on %d/%zu vectors (%d with ties out of expert order)\n", agree, cases->len, ties);
    json_free(&doc);
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    test_topk_golden();
    return test_summary("test_moe");
}
