#!/usr/bin/env python3
"""Writes tests/data/embed_golden.json: the embeddings the numpy reference
gives (ref_forward.py --hidden: the residual stream after the last layer,
then the final RMSNorm as the model applies it), pooled three ways - the
last token, the mean of all tokens, the first (CLS) token - and
L2-normalised, for a few inputs given as token ids, on the same generated
checkpoint as tests/data/generation_golden.json (tests/make_checkpoint).
Some inputs are texts too ("texts", null for the others): their ids are
those Hugging Face's tokenizers gives for the Qwen2.5 tokenizer
(../shared/tokenizer-golden/qwen2.5.jsonl), so that a test may send the
text. tests/test_embed.c, tests/test_embed.sh and tests/test_server.py
compare `run`'s vectors with these within 1e-4.

usage: scripts/make_embed_golden.py [REF_FORWARD] (default ../shared/tools/ref_forward.py)
needs: /usr/bin/python3 with numpy, and `make build/tests/make_checkpoint`
"""
import json, os, shlex, subprocess, sys, tempfile
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "tools", "ref_forward.py")
TOOL = os.path.join(ROOT, "build", "tests", "make_checkpoint")
CHECKPOINT = json.load(open(os.path.join(ROOT, "tests", "data", "generation_golden.json")))["checkpoint"]
TOKENIZER_GOLDEN = os.path.join(os.path.dirname(REF), "..", "tokenizer-golden", "qwen2.5.jsonl")
# Token ids, or a text whose ids the tokenizer golden file holds.
INPUTS = ["Hello, world!", [785, 6722, 315, 9625, 374, 12095, 13, 576, 374, 264, 1273], [151643],
          "Na\u00efve caf\u00e9 owners in Z\u00fcrich serve cr\u00e8me br\u00fbl\u00e9e."]


def hf_ids():
    """text -> ids, as Hugging Face's tokenizers made them for the golden file."""
    with open(TOKENIZER_GOLDEN, encoding="utf-8") as f:
        return {d["text"]: d["ids"] for d in map(json.loads, f)}


def final_norm_weight(model):
    """model.norm.weight from the checkpoint's safetensors header and bytes."""
    path = os.path.join(model, "model.safetensors")
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        t = header["model.norm.weight"]
        start, end = t["data_offsets"]
        f.seek(8 + n + start)
        raw = f.read(end - start)
    if t["dtype"] == "F32":
        return np.frombuffer(raw, dtype="<f4").astype(np.float64)
    if t["dtype"] == "BF16":
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.frombuffer(raw, dtype="<f2").astype(np.float64)


def run():
    out = {"generator": "scripts/make_embed_golden.py", "reference": "ref_forward.py --hidden, final RMSNorm, pooled, L2-normalised",
           "checkpoint": CHECKPOINT, "inputs": [], "texts": [], "last": [], "mean": [], "cls": []}
    known = hf_ids()
    for item in INPUTS:
        out["texts"].append(item if isinstance(item, str) else None)
        out["inputs"].append(known[item] if isinstance(item, str) else item)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model")
        subprocess.run([TOOL, model, *shlex.split(CHECKPOINT)], check=True, stdout=subprocess.DEVNULL)
        cfg = json.load(open(os.path.join(model, "config.json")))
        dim, layers, eps = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["rms_norm_eps"]
        weight = final_norm_weight(model)
        for ids in out["inputs"]:
            logits, hidden = os.path.join(tmp, "l.f32"), os.path.join(tmp, "h.f32")
            subprocess.run(["/usr/bin/python3", REF, model, ",".join(map(str, ids)), logits, "--hidden", hidden], check=True)
            h = np.fromfile(hidden, dtype="<f4").reshape(layers + 1, len(ids), dim)[-1].astype(np.float64)
            # The final norm, as transformers' Qwen2RMSNorm applies it (in fp32 there).
            normed = h / np.sqrt((h * h).mean(-1, keepdims=True) + eps) * weight
            for name, v in (("last", normed[-1]), ("mean", normed.mean(0)), ("cls", normed[0])):
                out[name].append([round(float(x), 7) for x in v / np.linalg.norm(v)])
    path = os.path.join(ROOT, "tests", "data", "embed_golden.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    run()
