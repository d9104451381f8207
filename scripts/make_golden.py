#!/usr/bin/env python3
"""Writes the reference values the tests compare against, computed by the
independent numpy reference of transformers' Qwen2, Qwen3, Qwen3-MoE, Llama,
Mistral and Gemma 3 (ref_forward.py), and by PyTorch itself where it decides:

tests/data/forward_golden.json: logits for the forward-pass tests (and the experts each token went
  to in each sparse layer of the Qwen3-MoE cases, [sparse layer][position][k], most probable first).
tests/data/topk_golden.json: the experts torch.topk picks from probabilities
  full of ties (the order it leaves equal ones in is its own), for
  tests/test_moe.c.
tests/data/generation_golden.json: greedy continuations for the gen, chat and
  generate tests, with the reference's log-probabilities of the first step.
  Prompt ids come from Hugging Face's own tokenizer (tests/data/qwen2.5.jsonl),
  chat prompts from the real Qwen2.5 chat template rendered by jinja2.

For each case a checkpoint is generated with tests/make_checkpoint (the same
deterministic generator the tests run), 40 token ids are fed through the
reference, and a sample of each position's logits is kept: the argmax, the
largest |logit|, and the logits of 64 fixed ids. The long cases feed 300 ids,
so that sliding layers' rings of keys wrap around, and keep every 10th
position. An image-text Gemma 3 case (make_checkpoint --multimodal) is
computed from the text-only checkpoint with the same values, which the
reference reads. Developers rerun this when
the cases change; the tests themselves need neither numpy nor ../shared.

A Qwen3-MoE case whose router ties experts (make_checkpoint --router-groups)
is computed by the reference with torch.topk in place of its own choice of
experts (a stable sort: the lowest expert number first), and the script checks
that the two differ there, so that the case tests how ties are broken.

usage: scripts/make_golden.py [REF_FORWARD] [--cases NAME,...]
  REF_FORWARD: default ../shared/tools/ref_forward.py
  --cases: recompute only these forward cases (the others are kept as
  forward_golden.json has them) and the generation goldens, not torch.topk's
needs: /usr/bin/python3 with numpy and torch (Debian python3-numpy, python3-torch;
torch only for the Qwen3-MoE cases and topk_golden.json), jinja2, and
`make build/tests/make_checkpoint`
"""
import array, json, math, os, shlex, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = sys.argv[1:]
ONLY = set(ARGS[ARGS.index("--cases") + 1].split(",")) if "--cases" in ARGS else None
if ONLY is not None:
    del ARGS[ARGS.index("--cases"):ARGS.index("--cases") + 2]
REF = ARGS[0] if ARGS else os.path.join(ROOT, "..", "shared", "tools", "ref_forward.py")
TOOL = os.path.join(ROOT, "build", "tests", "make_checkpoint")
N_TOKENS, N_SAMPLES = 40, 64
DECODE = os.path.join(os.path.dirname(REF), "qwen_decode.py")
def unzipped(name):
    """A committed .gz file of tests/data, decompressed into a temporary file that lives as long as the script."""
    import atexit, gzip
    fd, path = tempfile.mkstemp(suffix="-" + name)
    with os.fdopen(fd, "wb") as f, gzip.open(os.path.join(ROOT, "tests", "data", name + ".gz")) as z:
        f.write(z.read())
    atexit.register(os.remove, path)
    return path

TOKENIZER = unzipped("qwen2.5-tokenizer.json")
SHARED = os.path.join(os.path.dirname(REF), "..")

# Llama 3.1's RoPE scaling, with an original context so short that it changes
# frequencies within the 40 positions of a test.
LLAMA3_SCALING = ('{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,'
                  '"original_max_position_embeddings":16}')

# Qwen3-MoE checkpoints: Qwen3's attention (head_dim 32), experts in the layers.
MOE = "--set model_type='\"qwen3_moe\"' --set vocab_size=2048 --set head_dim=32 "

# Gemma 3 (gemma3_text), as gemma-3-1b's config.json has it, with Gemma's
# activation and end tokens; and Mistral.
GEMMA = ("--set model_type='\"gemma3_text\"' --set hidden_act='\"gelu_pytorch_tanh\"' "
         "--set hidden_activation='\"gelu_pytorch_tanh\"' --set vocab_size=2048 --set bos_token_id=2 "
         "--set eos_token_id=[1,106] --set rope_local_base_freq=10000.0 ")
MISTRAL = "--set model_type='\"mistral\"' --set vocab_size=2048 --set bos_token_id=1 --set eos_token_id=2 --set rms_norm_eps=1e-05 "
# transformers 5's RoPE parameters for Gemma 3: one set per layer type.
GEMMA_ROPE_PARAMETERS = ('{"full_attention":{"rope_type":"linear","factor":4.0,"rope_theta":100000.0},'
                         '"sliding_attention":{"rope_type":"default","rope_theta":1000.0}}')

# name, make_checkpoint arguments (shell words; the vocabulary is kept small
# except in the full-vocab cases)
CASES = [
    ("gqa-full-vocab", "--seed 1"),
    ("mha", "--seed 2 --set vocab_size=2048 --set num_key_value_heads=4 --set rope_theta=10000.0 --set rms_norm_eps=1e-05"),
    ("mqa", "--seed 3 --set vocab_size=2048 --set hidden_size=128 --set num_attention_heads=8 --set num_key_value_heads=1 --set num_hidden_layers=3"),
    ("head-dim-128-untied", "--seed 4 --set vocab_size=2048 --set hidden_size=256 --set num_attention_heads=2 --set num_key_value_heads=1 --set head_dim=128 --set intermediate_size=512 --set num_hidden_layers=4 --set tie_word_embeddings=false"),
    ("odd-sizes", "--seed 5 --set vocab_size=1000 --set hidden_size=72 --set num_attention_heads=3 --set num_key_value_heads=1 --set head_dim=20 --set intermediate_size=100 --set num_hidden_layers=1"),
    ("f16", "--seed 6 --dtype f16 --set vocab_size=2048"),
    ("f32", "--seed 7 --dtype f32 --set vocab_size=2048 --set rope_theta=500000.0"),
    ("qwen3-head-dim-32", "--seed 8 --set model_type='\"qwen3\"' --set vocab_size=2048 --set head_dim=32"),
    ("qwen3-mha-bias-untied", "--seed 9 --set model_type='\"qwen3\"' --set vocab_size=2048 --set num_key_value_heads=4 --set attention_bias=true --set tie_word_embeddings=false --set num_hidden_layers=3"),
    ("llama-gqa-llama3-scaling", "--seed 10 --set model_type='\"llama\"' --set vocab_size=2048 --set rope_theta=500000.0 --set rms_norm_eps=1e-05 --set rope_scaling='" + LLAMA3_SCALING + "'"),
    ("llama-mqa-biases-untied", "--seed 11 --set model_type='\"llama\"' --set vocab_size=2048 --set hidden_size=96 --set num_attention_heads=3 --set num_key_value_heads=1 --set head_dim=48 --set intermediate_size=160 --set attention_bias=true --set mlp_bias=true --set tie_word_embeddings=false"),
    ("llama-mha-full-vocab", "--seed 12 --set model_type='\"llama\"' --set vocab_size=128256 --set num_key_value_heads=4 --set rope_theta=500000.0 --set rope_scaling='" + LLAMA3_SCALING + "'"),
    # Qwen3-MoE: the qwen3moe-tiny preset's shape (8 experts, top 2, layer 1 dense), ...
    ("qwen3moe-top2-dense-layer", MOE + "--seed 13 --set num_experts=8 --set num_experts_per_tok=2 --set moe_intermediate_size=48 --set num_hidden_layers=3 --set mlp_only_layers=[1] --set norm_topk_prob=true"),
    # ... top 1 of 16 without renormalisation, every second layer sparse, untied, experts 40 wide (not whole blocks of 32) ...
    ("qwen3moe-top1-step2-untied", MOE + "--seed 14 --set num_experts=16 --set num_experts_per_tok=1 --set moe_intermediate_size=40 --set num_hidden_layers=4 --set decoder_sparse_step=2 --set norm_topk_prob=false --set tie_word_embeddings=false --set hidden_size=96 --set num_attention_heads=3 --set num_key_value_heads=1"),
    # ... top 8 of 64 (qwen3moe-small's routing), MHA with biases ...
    ("qwen3moe-top8-of-64-bias", MOE + "--seed 15 --set num_experts=64 --set num_experts_per_tok=8 --set moe_intermediate_size=32 --set num_hidden_layers=2 --set norm_topk_prob=true --set num_key_value_heads=4 --set attention_bias=true"),
    # ... f32 weights, top 3 of 5, no renormalisation ...
    ("qwen3moe-f32-top3-of-5", "--dtype f32 " + MOE + "--seed 16 --set num_experts=5 --set num_experts_per_tok=3 --set moe_intermediate_size=64 --set num_hidden_layers=2 --set norm_topk_prob=false"),
    # ... and routers whose experts tie in pairs (top 1: every choice is a tie) or threes (top 2 of 12).
    ("qwen3moe-router-ties-top1", MOE + "--seed 17 --router-groups 2 --set num_experts=8 --set num_experts_per_tok=1 --set moe_intermediate_size=48 --set num_hidden_layers=2 --set norm_topk_prob=false"),
    ("qwen3moe-router-ties-top2", MOE + "--seed 18 --router-groups 3 --set num_experts=12 --set num_experts_per_tok=2 --set moe_intermediate_size=32 --set num_hidden_layers=3 --set norm_topk_prob=false"),
    # Gemma 3: the gemma3-tiny preset's shape (5 sliding layers with window 6, then a full one, linear RoPE scaling) ...
    ("gemma3-window-6-linear-rope", GEMMA + "--seed 40 --set num_hidden_layers=7 --set head_dim=32 --set query_pre_attn_scalar=32 --set sliding_window=6 --set rope_theta=1000000.0 --set rope_scaling='{\"rope_type\":\"linear\",\"factor\":8.0}'"),
    # ... MQA, layer_types, soft caps that bite, a query scale that is not 1/sqrt(head_dim), untied ...
    ("gemma3-mqa-softcaps-untied", GEMMA + "--seed 41 --set num_hidden_layers=3 --set num_key_value_heads=1 --set head_dim=64 --set query_pre_attn_scalar=256 --set sliding_window=4 --set layer_types='[\"sliding_attention\",\"full_attention\",\"sliding_attention\"]' --set attn_logit_softcapping=1.5 --set final_logit_softcapping=4.0 --set tie_word_embeddings=false"),
    # ... MHA with biases, transformers 5's rope_parameters, f32 weights ...
    ("gemma3-mha-bias-rope-parameters-f32", "--dtype f32 " + GEMMA + "--seed 42 --set num_hidden_layers=4 --set num_key_value_heads=4 --set head_dim=16 --set query_pre_attn_scalar=20 --set sliding_window=16 --set sliding_window_pattern=2 --set attention_bias=true --set rope_parameters='" + GEMMA_ROPE_PARAMETERS + "'"),
    # ... the image-text checkpoint's language model (gemma-3-4b's layout) ...
    ("gemma3-image-text", "--multimodal " + GEMMA + "--seed 43 --set num_hidden_layers=6 --set head_dim=32 --set query_pre_attn_scalar=32 --set sliding_window=5 --set rope_scaling='{\"rope_type\":\"linear\",\"factor\":8.0}'"),
    # ... and 300 tokens through windows of 20: the rings of keys wrap around.
    ("gemma3-long-ring", GEMMA + "--seed 44 --set num_hidden_layers=3 --set head_dim=32 --set query_pre_attn_scalar=32 --set sliding_window=20 --set sliding_window_pattern=3 --set max_position_embeddings=512"),
    # Mistral: the mistral-tiny preset's shape (window 5, untied) ...
    ("mistral-window-5", MISTRAL + "--seed 45 --set head_dim=16 --set sliding_window=5 --set tie_word_embeddings=false"),
    # ... no window (v0.2, v0.3), MQA; attention_bias is not Mistral's (its layers have no biases) ...
    ("mistral-no-window-mqa", MISTRAL + "--seed 46 --set num_attention_heads=8 --set num_key_value_heads=1 --set hidden_size=128 --set sliding_window=null --set attention_bias=true --set num_hidden_layers=3"),
    # ... and 300 tokens through a window of 100.
    ("mistral-long-ring", MISTRAL + "--seed 47 --set sliding_window=100 --set tie_word_embeddings=false --set max_position_embeddings=4096"),
]
# Cases fed LONG_TOKENS ids, of which every LONG_EVERY-th position is kept.
LONG_TOKENS, LONG_EVERY = 300, 10
# The cases whose routers tie experts (their goldens come from torch.topk).
TIED_ROUTERS = ("--router-groups",)

def lcg_ids(seed, n, vocab):
    """Token ids from a small LCG, so the choice is visible and reproducible."""
    x, out = seed, []
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        out.append((x >> 33) % vocab)
    return out

def reference_module():
    """ref_forward.py as a module, to call its forward() with torch.topk's choice of experts."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("ref_forward", REF)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    return ref

def reference_with_torch_topk(d, tokens):
    """The reference's logits with each token's experts chosen by torch.topk (as transformers'
    Qwen3MoeSparseMoeBlock does) instead of by its own stable sort (the lowest expert number first
    among equals), and the experts chosen: [sparse layer][position][k], most probable first."""
    import numpy as np, torch
    cfg = json.load(open(os.path.join(d, "config.json")))
    k, n = cfg["num_experts_per_tok"], len(tokens)
    chosen = []

    class NumpyWithTorchTopk:
        """numpy, but for argsort, which the reference uses only as argsort(-probs, kind="stable")[:k]
        to order the experts a token takes, token after token, layer after layer: here torch.topk's k
        come first, the rest after."""
        def __getattr__(self, name):
            return getattr(np, name)
        def argsort(self, a, kind=None):
            top = torch.topk(torch.from_numpy(np.ascontiguousarray(-a, dtype=np.float32)), k).indices.tolist()
            chosen.append(top)
            return np.array(top + [i for i in range(len(a)) if i not in top])

    ref = reference_module()
    ref.np = NumpyWithTorchTopk()
    logits = ref.forward(cfg, ref.load(d), tokens)
    routes = [chosen[i:i + n] for i in range(0, len(chosen), n)]
    return array.array("f", np.asarray(logits, dtype=np.float32).ravel().tobytes()), routes

def forward_golden():
    cases = []
    path = os.path.join(ROOT, "tests", "data", "forward_golden.json")
    kept = {c["name"]: c for c in json.load(open(path))["cases"]} if ONLY is not None else {}
    for name, args in CASES:
        if ONLY is not None and name not in ONLY:
            cases.append(kept[name])
            continue
        with tempfile.TemporaryDirectory() as d:
            # The reference reads the text-only checkpoint an image-text one holds.
            subprocess.run([TOOL, d] + [w for w in shlex.split(args) if w != "--multimodal"], check=True)
            cfg = json.load(open(os.path.join(d, "config.json")))
            vocab = cfg["vocab_size"]
            long = name.endswith("-long-ring")
            tokens = lcg_ids(len(cases) + 1, LONG_TOKENS if long else N_TOKENS, vocab)
            out = os.path.join(d, "ref.f32")
            subprocess.run(["/usr/bin/python3", REF, d, ",".join(map(str, tokens)), out], check=True)
            logits = array.array("f")
            with open(out, "rb") as f:
                logits.frombytes(f.read())
            routes = None
            if cfg["model_type"] == "qwen3_moe":
                topk_logits, routes = reference_with_torch_topk(d, tokens)
            if any(flag in args for flag in TIED_ROUTERS):
                stable, logits = logits, topk_logits
                differ = max(abs(a - b) for a, b in zip(logits, stable)) / max(abs(v) for v in logits)
                assert differ > 1e-2, f"{name}: torch.topk and the lowest-number-first choice agree ({differ:.1e})"
                print(f"{name}: torch.topk's ties differ from lowest-number-first by {differ:.2e}", file=sys.stderr)
        samples = sorted(set(lcg_ids(99, N_SAMPLES, vocab)))
        positions, every = [], LONG_EVERY if long else 1
        for p in range(0, len(tokens), every):
            row = logits[p * vocab:(p + 1) * vocab]
            best = max(range(vocab), key=lambda i: row[i])
            positions.append({"argmax": best, "max_abs": max(abs(v) for v in row),
                              "logits": [float("%.9g" % row[i]) for i in samples]})
        cases.append({"name": name, "args": args, "tokens": tokens, "sample_ids": samples, "positions": positions})
        if every > 1:
            cases[-1]["every"] = every
        if routes:
            cases[-1]["routes"] = routes
        print(name, "done", file=sys.stderr)
    # One line per position keeps the file small and its diffs readable.
    with open(path, "w") as f:
        f.write('{"generator": "scripts/make_golden.py", "reference": "ref_forward.py (numpy, fp32)",\n"cases": [\n')
        for i, c in enumerate(cases):
            head = {k: c[k] for k in ("name", "args", "tokens", "every", "sample_ids", "routes") if k in c}
            f.write(json.dumps(head)[:-1] + ',\n"positions": [\n')
            f.write(",\n".join(json.dumps(p, separators=(",", ":")) for p in c["positions"]))
            f.write("]}" + (",\n" if i + 1 < len(cases) else "\n"))
        f.write("]}\n")

# ---- generation ----

GEN_CHECKPOINT = "--seed 21 --set num_hidden_layers=3"
HF_ENCODINGS = os.path.join(ROOT, "tests", "data", "qwen2.5.jsonl")
GEN_PROMPT_LINES = [0, 2, 117, 273, 374]  # lines of HF_ENCODINGS, whose ids Hugging Face's tokenizer made
GEN_TOKENS = 16
CHAT_MESSAGES = ["hi", "Tell me a joke about <|im_end|> tokens."]
CHAT_FIRST_LINE = 374                      # the first turn as the template renders it, with HF's ids
CHAT_TOKENS = 8
EOS = {151645}  # config.json's eos_token_id; the checkpoint has no generation_config.json
# The other families, for tests/test_generate.c: greedy continuations of token ids.
FAMILY_CHECKPOINTS = [
    ("qwen3", "--seed 31 --set model_type='\"qwen3\"' --set vocab_size=2048 --set head_dim=32 --set eos_token_id=2000"),
    ("llama", "--seed 32 --set model_type='\"llama\"' --set vocab_size=2048 --set rope_theta=500000.0 --set eos_token_id=2000 --set rope_scaling='" + LLAMA3_SCALING + "'"),
    ("qwen3moe", MOE + "--seed 33 --set num_experts=8 --set num_experts_per_tok=2 --set moe_intermediate_size=48 --set num_hidden_layers=3 --set mlp_only_layers=[1] --set norm_topk_prob=true --set eos_token_id=2000"),
    ("gemma3", GEMMA + "--seed 34 --set num_hidden_layers=7 --set head_dim=32 --set query_pre_attn_scalar=32 --set sliding_window=6 --set rope_scaling='{\"rope_type\":\"linear\",\"factor\":8.0}' --set final_logit_softcapping=6.0 --set eos_token_id=2000"),
    ("mistral", MISTRAL + "--seed 35 --set head_dim=16 --set sliding_window=5 --set tie_word_embeddings=false --set eos_token_id=2000"),
]
FAMILY_TOKENS = 12
TOP_LOGPROBS = 5

def hf_encodings():
    return [json.loads(line) for line in open(HF_ENCODINGS, encoding="utf-8")]

_reference_tokenizer = None

def tok(text):
    """Ids of text, special tokens included, for texts that are not in HF_ENCODINGS: by the
    standard-library reference of Hugging Face's BPE in scripts/make_small_tokenizers.py (which shares
    nothing with run's tokenizer, and which this script first checks on every line of HF_ENCODINGS),
    after NFC, the Qwen tokenizer's normalizer."""
    global _reference_tokenizer
    if _reference_tokenizer is None:
        import importlib.util, unicodedata
        spec = importlib.util.spec_from_file_location("small", os.path.join(ROOT, "scripts", "make_small_tokenizers.py"))
        small = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(small)
        doc = json.load(open(TOKENIZER, encoding="utf-8"))
        assert doc["normalizer"]["type"] == "NFC"
        doc["normalizer"] = None
        ref = small.Reference(doc)
        _reference_tokenizer = lambda text: ref.encode(unicodedata.normalize("NFC", text))
        for line in hf_encodings():
            assert _reference_tokenizer(line["text"]) == line["ids"], line["text"]
    return _reference_tokenizer(text)

def ref_logits(d, ids, vocab):
    """The reference's logits of the last position."""
    with tempfile.NamedTemporaryFile() as f:
        subprocess.run(["/usr/bin/python3", REF, d, ",".join(map(str, ids)), f.name], check=True)
        logits = array.array("f")
        logits.frombytes(open(f.name, "rb").read())
    return logits[len(logits) - vocab:]

def top_logprobs(logits, n):
    """The n most probable ids with their log-softmax, in double precision."""
    top = max(logits)
    log_sum = top + math.log(sum(math.exp(v - top) for v in logits))
    best = sorted(range(len(logits)), key=lambda i: (-logits[i], i))[:n]
    return [{"id": i, "logprob": logits[i] - log_sum} for i in best]

def greedy(d, ids, n, eos=EOS):
    """The reference's next n greedy ids, cut at an eos id (which gen does not print)."""
    out = subprocess.run(["/usr/bin/python3", REF, d, ",".join(map(str, ids)), "--greedy", str(n)],
                         check=True, capture_output=True, text=True).stdout
    reply = [int(x) for x in out.strip().split(",")]
    for i, t in enumerate(reply):
        if t in eos:
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

def eos_case(d, prompt_ids, reply):
    """An end token the greedy continuation reaches: its first id that did not come before, from the
    fourth on. gen with that id as eos must print the reply up to it and stop."""
    k = next(i for i in range(3, len(reply)) if reply[i] not in reply[:i])
    return {"prompt_ids": prompt_ids, "eos_id": reply[k], "n_before": k, "stdout": text_of(reply[:k]) + "\n"}

def generation_golden():
    lines = hf_encodings()
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([TOOL, d] + shlex.split(GEN_CHECKPOINT), check=True)
        subprocess.run(["cp", TOKENIZER, os.path.join(d, "tokenizer.json")], check=True)
        vocab = json.load(open(os.path.join(d, "config.json")))["vocab_size"]
        gens = []
        for line in GEN_PROMPT_LINES:
            prompt, ids = lines[line]["text"], lines[line]["ids"]
            reply, _ = greedy(d, ids, GEN_TOKENS)
            gens.append({"prompt": prompt, "prompt_ids": ids, "reply_ids": reply, "stdout": text_of(reply) + "\n",
                         "top_logprobs": top_logprobs(ref_logits(d, ids, vocab), TOP_LOGPROBS)})
        eos = eos_case(d, gens[0]["prompt_ids"], gens[0]["reply_ids"])
        # Two chat turns, as transformers' apply_chat_template writes them:
        # the whole conversation rendered by the checkpoint's template with
        # jinja2, then tokenized with its special tokens.
        messages = [{"role": "user", "content": CHAT_MESSAGES[0]}]
        assert render_chat(messages) == lines[CHAT_FIRST_LINE]["text"]
        context = lines[CHAT_FIRST_LINE]["ids"]
        reply1, _ = greedy(d, context, CHAT_TOKENS)
        messages += [{"role": "assistant", "content": text_of(reply1)}, {"role": "user", "content": CHAT_MESSAGES[1]}]
        context2 = tok(render_chat(messages))
        reply2, _ = greedy(d, context2, CHAT_TOKENS)
        chat = {"messages": CHAT_MESSAGES, "conversation": messages, "turn_texts": [lines[CHAT_FIRST_LINE]["text"],
                render_chat(messages)], "turn_ids": [context, context2], "reply_ids": [reply1, reply2],
                "stdout": text_of(reply1) + "\n" + text_of(reply2) + "\n"}
    families = []
    for name, args in FAMILY_CHECKPOINTS:
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([TOOL, d] + shlex.split(args), check=True)
            vocab = json.load(open(os.path.join(d, "config.json")))["vocab_size"]
            ids = lcg_ids(len(families) + 50, 10, vocab)
            reply, _ = greedy(d, ids, FAMILY_TOKENS, eos={2000})
            families.append({"name": name, "checkpoint": args, "prompt_ids": ids, "reply_ids": reply,
                             "top_logprobs": top_logprobs(ref_logits(d, ids, vocab), TOP_LOGPROBS)})
    with open(os.path.join(ROOT, "tests", "data", "generation_golden.json"), "w") as f:
        json.dump({"generator": "scripts/make_golden.py", "reference": "ref_forward.py --greedy (numpy, fp32)",
                   "checkpoint": GEN_CHECKPOINT, "gen_tokens": GEN_TOKENS, "chat_tokens": CHAT_TOKENS,
                   "gen": gens, "eos": eos, "chat": chat, "family_tokens": FAMILY_TOKENS, "families": families}, f,
                  indent=1, ensure_ascii=True)
        f.write("\n")

# ---- torch.topk's choice of experts ----

TOPK_SHAPES = [  # (experts, k): both of its algorithms (k * 64 <= experts: a heap), small and large
    (1, 1), (2, 1), (3, 1), (3, 2), (4, 1), (4, 3), (5, 2), (8, 1), (8, 2), (8, 8), (12, 2), (16, 4), (17, 16),
    (33, 5), (64, 1), (64, 8), (65, 1), (100, 20), (128, 1), (128, 2), (128, 8), (129, 2), (256, 3), (256, 4)]

def topk_golden():
    """Probability vectors with many ties (few distinct values, sometimes NaN, sometimes all equal) and
    the experts torch.topk (largest, sorted: as transformers calls it) returns for them."""
    import random, torch
    rng = random.Random(26)
    cases = []
    for experts, k in TOPK_SHAPES:
        for trial in range(12):
            distinct = [1, 2, 3, 5, 50][trial % 5]
            probs = [rng.randrange(distinct) / 64 for _ in range(experts)]
            if trial >= 10:
                probs = [None if rng.random() < 0.2 else p for p in probs]  # None: NaN, which topk puts first
            values = torch.tensor([float("nan") if p is None else p for p in probs], dtype=torch.float32)
            cases.append({"probs": probs, "k": k, "experts": torch.topk(values, k).indices.tolist()})
    with open(os.path.join(ROOT, "tests", "data", "topk_golden.json"), "w") as f:
        f.write('{"generator": "scripts/make_golden.py", "reference": "torch.topk %s (CPU)",\n"cases": [\n' % torch.__version__)
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("]}\n")

if __name__ == "__main__":
    if ONLY is None:
        topk_golden()
    forward_golden()
    generation_golden()
