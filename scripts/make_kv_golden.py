#!/usr/bin/env python3
"""Writes tests/data/kv_cache_golden.json: the logits the independent numpy
reference (ref_forward.py) computes when its keys and values are rounded as
a bf16 or q8_0 KV cache holds them, for tests/test_net.c.

The reference has no KV cache: its attention takes k (after the norms and
RoPE) and v as computed. This script loads it as a module with its one line
`q, k = rope(q), rope(k)` (one in each forward function) changed to round k
and v right after it, by the definitions written out below in numpy (they
share no code with run's):
  bf16: each value to the nearest bf16, ties to even;
  q8_0: per block of 32 values of a head's row, d = max|x| / 127 rounded to
        f16 (65504 if that overflows), q = x / d rounded to even and clamped
        to [-127, 127] (0 when d is 0), the value q * d.
Everything else is the reference as it is. The checkpoints and token ids are
those of tests/data/forward_golden.json (made by scripts/make_golden.py),
with the same sample of logits kept per position.

Rounding is not continuous: a value that lies within a float32 error of a
rounding boundary goes one way here and maybe the other way in run, whose
keys and values before rounding differ from numpy's by a few float32 ulps
(other summation orders in the projections, norms and RoPE: about 1e-7 to
1e-6 of each value). One value one step off moves these small random
models' logits by up to a few 1e-3. So for each entry the script also
measures that noise: how far the rounded reference's logits move when k
and v are multiplied by 1 + 1e-6 g (g standard normal, per value) before
rounding, the most of NOISE_DRAWS draws ("noise", relative to the largest
logit). The test accepts run within max(1e-4, 3 x noise) of the rounded
reference; the script checks that this is less than the rounding's own
effect (the rounded reference against the exact one), so that the test
tells a cache that rounds from one that does not.

usage: scripts/make_kv_golden.py [REF_FORWARD]
  REF_FORWARD: default ../shared/tools/ref_forward.py
needs: /usr/bin/python3 with numpy (Debian python3-numpy), and
`make build/tests/make_checkpoint`
"""
import json, os, shlex, subprocess, sys, tempfile, types

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "tools", "ref_forward.py")
TOOL = os.path.join(ROOT, "build", "tests", "make_checkpoint")
NOISE_DRAWS, NOISE = 4, 1e-6

# Cases of forward_golden.json and the (key, value) types of each: head dims
# 16 and 20 (bf16 only: q8_0 needs whole blocks of 32), 32, 64 and 128;
# GQA, MQA; Qwen3's q/k norms; Gemma's soft caps and sliding layers whose
# rings wrap around (300 tokens through windows of 20), Mistral's window.
ENTRIES = [
    ("llama-gqa-llama3-scaling", [("bf16", "bf16")]),
    ("odd-sizes", [("bf16", "bf16")]),
    ("head-dim-128-untied", [("bf16", "bf16"), ("q8_0", "q8_0"), ("q8_0", "f32"), ("f32", "q8_0")]),
    ("qwen3-head-dim-32", [("bf16", "bf16"), ("q8_0", "q8_0"), ("bf16", "q8_0")]),
    ("gemma3-mqa-softcaps-untied", [("bf16", "bf16"), ("q8_0", "q8_0")]),
    ("gemma3-long-ring", [("bf16", "bf16"), ("q8_0", "q8_0")]),
    ("mistral-long-ring", [("bf16", "bf16")]),
]


def round_bf16(x):
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).reshape(x.shape)


def round_q8_0(x):
    x = np.ascontiguousarray(x, dtype=np.float32)
    shape = x.shape
    assert shape[-1] % 32 == 0, "q8_0 needs whole blocks of 32"
    blocks = x.reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1, keepdims=True)
    with np.errstate(over="ignore"):
        d = (amax / np.float32(127)).astype(np.float16)
    d[np.isinf(d)] = np.float16(65504)
    d = d.astype(np.float32)
    q = np.zeros_like(blocks)
    np.divide(blocks, d, out=q, where=d > 0)
    q = np.clip(np.rint(q), -127, 127)
    return (q * d).astype(np.float32).reshape(shape)


ROUNDING = {"f32": lambda x: x, "bf16": round_bf16, "q8_0": round_q8_0}


def reference(key_type, value_type):
    """ref_forward.py as a module whose attention takes k and v rounded as the types say."""
    source = open(REF).read()
    line = "q, k = rope(q), rope(k)"
    assert source.count(line) == 2, "ref_forward.py changed: look again at where k and v enter attention"
    source = source.replace(line, line + "; k = KV_ROUND_K(k); v = KV_ROUND_V(v)")
    module = types.ModuleType("ref_forward_rounded")
    module.__dict__.update(KV_ROUND_K=ROUNDING[key_type], KV_ROUND_V=ROUNDING[value_type])
    exec(compile(source, REF, "exec"), module.__dict__)
    return module


def sampled(logits, case):
    """The sampled logits at the case's golden positions: [position][sample]."""
    every = case.get("every", 1)
    return np.array([[logits[p][i] for i in case["sample_ids"]] for p in range(0, len(case["tokens"]), every)])


def main():
    golden = {c["name"]: c for c in json.load(open(os.path.join(ROOT, "tests", "data", "forward_golden.json")))["cases"]}
    entries = []
    for name, type_pairs in ENTRIES:
        case = golden[name]
        every = case.get("every", 1)
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([TOOL, d] + shlex.split(case["args"]), check=True)
            cfg = json.load(open(os.path.join(d, "config.json")))
            weights = reference("f32", "f32").load(d)
            scale = max(p["max_abs"] for p in case["positions"])
            for key_type, value_type in type_pairs:
                logits = reference(key_type, value_type).forward(cfg, weights, case["tokens"])
                noise = 0.0
                for draw in range(NOISE_DRAWS):
                    rng = np.random.default_rng(draw)
                    def jittered(kind):
                        return lambda x: ROUNDING[kind](x * (1 + np.float32(NOISE) * rng.standard_normal(x.shape, dtype=np.float32)))
                    ROUNDING["jittered keys"], ROUNDING["jittered values"] = jittered(key_type), jittered(value_type)
                    moved = reference("jittered keys", "jittered values").forward(cfg, weights, case["tokens"])
                    noise = max(noise, float(np.abs(sampled(moved, case) - sampled(logits, case)).max()) / scale)
                exact = np.array([p["logits"] for p in case["positions"]])
                effect = float(np.abs(sampled(logits, case) - exact).max()) / scale
                tolerance = max(1e-4, 3 * noise)
                assert tolerance < effect, f"{name} {key_type}/{value_type}: noise {noise:.1e} hides the rounding ({effect:.1e})"
                print(f"{name}: keys {key_type}, values {value_type}: rounding moves the sampled logits by {effect:.2e}, "
                      f"noise {noise:.2e}", file=sys.stderr)
                positions = []
                for p, row in zip(range(0, len(case["tokens"]), every), sampled(logits, case)):
                    positions.append({"argmax": int(logits[p].argmax()), "max_abs": float(np.abs(logits[p]).max()),
                                      "logits": [float("%.9g" % v) for v in row]})
                entries.append({"name": name, "key_type": key_type, "value_type": value_type, "noise": float("%.3g" % noise),
                                "positions": positions})
    with open(os.path.join(ROOT, "tests", "data", "kv_cache_golden.json"), "w") as f:
        f.write('{"generator": "scripts/make_kv_golden.py", "reference": "ref_forward.py (numpy, fp32), k and v rounded",\n'
                '"entries": [\n')
        for i, e in enumerate(entries):
            head = {k: e[k] for k in ("name", "key_type", "value_type", "noise")}
            f.write(json.dumps(head)[:-1] + ',\n"positions": [\n')
            f.write(",\n".join(json.dumps(p, separators=(",", ":")) for p in e["positions"]))
            f.write("]}" + (",\n" if i + 1 < len(entries) else "\n"))
        f.write("]}\n")


if __name__ == "__main__":
    main()
