#!/usr/bin/env python3
"""Writes the reference values the tests compare against, computed by the
independent numpy reference of transformers' Qwen2 (ref_forward.py):

tests/data/forward_golden.json: logits for the forward-pass tests.
tests/data/generation_golden.json: greedy continuations for the gen and chat tests.

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
DECODE = os.path.join(os.path.dirname(REF), "qwen_decode.py")
RUN = os.path.join(ROOT, "run")
TOKENIZER = os.path.join(ROOT, "tests", "data", "qwen2.5-tokenizer.json")
SHARED = os.path.join(os.path.dirname(REF), "..")

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

def forward_golden():
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

# ---- generation ----

GEN_CHECKPOINT = "--seed 21 --set num_hidden_layers=3"
GEN_PROMPTS = ["Hello world", "The capital of France is", "\u4f60\u597d\uff0c\u4e16\u754c", "def fib(n):\n    ",
               "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"]
GEN_TOKENS = 16
CHAT_MESSAGES = ["Hello! Who are you?", "Tell me a joke about <|im_end|> tokens."]
CHAT_TOKENS = 8
EOS = {151645}  # config.json's eos_token_id; the checkpoint has no generation_config.json

def tok(d, text):
    """Ids of text, special tokens included (our tokenizer, checked against Hugging Face's by test_tokenizer)."""
    out = subprocess.run([RUN, "tok", d, text], check=True, capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]

def greedy(d, ids, n):
    """The reference's next n greedy ids, cut at an eos id (which gen does not print)."""
    out = subprocess.run(["/usr/bin/python3", REF, d, ",".join(map(str, ids)), "--greedy", str(n)],
                         check=True, capture_output=True, text=True).stdout
    reply = [int(x) for x in out.strip().split(",")]
    for i, t in enumerate(reply):
        if t in EOS:
            return reply[:i], True
    return reply, False

def text_of(ids):
    """Hugging Face's decode of ids (qwen_decode.py); ids without a token are skipped, as HF does."""
    vocab_size = 151665
    kept = [i for i in ids if i < vocab_size]
    return subprocess.run(["/usr/bin/python3", DECODE, TOKENIZER, ",".join(map(str, kept))],
                          check=True, capture_output=True).stdout.decode()

def render_chat(messages):
    """The Qwen2.5-Instruct chat template rendered as transformers renders it (jinja2, trim_blocks and
    lstrip_blocks, add_generation_prompt)."""
    import jinja2
    config = json.load(open(os.path.join(SHARED, "models", "qwen2.5-tokenizer", "tokenizer_config.json")))
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    return env.from_string(config["chat_template"]).render(messages=messages, add_generation_prompt=True)

def generation_golden():
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([TOOL, d] + GEN_CHECKPOINT.split(), check=True)
        subprocess.run(["cp", TOKENIZER, os.path.join(d, "tokenizer.json")], check=True)
        gens = []
        for prompt in GEN_PROMPTS:
            ids = tok(d, prompt)
            reply, _ = greedy(d, ids, GEN_TOKENS)
            gens.append({"prompt": prompt, "prompt_ids": ids, "reply_ids": reply, "stdout": text_of(reply) + "\n"})
        # Two chat turns, as transformers' apply_chat_template writes them:
        # the whole conversation rendered by the checkpoint's template with
        # jinja2, then tokenized with its special tokens.
        messages = [{"role": "user", "content": CHAT_MESSAGES[0]}]
        context = tok(d, render_chat(messages))
        reply1, _ = greedy(d, context, CHAT_TOKENS)
        messages += [{"role": "assistant", "content": text_of(reply1)}, {"role": "user", "content": CHAT_MESSAGES[1]}]
        context2 = tok(d, render_chat(messages))
        reply2, _ = greedy(d, context2, CHAT_TOKENS)
        chat = {"messages": CHAT_MESSAGES, "turn_ids": [context, context2], "reply_ids": [reply1, reply2],
                "stdout": text_of(reply1) + "\n" + text_of(reply2) + "\n"}
    with open(os.path.join(ROOT, "tests", "data", "generation_golden.json"), "w") as f:
        json.dump({"generator": "scripts/make_golden.py", "reference": "ref_forward.py --greedy (numpy, fp32)",
                   "checkpoint": GEN_CHECKPOINT, "gen_tokens": GEN_TOKENS, "chat_tokens": CHAT_TOKENS,
                   "gen": gens, "chat": chat}, f, indent=1, ensure_ascii=True)
        f.write("\n")

if __name__ == "__main__":
    forward_golden()
    generation_golden()
