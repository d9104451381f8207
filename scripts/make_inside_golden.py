#!/usr/bin/env python3
"""Writes tests/data/inside_golden.json: the reference values of the tests of
`run ppl`, `-v`/`-vv` and `--report` (tests/test_ppl.sh, tests/test_report.sh),
computed by the independent numpy reference of transformers' forward pass
(ref_forward.py, imported) on checkpoints made by tests/make_checkpoint:

- ppl: the perplexity of tests/data/ppl_text.txt over sliding windows, as
  transformers' perplexity guide defines it (each window scores the tokens no
  earlier window scored, each from the window's tokens before it), from the
  reference's logits of each window; exp(mean nll) in double precision.
- verbose: the model's probabilities (softmax of the reference's logits) of
  the most probable next tokens after a prompt, and the norm of the residual
  stream after each layer for its last token (what -v and -vv print).
- stages: the top tokens and probabilities after each sampling stage of the
  first step (repetition penalty, temperature, top-k, top-p, min-p as
  transformers' logits processors do them), from the reference's logits.
- forward: for `fwd --tokens --report` on a small-vocabulary checkpoint:
  attention probabilities (ref_forward --attn), and per layer and position the
  residual stream's norm, its three largest activations and the logit lens
  (final norm and output head on the residual stream, ref_forward --hidden).

Prompt ids come from the standard-library reference of Hugging Face's BPE
(make_golden.tok). The tests need neither numpy nor ../shared.

usage: scripts/make_inside_golden.py [REF_FORWARD] (default ../shared/tools/ref_forward.py)
needs: /usr/bin/python3 with numpy, and `make build/tests/make_checkpoint tests/data/qwen2.5-tokenizer.json`
"""
import importlib.util, json, math, os, shlex, subprocess, sys, tempfile
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "tools", "ref_forward.py")
TOOL = os.path.join(ROOT, "build", "tests", "make_checkpoint")

GEN_CHECKPOINT = "--seed 21 --set num_hidden_layers=3"   # the Qwen2.5 vocabulary, with its tokenizer
FWD_CHECKPOINT = "--seed 41 --set vocab_size=2048 --set num_hidden_layers=2 --set num_attention_heads=4 --set num_key_value_heads=2"
PPL_CASES = [(128, 64), (16, 8), (16, 16), (12, 5)]     # window, stride
VERBOSE_PROMPT = "Hello world"
STAGE_PROMPT = "Hello world, this is a test of the"
STAGE_FLAGS = {"temp": 0.7, "top_k": 20, "top_p": 0.9, "min_p": 0.8, "repeat_penalty": 1.3}
FWD_TOKENS = 24
TOP = 12                                                 # tokens kept per stage (the report shows 10)

def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

ref = load_module("ref_forward", REF)
golden = load_module("make_golden", os.path.join(ROOT, "scripts", "make_golden.py"))

class Model:
    def __init__(self, d):
        self.cfg = json.load(open(os.path.join(d, "config.json")))
        self.W = ref.load(d)

    def forward(self, ids, dump=None):
        return np.asarray(ref.forward(self.cfg, self.W, ids, dump), dtype=np.float32)

    def lens(self, rows):
        """The final norm and the output head on residual-stream rows."""
        head = self.W.get("lm_head.weight", self.W["model.embed_tokens.weight"])
        return ref.rmsnorm(rows, self.W["model.norm.weight"], self.cfg["rms_norm_eps"]) @ head.T

def softmax(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x[np.isfinite(x)].max())
    return e / e.sum()

def top(probs, n):
    ids = sorted(range(len(probs)), key=lambda i: (-probs[i], i))[:n]
    return {"ids": ids, "probs": [float(probs[i]) for i in ids]}

def checkpoint(d, args):
    subprocess.run([TOOL, d] + shlex.split(args), check=True, capture_output=True)

def perplexity(model, ids, window, stride):
    """transformers' guide: windows every stride tokens; each scores the tokens not scored before."""
    nlls, scored_end, begin = [], 1, 0
    while True:
        end = min(begin + window, len(ids))
        logits = model.forward(ids[begin:end])
        for t in range(max(scored_end, begin + 1), end):
            p = softmax(logits[t - 1 - begin])
            nlls.append(-math.log(p[ids[t]]))
        scored_end = end
        if end == len(ids):
            break
        begin += stride
    nll = np.array(nlls)
    ppl = math.exp(nll.mean())
    return {"window": window, "stride": stride, "scored": len(nlls), "ppl": ppl,
            "error": ppl * math.sqrt(max(np.mean(nll ** 2) - nll.mean() ** 2, 0) / (len(nlls) - 1))}

def stages(logits, context, f):
    """transformers' processors in generate's order, the softmax of what is left after each."""
    x = np.array(logits, dtype=np.float32)
    out = [dict(name="model", **top(softmax(x), TOP))]
    for i in sorted(set(context)):
        x[i] = x[i] / np.float32(f["repeat_penalty"]) if x[i] > 0 else x[i] * np.float32(f["repeat_penalty"])
    out.append(dict(name="penalties", **top(softmax(x), TOP)))
    x = x / np.float32(f["temp"])
    out.append(dict(name="temperature", **top(softmax(x), TOP)))
    kth = np.sort(x)[-f["top_k"]]
    x = np.where(x >= kth, x, -np.inf)
    out.append(dict(name="top-k", left=int(np.isfinite(x).sum()), **top(softmax(x), TOP)))
    p = softmax(x)
    order = np.argsort(p, kind="stable")
    cum = np.cumsum(p[order])
    remove = cum <= 1 - f["top_p"]
    remove[-1] = False
    x[order[remove]] = -np.inf
    out.append(dict(name="top-p", left=int(np.isfinite(x).sum()), **top(softmax(x), TOP)))
    p = softmax(x)
    x = np.where(p >= f["min_p"] * p.max(), x, -np.inf)
    out.append(dict(name="min-p", left=int(np.isfinite(x).sum()), **top(softmax(x), TOP)))
    return out

def main():
    out = {"generator": "scripts/make_inside_golden.py", "reference": "ref_forward.py (numpy, fp32)",
           "gen_checkpoint": GEN_CHECKPOINT, "fwd_checkpoint": FWD_CHECKPOINT}
    with tempfile.TemporaryDirectory() as d:
        checkpoint(d, GEN_CHECKPOINT)
        model = Model(d)
        text = open(os.path.join(ROOT, "tests", "data", "ppl_text.txt"), encoding="utf-8").read()
        ids = golden.tok(text)
        out["ppl_ids"] = ids
        out["ppl"] = [perplexity(model, ids, w, s) for w, s in PPL_CASES]

        vids = golden.tok(VERBOSE_PROMPT)
        dump = {}
        logits = model.forward(vids, dump)
        out["verbose"] = {"prompt": VERBOSE_PROMPT, "prompt_ids": vids, **top(softmax(logits[-1]), 4),
                          "resid_norms": [float(np.linalg.norm(dump["hidden"][l + 1][-1].astype(np.float64)))
                                          for l in range(model.cfg["num_hidden_layers"])]}

        sids = golden.tok(STAGE_PROMPT)
        logits = model.forward(sids)
        out["stages"] = {"prompt": STAGE_PROMPT, "prompt_ids": sids, "flags": STAGE_FLAGS,
                         "stages": stages(logits[-1], sids, STAGE_FLAGS)}
    with tempfile.TemporaryDirectory() as d:
        checkpoint(d, FWD_CHECKPOINT)
        model = Model(d)
        ids = golden.lcg_ids(41, FWD_TOKENS, model.cfg["vocab_size"])
        dump = {}
        logits = model.forward(ids, dump)
        hidden = dump["hidden"]
        L = model.cfg["num_hidden_layers"]
        lens_id, lens_prob, norms, outliers = [], [], [], []
        for l in range(L):
            lens = model.lens(hidden[l + 1])
            probs = [softmax(row) for row in lens]
            lens_id.append([int(np.argmax(p)) for p in probs])
            lens_prob.append([float(p.max()) for p in probs])
            norms.append([float(np.linalg.norm(r.astype(np.float64))) for r in hidden[l + 1]])
            outliers.append([[int(i) for i in np.argsort(-np.abs(r), kind="stable")[:3]] for r in hidden[l + 1]])
        final = [softmax(row) for row in logits]
        out["forward"] = {"ids": ids, "attention": np.round(dump["attn"].astype(np.float64), 7).tolist(),
                          "embed_norms": [float(np.linalg.norm(r.astype(np.float64))) for r in hidden[0]],
                          "resid_norms": norms, "outlier_dims": outliers, "lens_id": lens_id, "lens_prob": lens_prob,
                          "final_id": [int(np.argmax(p)) for p in final], "final_prob": [float(p.max()) for p in final]}
    with open(os.path.join(ROOT, "tests", "data", "inside_golden.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")

if __name__ == "__main__":
    main()
