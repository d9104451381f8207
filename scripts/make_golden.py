#!/usr/bin/env python3
"""Writes tests/data/forward_golden.json: reference logits for the forward-pass
tests, computed by the independent numpy reference (ref_forward.py).

For each case a checkpoint is generated with tests/make_checkpoint (the same
deterministic generator the tests run), 40 token ids are fed through the
reference, and a sample of each position's logits is kept: the argmax, the
largest |logit|, and the logits of 64 fixed ids. Developers rerun this when
the cases change; the tests themselves need neither numpy nor ../shared.

usage: scripts/make_golden.py [REF_FORWARD] (default ../shared/tools/ref_forward.py)
needs: /usr/bin/python3 with numpy (Debian python3-numpy), and `make build/tests/make_checkpoint`
"""
import array, json, os, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "tools", "ref_forward.py")
TOOL = os.path.join(ROOT, "build", "tests", "make_checkpoint")
N_TOKENS, N_SAMPLES = 40, 64

# name, make_checkpoint arguments (the vocabulary is kept small except in the first case)
CASES = [
    ("gqa-full-vocab", "--seed 1"),
    ("mha", "--seed 2 --set vocab_size=2048 --set num_key_value_heads=4 --set rope_theta=10000.0 --set rms_norm_eps=1e-05"),
    ("mqa", "--seed 3 --set vocab_size=2048 --set hidden_size=128 --set num_attention_heads=8 --set num_key_value_heads=1 --set num_hidden_layers=3"),
    ("head-dim-128-untied", "--seed 4 --set vocab_size=2048 --set hidden_size=256 --set num_attention_heads=2 --set num_key_value_heads=1 --set head_dim=128 --set intermediate_size=512 --set num_hidden_layers=4 --set tie_word_embeddings=false"),
    ("odd-sizes", "--seed 5 --set vocab_size=1000 --set hidden_size=72 --set num_attention_heads=3 --set num_key_value_heads=1 --set head_dim=20 --set intermediate_size=100 --set num_hidden_layers=1"),
    ("f16", "--seed 6 --dtype f16 --set vocab_size=2048"),
    ("f32", "--seed 7 --dtype f32 --set vocab_size=2048 --set rope_theta=500000.0"),
]

def lcg_ids(seed, n, vocab):
    """Token ids from a small LCG, so the choice is visible and reproducible."""
    x, out = seed, []
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        out.append((x >> 33) % vocab)
    return out

def main():
    cases = []
    for name, args in CASES:
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([TOOL, d] + args.split(), check=True)
            cfg = json.load(open(os.path.join(d, "config.json")))
            vocab = cfg["vocab_size"]
            tokens = lcg_ids(len(cases) + 1, N_TOKENS, vocab)
            out = os.path.join(d, "ref.f32")
            subprocess.run(["/usr/bin/python3", REF, d, ",".join(map(str, tokens)), out], check=True)
            logits = array.array("f")
            with open(out, "rb") as f:
                logits.frombytes(f.read())
        samples = sorted(set(lcg_ids(99, N_SAMPLES, vocab)))
        positions = []
        for p in range(N_TOKENS):
            row = logits[p * vocab:(p + 1) * vocab]
            best = max(range(vocab), key=lambda i: row[i])
            positions.append({"argmax": best, "max_abs": max(abs(v) for v in row),
                              "logits": [float("%.9g" % row[i]) for i in samples]})
        cases.append({"name": name, "args": args, "tokens": tokens, "sample_ids": samples, "positions": positions})
        print(name, "done", file=sys.stderr)
    # One line per position keeps the file small and its diffs readable.
    with open(os.path.join(ROOT, "tests", "data", "forward_golden.json"), "w") as f:
        f.write('{"generator": "scripts/make_golden.py", "reference": "ref_forward.py (numpy, fp32)",\n"cases": [\n')
        for i, c in enumerate(cases):
            head = {k: c[k] for k in ("name", "args", "tokens", "sample_ids")}
            f.write(json.dumps(head)[:-1] + ',\n"positions": [\n')
            f.write(",\n".join(json.dumps(p, separators=(",", ":")) for p in c["positions"]))
            f.write("]}" + (",\n" if i + 1 < len(cases) else "\n"))
        f.write("]}\n")

if __name__ == "__main__":
    main()
