#!/usr/bin/env python3
"""scripts/make_hostile.py MAKE_CHECKPOINT OUTDIR - writes the corpus of
malformed checkpoints that tests/test_hostile.sh feeds to run.

OUTDIR/base is a small valid checkpoint: config.json and model.safetensors
from make_checkpoint (one layer, hidden size 4, 272 tokens), and a tiny
tokenizer.json made here (256 byte tokens, 13 merges, 3 added tokens).
Every other folder OUTDIR/NAME is that checkpoint with one thing broken; the
files it keeps unchanged are symbolic links to base's. OUTDIR/cases.txt has
one line per case, "NAME|TEXT": run must refuse the folder with a message
that contains TEXT. OUTDIR/nan-weights, not in the list, is well-formed
but for its NaN weights: gen must refuse to sample from its logits.

The corpus is committed; to make it again:
  make build/tests/make_checkpoint
  python3 scripts/make_hostile.py build/tests/make_checkpoint tests/hostile
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

REMOVE = object()  # a JSON field that is left out


def edited(doc, **changes):
    """A copy of JSON object doc with fields changed (REMOVE: deleted)."""
    out = dict(doc)
    for key, value in changes.items():
        if value is REMOVE:
            del out[key]
        else:
            out[key] = value
    return out


# ---- the base checkpoint's tokenizer ----

# The Qwen2 pre-tokenizer regex, as tokenizer.json holds it (JSON-decoded).
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Merges in rank order, in the byte-level alphabet ("Ġ" is a space).
MERGES = ["h i", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "e l", "h el", "l o", "hel lo", "Ġ t", "h e", "Ġt he"]
ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 256 + len(MERGES) + len(ADDED)  # 272: every id has a token

# The base model's sizes: small, so that the corpus stays small.
HIDDEN, MLP = 4, 8  # 2 query heads and 1 key/value head of 2


def byte_chars():
    """GPT-2's byte-level alphabet: the character that shows each byte."""
    chars, extra = [], 256
    for b in range(256):
        if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE:
            chars.append(chr(b))
        else:
            chars.append(chr(extra))
            extra += 1
    return chars


def tokenizer():
    """A valid tokenizer.json: byte b is token b, then the merges' tokens,
    then the added tokens."""
    vocab = {c: b for b, c in enumerate(byte_chars())}
    for m in MERGES:
        vocab[m.replace(" ", "")] = len(vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    added = [{"id": len(vocab) + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, c in enumerate(ADDED)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": list(MERGES)},
    }


# ---- safetensors files ----

def st_read(data):
    """The tensors of a safetensors file as a list of (name, entry) pairs
    (its __metadata__ left out), and its data area."""
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    return [(k, v) for k, v in header.items() if k != "__metadata__"], data[8 + n:]


def st_raw(header, data=b"", declared=None):
    """A file from header bytes, padded with spaces to a multiple of 8;
    `declared` overrides the length written in the first 8 bytes."""
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header) if declared is None else declared) + header + data


def st_write(pairs, data):
    """A file from (name, entry) pairs: JSON is written by hand, so that a
    name may repeat."""
    members = ",".join(json.dumps(k) + ":" + json.dumps(v, separators=(",", ":")) for k, v in pairs)
    return st_raw(("{" + members + "}").encode(), data)


def st_compact(pairs, data):
    """The file with its tensors' data laid out again, back to back, in the
    pairs' order: a valid layout whatever was removed or resized."""
    out, new_data, at = [], b"", 0
    for name, entry in pairs:
        begin, end = entry["data_offsets"]
        chunk = data[begin:end]
        out.append((name, dict(entry, data_offsets=[at, at + len(chunk)])))
        new_data += chunk
        at += len(chunk)
    return st_write(out, new_data)


def with_entry(pairs, name, **changes):
    """The pairs with tensor `name`'s entry changed (REMOVE: deleted)."""
    return [(k, edited(v, **changes) if k == name else v) for k, v in pairs]


# ---- writing the cases ----

FILES = ["config.json", "model.safetensors", "tokenizer.json"]
MISSING = object()  # a case file that is left out


class Link:
    """A case file that is a symbolic link to `target`."""

    def __init__(self, target):
        self.target = target


class Corpus:
    def __init__(self, outdir):
        self.outdir = outdir
        self.lines = []

    def case(self, name, expect, files):
        """Folder `name`: the files given (name -> bytes, str, Link or MISSING),
        and links to base's for the rest of config.json, model.safetensors
        and tokenizer.json. run must refuse it with `expect` in its message."""
        assert "|" not in name and "\n" not in expect
        folder = os.path.join(self.outdir, name)
        os.makedirs(folder)
        for f in FILES:
            if f not in files:
                os.symlink(os.path.join("..", "base", f), os.path.join(folder, f))
        for f, content in files.items():
            if content is MISSING:
                continue
            if isinstance(content, Link):
                os.symlink(content.target, os.path.join(folder, f))
                continue
            with open(os.path.join(folder, f), "wb") as out:
                out.write(content.encode() if isinstance(content, str) else content)
        self.lines.append(f"{name}|{expect}")

    def write_list(self):
        with open(os.path.join(self.outdir, "cases.txt"), "w") as out:
            out.write("\n".join(self.lines) + "\n")


# ---- the cases ----

W = "model.safetensors"
INDEX = "model.safetensors.index.json"
EMBED = "model.embed_tokens.weight"
NORM = "model.norm.weight"
NORM_1 = "model.layers.0.input_layernorm.weight"  # the same size as NORM_2
NORM_2 = "model.layers.0.post_attention_layernorm.weight"


def weights_cases(c, weights):
    pairs, data = st_read(weights)
    n = len(weights) - len(data) - 8
    header = weights[8:8 + n]
    entry = dict(pairs)
    last = max(pairs, key=lambda p: p[1]["data_offsets"][1])[0]

    def case(name, expect, content):
        c.case(name, expect, {W: content})

    def changed(name, expect, tensor, **changes):
        case(name, expect, st_write(with_entry(pairs, tensor, **changes), data))

    # Truncated: in the length, in the header, at its end, in the data.
    size = len(weights)
    for cut in [0, 1, 7, 8, 9, 8 + n // 2, 8 + n - 1, 8 + n, 8 + n + 1, 8 + n + len(data) // 2, size - 2, size - 1]:
        expect = ("too short for a safetensors header" if cut < 8 else
                  "runs past the end of the file" if cut < 8 + n else "(file truncated?)")
        case(f"truncated-at-{cut}", expect, weights[:cut])

    # The header's length.
    case("header-length-0", "header length is 0", st_raw(header, data, declared=0))
    case("header-length-7", "header: line 1", st_raw(header, data, declared=7))
    case("header-length-into-data", "header: line 1", st_raw(header, data, declared=n + 8))
    case("header-length-past-end", "runs past the end of the file", st_raw(header, data, declared=size - 7))
    case("header-length-2^63", "header length 9223372036854775808 runs past", st_raw(header, data, declared=1 << 63))
    case("header-length-2^64-1", "runs past the end of the file", st_raw(header, data, declared=(1 << 64) - 1))

    # Headers that are not a JSON object.
    case("header-array", "header is an array, not a JSON object", st_raw(b"[]", data))
    case("header-null", "header is null, not a JSON object", st_raw(b"null", data))
    case("header-string", "header is a string, not a JSON object", st_raw(b'"weights"', data))
    case("header-number", "header is a number, not a JSON object", st_raw(b"42", data))
    case("header-unclosed", "header: line 1", st_raw(b"{", data))
    case("header-trailing", "unexpected data after the JSON value", st_raw(b"{}}", data))
    case("header-zeros", "header: line 1", st_raw(b"\0" * 16, data))
    case("header-nul-padding", "header: line 1", st_raw(header.rstrip(b" ") + b"\0" * 8, data))
    case("header-bad-utf8", "invalid UTF-8 in string", st_raw(b'{"\xff\xfe": 1}', data))
    case("header-deep", "nesting too deep", st_raw(b"[" * 300 + b"]" * 300, data))
    case("header-empty-object", "bytes of data after the last tensor", st_raw(b"{}", data))
    case("header-no-tensors", f"tensor '{EMBED}' is missing", st_raw(b"{}"))
    case("metadata-string", "__metadata__ is a string, not an object", st_write([("__metadata__", "pt")] + pairs, data))
    case("entry-number", f"tensor '{NORM}': entry is a number", st_write([(k, 5 if k == NORM else v) for k, v in pairs], data))

    # Dtypes.
    for name, dtype in [("I8", "I8"), ("F64", "F64"), ("lowercase", "bf16"), ("empty", "")]:
        changed(f"dtype-{name}", f'unsupported dtype "{dtype}"', NORM, dtype=dtype)
    changed("dtype-number", '"dtype" missing or not a string', NORM, dtype=16)
    changed("dtype-f32-on-bf16-data", f"data_offsets span {2 * HIDDEN} bytes but shape x dtype needs {4 * HIDDEN}", NORM,
            dtype="F32")
    changed("dtype-missing", '"dtype" missing or not a string', NORM, dtype=REMOVE)

    # Shapes: the embedding is [272, 4] in bf16, 2176 bytes; the final norm [4].
    embed_bytes = VOCAB_SIZE * HIDDEN * 2
    not_count = "shape dimension 0 is not a non-negative integer"
    changed("shape-negative", not_count, EMBED, shape=[-VOCAB_SIZE, HIDDEN])
    changed("shape-fraction", not_count, EMBED, shape=[VOCAB_SIZE + 0.5, HIDDEN])
    changed("shape-float", not_count, EMBED, shape=[float(VOCAB_SIZE), HIDDEN])
    changed("shape-string", not_count, EMBED, shape=[str(VOCAB_SIZE), HIDDEN])
    changed("shape-null", not_count, EMBED, shape=[None, HIDDEN])
    changed("shape-nested", not_count, EMBED, shape=[[VOCAB_SIZE], HIDDEN])
    changed("shape-2^64", not_count, EMBED, shape=[1 << 64, HIDDEN])
    changed("shape-zero", f"data_offsets span {embed_bytes} bytes but shape x dtype needs 0", EMBED, shape=[0, HIDDEN])
    changed("shape-huge", f"span {embed_bytes} bytes but shape x dtype needs {(1 << 40) * HIDDEN * 2}", EMBED,
            shape=[1 << 40, HIDDEN])
    changed("shape-count-overflow", "its element count overflows", EMBED, shape=[1 << 32, 1 << 32])
    changed("shape-int64-max-squared", "its element count overflows", EMBED, shape=[(1 << 63) - 1, (1 << 63) - 1])
    changed("shape-bytes-overflow", "its byte size overflows", EMBED, shape=[1 << 62, 2])
    changed("shape-9-dims", "9 dimensions (at most 8)", EMBED, shape=[1] * 9)
    changed("shape-not-array", '"shape" missing or not an array', EMBED, shape="272x8")
    changed("shape-scalar", f"span {2 * HIDDEN} bytes but shape x dtype needs 2", NORM, shape=[])
    # Shapes that fit the data but not the config.
    want = f"expected [{VOCAB_SIZE}, {HIDDEN}]"
    changed("shape-wrong-rank", f"tensor '{NORM}' has shape [2, {HIDDEN // 2}], expected [{HIDDEN}]", NORM,
            shape=[2, HIDDEN // 2])
    for name, shape in [("reshaped", [VOCAB_SIZE // 2, 2 * HIDDEN]), ("transposed", [HIDDEN, VOCAB_SIZE]),
                        ("flat", [VOCAB_SIZE * HIDDEN])]:
        changed(f"shape-{name}", f"tensor '{EMBED}' has shape {json.dumps(shape)}, {want}", EMBED, shape=shape)
    case("shape-zero-rows", f"tensor '{EMBED}' has shape [0, {HIDDEN}], {want}",
         st_compact(with_entry(pairs, EMBED, shape=[0, HIDDEN], data_offsets=[0, 0]), data))

    # Data offsets.
    begin, end = entry[NORM]["data_offsets"]
    offsets_msg = '"data_offsets" must be two non-negative integers'
    for name, offsets in [("negative", [-16, 0]), ("strings", [str(begin), str(end)]), ("floats", [float(begin), end]),
                          ("one", [begin]), ("three", [begin, end, end]), ("2^64", [begin, 1 << 64]),
                          ("not-array", f"{begin}-{end}")]:
        changed(f"offsets-{name}", offsets_msg, NORM, data_offsets=offsets)
    changed("offsets-missing", offsets_msg, NORM, data_offsets=REMOVE)
    changed("offsets-reversed", f"data_offsets [{end}, {begin}] are reversed", NORM, data_offsets=[end, begin])
    changed("offsets-wrong-span", f"data_offsets span {end + 2 - begin} bytes but shape x dtype needs {end - begin}", NORM,
            data_offsets=[begin, end + 2])
    last_begin, last_end = entry[last]["data_offsets"]
    changed("offsets-past-end", f"past the {len(data)} bytes of data", last,
            data_offsets=[len(data), len(data) + last_end - last_begin])
    changed("offsets-far-past-end", "past the", last, data_offsets=[(1 << 62), (1 << 62) + last_end - last_begin])
    changed("offsets-misaligned", "data is not aligned to its 2-byte dtype", EMBED, data_offsets=[1, 1 + embed_bytes])
    first, second = sorted([NORM_1, NORM_2], key=lambda t: entry[t]["data_offsets"][0])
    changed("offsets-overlap", "overlaps the tensor before it", second, data_offsets=entry[first]["data_offsets"])
    case("offsets-gap", "16 unused bytes before tensor",
         st_write([(k, dict(v, data_offsets=[o + 16 for o in v["data_offsets"]])) for k, v in pairs], bytes(16) + data))
    case("data-trailing", "16 bytes of data after the last tensor", st_write(pairs, data + bytes(16)))
    odd = header + b" "
    case("data-odd-start", "data is not aligned", struct.pack("<Q", len(odd)) + odd + data)

    # Tensor names: repeated, missing, and names that are hard to print.
    case("tensor-twice", f"tensor '{NORM}' appears twice",
         st_write(pairs + [(NORM, dict(entry[NORM], data_offsets=[len(data), len(data) + end - begin]))],
                  data + bytes(end - begin)))
    for tensor in [NORM, EMBED, "model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.down_proj.weight"]:
        case(f"missing-{tensor}", f"tensor '{tensor}' is missing", st_compact([p for p in pairs if p[0] != tensor], data))
    bad = {"dtype": "Q4", "shape": [1], "data_offsets": [len(data), len(data) + 1]}
    for name, tensor, expect in [("newline", "bad\nname", "tensor 'bad?name': unsupported dtype"),
                                 ("escape", "\x1b[31mred", "tensor '?[31mred': unsupported dtype"),
                                 ("percent", "%s%n%s", "tensor '%s%n%s': unsupported dtype"),
                                 ("empty", "", "tensor '': unsupported dtype"),
                                 ("nul", "a\0b", "a tensor name contains a NUL byte"),
                                 ("long", "x" * 5000, "tensor 'xxxxxxxxxxxxxxxx")]:
        case(f"name-{name}", expect, st_write(pairs + [(tensor, bad)], data + bytes(1)))

    # The weights file itself, and sharded checkpoints.
    no_weights = "no model.safetensors or model.safetensors.index.json in this folder"
    c.case("weights-missing", no_weights, {W: MISSING})
    c.case("weights-folder", no_weights, {W: Link(".")})
    c.case("weights-dev-null", no_weights, {W: Link("/dev/null")})
    shard1, shard2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    first_part = [p for p in pairs if p[0] == EMBED]
    rest = [p for p in pairs if p[0] != EMBED]

    def sharded(name, expect, weight_map, files=None):
        index = weight_map if isinstance(weight_map, (str, bytes)) else json.dumps({"weight_map": weight_map})
        c.case(name, expect, dict({W: MISSING, INDEX: index}, **(files or {})))

    shards = {shard1: st_compact(first_part, data), shard2: st_compact(rest, data)}
    good_map = {k: shard1 if k == EMBED else shard2 for k, _ in pairs}
    sharded("index-missing-shard", f"{shard2}: No such file or directory", good_map, {shard1: shards[shard1]})
    sharded("index-wrong-shard", f"tensor '{NORM}' is not in {shard1}", dict(good_map, **{NORM: shard1}), shards)
    sharded("index-parent-folder", "is not a file name in the checkpoint folder",
            dict(good_map, **{NORM: "../base/model.safetensors"}), shards)
    sharded("index-absolute-path", "is not a file name in the checkpoint folder", dict(good_map, **{NORM: "/etc/passwd"}), shards)
    sharded("index-number", "is not a file name in the checkpoint folder", dict(good_map, **{NORM: 2}), shards)
    sharded("index-empty-map", 'no "weight_map" object naming the shards', {}, shards)
    sharded("index-no-map", 'no "weight_map" object naming the shards', "{}", shards)
    sharded("index-not-json", f"{INDEX}: line 1", "weight_map", shards)
    sharded("index-names-itself", "runs past the end of the file", {EMBED: INDEX})
    sharded("index-tensor-twice", f"tensor '{NORM}' appears twice", good_map,
            {shard1: st_compact(first_part + [p for p in pairs if p[0] == NORM], data), shard2: shards[shard2]})


def config_cases(c, config):
    def case(name, expect, text):
        c.case(name, expect, {"config.json": text})

    def changed(name, expect, **changes):
        case(name, expect, json.dumps(edited(config, **changes), indent=1))

    case("config-missing", "config.json: No such file or directory", MISSING)
    case("config-empty", "config.json: line 1, column 1: unexpected end of input", "")
    case("config-not-json", "config.json: line 1", "hidden_size = 8")
    case("config-truncated", "config.json: line ", json.dumps(config, indent=1)[:-20])
    case("config-array", "config.json: not a JSON object", "[]")
    case("config-deep", "nesting too deep", "{\"a\":" * 300 + "1" + "}" * 300)
    required = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size"]
    for key in required:
        changed(f"config-no-{key}", f'"{key}" is missing', **{key: REMOVE})
        changed(f"config-null-{key}", f'"{key}" is missing', **{key: None})
        changed(f"config-zero-{key}", f'"{key}" is 0, outside [1, ', **{key: 0})
        changed(f"config-string-{key}", f'"{key}" must be an integer, not a string', **{key: "8"})
    changed("config-zero-max_position_embeddings", '"max_position_embeddings" is 0, outside [1, ', max_position_embeddings=0)
    changed("config-zero-head_dim", '"head_dim" is 0, outside [2, 4096]', head_dim=0)
    changed("config-negative-layers", '"num_hidden_layers" is -1, outside [1, 1024]', num_hidden_layers=-1)
    changed("config-negative-vocab", '"vocab_size" is -272, outside [1, ', vocab_size=-272)
    changed("config-negative-eps", '"rms_norm_eps" is -1e-06, outside (0, 1)', rms_norm_eps=-1e-6)
    changed("config-negative-theta", '"rope_theta" is -10000, outside (0, 1e+30)', rope_theta=-10000)
    changed("config-fraction-heads", '"num_attention_heads" must be an integer, not a fraction', num_attention_heads=2.5)
    changed("config-bool-layers", '"num_hidden_layers" must be an integer, not a boolean', num_hidden_layers=True)
    changed("config-string-theta", '"rope_theta" must be a number, not a string', rope_theta="1e6")
    changed("config-huge-hidden", '"hidden_size" is 9223372036854775807, outside [1, 65536]', hidden_size=(1 << 63) - 1)
    changed("config-huger-hidden", '"hidden_size" must be an integer', hidden_size=10 ** 30)
    changed("config-huge-layers", '"num_hidden_layers" is 2147483648, outside [1, 1024]', num_hidden_layers=1 << 31)
    changed("config-huge-vocab", '"vocab_size" is 4294967568, outside [1, 16777216]', vocab_size=(1 << 32) + 272)
    changed("config-huge-positions", '"max_position_embeddings" is 16777217, outside', max_position_embeddings=(1 << 24) + 1)
    changed("config-huge-theta", '"rope_theta" is 1e+300, outside (0, 1e+30)', rope_theta=1e300)
    changed("config-tiny-eps", '"rms_norm_eps" is 1e-300, too small for a float', rms_norm_eps=1e-300)
    changed("config-exponent-hidden", '"hidden_size" must be an integer, not a fraction', hidden_size=float(HIDDEN))
    changed("config-heads-not-dividing", f"hidden_size {HIDDEN} is not a multiple of num_attention_heads 3",
            num_attention_heads=3)
    changed("config-kv-not-dividing", "num_attention_heads 2 is not a multiple of num_key_value_heads 4", num_key_value_heads=4)
    changed("config-odd-head-dim", "head_dim 3 is odd", head_dim=3)
    changed("config-heads-too-wide", "num_attention_heads x head_dim is too large", num_attention_heads=1024, head_dim=4096)
    changed("config-model-type", 'model_type "gemma2" is not supported (run implements qwen2, qwen3, qwen3_moe, llama, '
            'mistral, gemma3_text and gemma3)', model_type="gemma2")
    changed("config-no-model-type", '"model_type" is missing', model_type=REMOVE)
    changed("config-llama3-scaling-qwen", "llama3 RoPE scaling in a model that is not llama",
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 64})
    changed("config-llama3-scaling-incomplete", '"low_freq_factor" is missing', model_type="llama",
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 64})
    changed("config-gelu", '"hidden_act" must be "silu"', hidden_act="gelu")
    changed("config-rope-scaling", 'RoPE scaling "yarn" is not supported (run implements none, linear and llama3)',
            rope_scaling={"type": "yarn", "factor": 4})
    changed("config-rope-scaling-number", '"rope_scaling" must be an object or null', rope_scaling=4)
    changed("config-sliding-window", "sliding-window attention", use_sliding_window=True)
    changed("config-tie-string", '"tie_word_embeddings" must be true or false', tie_word_embeddings="true")
    changed("config-eos-string", '"eos_token_id" must be a token id or a list of them', eos_token_id="<|im_end|>")
    changed("config-eos-negative", '"eos_token_id" must be a token id or a list of them', eos_token_id=[-1])
    changed("config-eos-many", "more than 8 eos_token_id values", eos_token_id=list(range(9)))
    changed("config-bos-string", '"bos_token_id" must be an integer, not a string', bos_token_id="0")
    # Valid configs that the weights disagree with.
    embed = f"tensor 'model.embed_tokens.weight' has shape [{VOCAB_SIZE}, {HIDDEN}]"
    changed("config-wider", f"{embed}, expected [{VOCAB_SIZE}, {2 * HIDDEN}]", hidden_size=2 * HIDDEN)
    changed("config-more-vocab", f"{embed}, expected [300, {HIDDEN}]", vocab_size=300)
    changed("config-less-vocab", f"{embed}, expected [16, {HIDDEN}]", vocab_size=16)
    changed("config-more-layers", "tensor 'model.layers.1.input_layernorm.weight' is missing", num_hidden_layers=2)
    changed("config-wider-mlp", f"tensor 'model.layers.0.mlp.gate_proj.weight' has shape [{MLP}, {HIDDEN}], "
            f"expected [{2 * MLP}, {HIDDEN}]", intermediate_size=2 * MLP)
    changed("config-more-kv-heads", f"tensor 'model.layers.0.self_attn.k_proj.weight' has shape [{HIDDEN // 2}, {HIDDEN}], "
            f"expected [{HIDDEN}, {HIDDEN}]", num_key_value_heads=2)
    changed("config-head-dim", f"tensor 'model.layers.0.self_attn.q_proj.weight' has shape [{HIDDEN}, {HIDDEN}], "
            f"expected [{2 * HIDDEN}, {HIDDEN}]", head_dim=HIDDEN)
    changed("config-untied", "tensor 'lm_head.weight' is missing", tie_word_embeddings=False)
    # A Qwen2 checkpoint read as Llama (no q/k/v biases) or Qwen3 (q/k norms).
    changed("config-qwen2-as-llama", "tensor 'model.layers.0.self_attn.k_proj.bias' is not part of a Llama model",
            model_type="llama")
    changed("config-qwen2-as-qwen3", "tensor 'model.layers.0.self_attn.q_norm.weight' is missing", model_type="qwen3",
            attention_bias=True)
    # A context that would take more memory than any machine has.
    changed("config-huge-kv-cache", "more than this machine can hold", num_hidden_layers=1024, num_attention_heads=256,
            num_key_value_heads=256, head_dim=4096, max_position_embeddings=1 << 24)


def generation_config_cases(c):
    def case(name, expect, text):
        c.case(name, expect, {"generation_config.json": text})

    case("generation-not-json", "generation_config.json: line 1", "temperature: 0.7")
    case("generation-array", "generation_config.json: not a JSON object", "[]")
    case("generation-top-p", "generation_config.json: top-p must be in (0, 1]", '{"top_p": 2}')
    case("generation-temperature", "generation_config.json: temperature must be 0 (greedy) or at least 1e-6",
         '{"do_sample": true, "temperature": -1}')
    case("generation-string", '"temperature" must be a number, not a string', '{"do_sample": true, "temperature": "hot"}')
    case("generation-eos", '"eos_token_id" must be a token id or a list of them', '{"eos_token_id": [1, null]}')
    case("generation-penalty", "repeat penalty must be > 0", '{"repetition_penalty": 0}')


def tokenizer_cases(c, tok):
    model, vocab = tok["model"], tok["model"]["vocab"]

    def case(name, expect, content):
        c.case(name, expect, {"tokenizer.json": content})

    def changed(name, expect, **changes):
        case(name, expect, json.dumps(edited(tok, **changes)))

    def model_changed(name, expect, **changes):
        changed(name, expect, model=edited(model, **changes))

    def vocab_text(name, expect, entries):
        """A tokenizer whose vocab object is written as the given text, so
        that a key may repeat."""
        marker = "VOCAB-MARKER"
        text = json.dumps(edited(tok, model=edited(model, vocab=marker)))
        case(name, expect, text.replace(json.dumps(marker), "{" + entries + "}"))

    def added_changed(name, expect, i, **changes):
        added = [edited(a, **changes) if k == i else a for k, a in enumerate(tok["added_tokens"])]
        changed(name, expect, added_tokens=added)

    full = json.dumps(tok)
    case("tokenizer-empty", "tokenizer.json: line 1, column 1: unexpected end of input", "")
    case("tokenizer-truncated", "tokenizer.json: line 1", full[:len(full) // 2])
    case("tokenizer-array", "tokenizer.json: not a JSON object", "[]")
    case("tokenizer-deep", "nesting too deep", "[" * 300 + "]" * 300)
    # Missing or foreign sections.
    changed("tokenizer-no-model", 'no "model" object', model=REMOVE)
    model_changed("tokenizer-wordpiece", "model type WordPiece is not supported", type="WordPiece")
    model_changed("tokenizer-byte-fallback", "BPE options", byte_fallback=True)
    model_changed("tokenizer-no-vocab", 'no "model.vocab" object', vocab=REMOVE)
    model_changed("tokenizer-vocab-array", 'no "model.vocab" object', vocab=list(vocab))
    model_changed("tokenizer-no-merges", 'no "model.merges" array', merges=REMOVE)
    model_changed("tokenizer-empty-vocab", "the vocabulary has no token for byte 0x00", vocab={}, merges=[])
    changed("tokenizer-nfkc", "normalizer NFKC is not supported", normalizer={"type": "NFKC"})
    changed("tokenizer-no-pre-tokenizer", "the pre_tokenizer is not ByteLevel but the decoder is", pre_tokenizer=REMOVE)
    pre = tok["pre_tokenizer"]
    split = edited(pre["pretokenizers"][0], pattern={"Regex": r"\s+"})
    changed("tokenizer-other-regex", r"pre_tokenizer Split regex '\s+' is not supported",
            pre_tokenizer=edited(pre, pretokenizers=[split, pre["pretokenizers"][1]]))
    # Pre-tokenizers, regexes and post-processors other than those implemented.
    digits = edited(split, pattern={"Regex": QWEN2_REGEX.replace(r"\p{N}|", r"\p{N}{1,2}|")})
    changed("tokenizer-regex-two-digits", "is not supported (only the Qwen2, Llama 3 and GPT-2 ones)",
            pre_tokenizer=edited(pre, pretokenizers=[digits, pre["pretokenizers"][1]]))
    changed("tokenizer-metaspace", "the pre_tokenizer is not ByteLevel but the decoder is",
            pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True})
    changed("tokenizer-digits-first", "pre_tokenizer Digits is not supported",
            pre_tokenizer=edited(pre, pretokenizers=[{"type": "Digits", "individual_digits": True}] + pre["pretokenizers"]))
    changed("tokenizer-byte-level-prefix-space", "pre_tokenizer ByteLevel with add_prefix_space is not supported",
            pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True})
    model_changed("tokenizer-ignore-merges-string", "BPE option ignore_merges is a string, not a boolean",
                  ignore_merges="yes")
    changed("tokenizer-roberta", "post_processor RobertaProcessing is not supported",
            post_processor={"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]})
    bos = {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}
    text = {"Sequence": {"id": "A", "type_id": 0}}
    specials = {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [269], "tokens": ["<|endoftext|>"]}}

    def template(name, expect, single, special_tokens):
        changed(name, expect, post_processor={"type": "Sequence", "processors": [tok["post_processor"], {
            "type": "TemplateProcessing", "single": single, "pair": [], "special_tokens": special_tokens}]})
    template("tokenizer-template-no-single", 'TemplateProcessing has no "single" array', None, specials)
    template("tokenizer-template-unknown-token", "special token '<|endoftext|>' has no \"ids\"", [bos, text], {})
    template("tokenizer-template-bad-id", "special token '<|endoftext|>' has an id that is no token", [bos, text],
             {"<|endoftext|>": dict(specials["<|endoftext|>"], ids=[100000])})
    template("tokenizer-template-two-texts", "the single template must hold $A once", [text, bos, text], specials)
    changed("tokenizer-no-decoder", "there is no decoder (not supported)", decoder=REMOVE)
    changed("tokenizer-padding", "truncation and padding are not supported", padding={"strategy": "BatchLongest"})
    # Bad merges.
    def merges(name, expect, *extra):
        model_changed(name, expect, merges=MERGES + list(extra))
    merges("merge-no-space", 'merge 13 is neither a "left right" string nor a pair of strings', "hi")
    merges("merge-three-parts", 'merge 13 is neither a "left right" string nor a pair of strings', "h i x")
    merges("merge-number", 'merge 13 is neither a "left right" string nor a pair of strings', 7)
    merges("merge-pair-of-numbers", "merge 13 is neither", [104, 105])
    merges("merge-unknown-token", "merge 13: 'hx' is not in the vocabulary", "hx i")
    merges("merge-foreign-character", "merge 13: '\u4e16' is not in the vocabulary", "\u4e16 i")
    merges("merge-result-unknown", "merge 13: the token it makes ('i' + 'h') is not in the vocabulary", "i h")
    merges("merge-twice", "merge 13 repeats merge 0", "h i")
    merges("merge-empty-side", "merge 13: '' is not in the vocabulary", " i")
    # Bad vocabulary ids and tokens.
    first = json.dumps(byte_chars()[0])
    entries = ", ".join(f"{json.dumps(k)}: {v}" for k, v in vocab.items() if k != byte_chars()[0])
    id_msg = "id is not an integer in [0, 4194304)"
    vocab_text("vocab-negative-id", id_msg, f"{first}: -1, {entries}")
    vocab_text("vocab-huge-id", id_msg, f"{first}: 1000000000, {entries}")
    vocab_text("vocab-2^63-id", id_msg, f"{first}: 9223372036854775808, {entries}")
    vocab_text("vocab-string-id", id_msg, f'{first}: "0", {entries}')
    vocab_text("vocab-fraction-id", id_msg, f"{first}: 0.5, {entries}")
    vocab_text("vocab-id-twice", "token id 1 is given twice", f"{first}: 1, {entries}")
    vocab_text("vocab-token-twice", "is given twice", f"{first}: 0, {entries}, {first}: 400")
    vocab_text("vocab-empty-token", "vocab has an empty token", f'{first}: 0, {entries}, "": 400')
    vocab_text("vocab-foreign-token", "vocab token '\u4e16' is not in the byte-level alphabet",
               f'{first}: 0, {entries}, "\u4e16": 400')
    vocab_text("vocab-missing-byte", "the vocabulary has no token for byte 0x00", entries)
    # Bad added tokens.
    changed("added-not-array", '"added_tokens" is an object, not an array', added_tokens={})
    added_id_msg = 'added token 1: "id" is not an integer in [0, 4194304)'
    added_changed("added-no-id", added_id_msg, 1, id=REMOVE)
    added_changed("added-negative-id", added_id_msg, 1, id=-5)
    added_changed("added-huge-id", added_id_msg, 1, id=1 << 40)
    added_changed("added-string-id", added_id_msg, 1, id="270")
    hf_id = "where Hugging Face's tokenizers gives it id"
    added_changed("added-vocab-id", f"added token '<|im_start|>' has id 104 {hf_id} 270", 1, id=104)
    added_changed("added-id-twice", f"added token '<|im_start|>' has id 269 {hf_id} 270", 1, id=269)
    added_changed("added-spelled-as-vocab", f"added token 'hi' has id 270 {hf_id} 256", 1, content="hi")
    added_changed("added-empty", 'added token 1: "content" is not a non-empty string', 1, content="")
    added_changed("added-content-twice", "added token '<|endoftext|>' is given twice", 1, content="<|endoftext|>")
    added_changed("added-lstrip", "lstrip, rstrip, single_word and normalized are not supported", 1, lstrip=True)
    # Valid, but with a vocabulary id past the model's 272 (added tokens past
    # it are fine: run no longer matches them, see tokenizer_fit).
    last = list(vocab)[-1]
    moved = ", ".join(f"{json.dumps(k)}: {300 if k == last else v}" for k, v in vocab.items() if k != byte_chars()[0])
    vocab_text("vocab-past-model", "the vocabulary's token ids go up to 300, past the model's vocab_size of 272",
               f"{first}: 0, {moved}")


# ---- the whole corpus ----

def make_base(make_checkpoint, folder):
    """The valid checkpoint every case breaks one thing of."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = {"hidden_size": HIDDEN, "intermediate_size": MLP, "num_attention_heads": 2, "num_key_value_heads": 1,
                    "num_hidden_layers": 1, "vocab_size": VOCAB_SIZE, "max_position_embeddings": 64,
                    "bos_token_id": 256 + len(MERGES), "eos_token_id": VOCAB_SIZE - 1}
        flags = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
        subprocess.run([make_checkpoint, tmp, "--seed", "6"] + flags, check=True, stdout=subprocess.DEVNULL)
        os.makedirs(folder)
        for f in ["config.json", "model.safetensors"]:
            shutil.copy(os.path.join(tmp, f), folder)
    with open(os.path.join(folder, "tokenizer.json"), "w") as out:
        json.dump(tokenizer(), out, ensure_ascii=False)


def nan_weights(folder, weights):
    """The checkpoint with the final norm's weights all NaN (bf16 0x7FC0),
    which makes every logit NaN."""
    pairs, data = st_read(weights)
    begin, end = dict(pairs)[NORM]["data_offsets"]
    os.makedirs(folder)
    with open(os.path.join(folder, W), "wb") as out:
        out.write(st_write(pairs, data[:begin] + b"\xc0\x7f" * ((end - begin) // 2) + data[end:]))
    for f in ["config.json", "tokenizer.json"]:
        os.symlink(os.path.join("..", "base", f), os.path.join(folder, f))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make_hostile.py MAKE_CHECKPOINT OUTDIR")
    make_checkpoint, outdir = sys.argv[1:]
    shutil.rmtree(outdir, ignore_errors=True)
    base = os.path.join(outdir, "base")
    make_base(make_checkpoint, base)
    c = Corpus(outdir)
    with open(os.path.join(base, W), "rb") as f:
        weights = f.read()
    weights_cases(c, weights)
    nan_weights(os.path.join(outdir, "nan-weights"), weights)
    with open(os.path.join(base, "config.json")) as f:
        config_cases(c, json.load(f))
    generation_config_cases(c)
    with open(os.path.join(base, "tokenizer.json")) as f:
        tokenizer_cases(c, json.load(f))
    c.write_list()
    print(f"{outdir}: {len(c.lines)} cases")


if __name__ == "__main__":
    main()
