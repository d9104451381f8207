#!/usr/bin/env python3
"""make_small_tokenizers.py - small tokenizers of the project's own, with the
pipelines of Llama 3 and GPT-2, and their golden encodings, for the tests.

    python3 scripts/make_small_tokenizers.py            write the fixtures
    python3 scripts/make_small_tokenizers.py --check-llama3 [GOLDEN_DIR]
        first prove the reference below on Hugging Face's own golden data:
        the Llama 3 tokenizer (../shared/models/llama3-tokenizer) against
        ../shared/tokenizer-golden/llama3.jsonl, every line

Writes, in tests/data:
  llama-style-tokenizer.json  no normalizer, Split by the Llama 3 regex,
                              ByteLevel, BPE with ignore_merges and vocabulary
                              entries that no merges make, a post-processor
                              Sequence[ByteLevel, TemplateProcessing] that puts
                              <|begin_of_text|> first, special added tokens
  llama-style.jsonl           texts with "ids" (add_special_tokens=False),
                              "ids_with_special" (True) and "decoded"
  gpt2-style-tokenizer.json   no normalizer, ByteLevel with its own (GPT-2)
                              regex, BPE, TemplateProcessing "<s> $A </s>",
                              an added token that is a vocabulary token too
  gpt2-style.jsonl            the same for it

The merges are learned here from the text in CORPUS below (plain BPE
training), so nothing comes from another tokenizer's files.

The golden values come from the reference in this script, which shares no
code or design with tokenizer.c: a small backtracking regex engine runs the
pre-tokenizer regex as tokenizer.json spells it (leftmost alternative first,
as Oniguruma, the engine of Hugging Face's tokenizers), BPE merges the
lowest-ranked pair again and again, and the post-processor and the ByteLevel
decoder are applied as Hugging Face documents them. --check-llama3 shows that
it reproduces Hugging Face's ids on the 484 lines of llama3.jsonl.

Standard library only (unicodedata gives \\p{L} and \\p{N}: the texts use only
characters that its Unicode version and the project's agree on). The output is
deterministic: rerunning the script rewrites the same files.
"""
import json
import os
import random
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

# Unicode's White_Space property (PropList.txt): what \s matches in Oniguruma.
WHITE_SPACE = set(map(chr, [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                            0x2028, 0x2029, 0x202F, 0x205F, 0x3000]))


# ---- a small regex engine: the syntax the pre-tokenizer regexes use ----
#
# A node is a tuple:
#   ("alt", [seq, ...])          alternatives, tried in order
#   ("seq", [node, ...])         one after the other
#   ("repeat", node, lo, hi)     greedy, lo..hi times (hi None: no limit)
#   ("char", test)               one character for which test(c) is true
#   ("not_ahead", node)          (?!...): matches nothing, only if node cannot match here

def class_escape(name):
    """The test of a class escape: \\p{L}, \\p{N}, \\s, \\S, \\r, \\n."""
    return {
        "p{L}": lambda c: unicodedata.category(c)[0] == "L",
        "p{N}": lambda c: unicodedata.category(c)[0] == "N",
        "s": lambda c: c in WHITE_SPACE,
        "S": lambda c: c not in WHITE_SPACE,
        "r": lambda c: c == "\r",
        "n": lambda c: c == "\n",
    }[name]


def literal(ch, ignore_case):
    """The test for a literal character; under (?i) every character with the
    same case folding matches too (U+017F LONG S folds to s)."""
    if not ignore_case:
        return lambda c: c == ch
    return lambda c: c == ch or (len(c.casefold()) == 1 and c.casefold() == ch.casefold())


class Parser:
    def __init__(self, pattern):
        self.p, self.i = pattern, 0

    def peek(self, s):
        return self.p.startswith(s, self.i)

    def take(self, s):
        if not self.peek(s):
            raise ValueError(f"regex: expected {s!r} at {self.i} in {self.p!r}")
        self.i += len(s)

    def escape(self):
        self.take("\\")
        for name in ("p{L}", "p{N}", "s", "S", "r", "n"):
            if self.peek(name):
                self.i += len(name)
                return class_escape(name)
        raise ValueError(f"regex: unknown escape at {self.i}")

    def alt(self, ignore_case):
        seqs = [self.seq(ignore_case)]
        while self.peek("|"):
            self.take("|")
            seqs.append(self.seq(ignore_case))
        return ("alt", seqs)

    def seq(self, ignore_case):
        items = []
        while self.i < len(self.p) and not self.peek("|") and not self.peek(")"):
            items.append(self.quantified(self.atom(ignore_case)))
        return ("seq", items)

    def atom(self, ignore_case):
        if self.peek("(?i:"):
            self.take("(?i:")
            node = self.alt(True)
            self.take(")")
            return node
        if self.peek("(?!"):
            self.take("(?!")
            node = self.alt(ignore_case)
            self.take(")")
            return ("not_ahead", node)
        if self.peek("["):
            self.take("[")
            negated = self.peek("^")
            if negated:
                self.take("^")
            tests = []
            while not self.peek("]"):
                if self.peek("\\"):
                    tests.append(self.escape())
                else:
                    tests.append(literal(self.p[self.i], ignore_case))
                    self.i += 1
            self.take("]")
            return ("char", lambda c: any(t(c) for t in tests) != negated)
        if self.peek("\\"):
            return ("char", self.escape())
        ch = self.p[self.i]
        if ch in "()[]{}?*+|.^$":
            raise ValueError(f"regex: unsupported {ch!r} at {self.i}")
        self.i += 1
        return ("char", literal(ch, ignore_case))

    def quantified(self, node):
        if self.peek("?"):
            self.take("?")
            return ("repeat", node, 0, 1)
        if self.peek("*"):
            self.take("*")
            return ("repeat", node, 0, None)
        if self.peek("+"):
            self.take("+")
            return ("repeat", node, 1, None)
        if self.peek("{"):
            end = self.p.index("}", self.i)
            lo, hi = self.p[self.i + 1:end].split(",")
            self.i = end + 1
            return ("repeat", node, int(lo), int(hi))
        return node


def compile_regex(pattern):
    parser = Parser(pattern)
    node = parser.alt(False)
    if parser.i != len(pattern):
        raise ValueError(f"regex: unexpected {pattern[parser.i]!r} at {parser.i}")
    return node


def ends(node, s, i):
    """The positions where a match of node starting at s[i] can end, the
    preferred first (backtracking order)."""
    kind = node[0]
    if kind == "char":
        if i < len(s) and node[1](s[i]):
            yield i + 1
    elif kind == "alt":
        for seq in node[1]:
            yield from ends(seq, s, i)
    elif kind == "seq":
        yield from seq_ends(node[1], 0, s, i)
    elif kind == "not_ahead":
        if next(ends(node[1], s, i), None) is None:
            yield i
    elif kind == "repeat":
        _, sub, lo, hi = node
        if sub[0] != "char":
            raise ValueError("regex: only single characters are repeated")
        # Greedy: as many characters as allowed, then one fewer, ...
        j = i
        while (hi is None or j - i < hi) and j < len(s) and sub[1](s[j]):
            j += 1
        for end in range(j, i + lo - 1, -1):
            yield end


def seq_ends(items, k, s, i):
    if k == len(items):
        yield i
        return
    for j in ends(items[k], s, i):
        yield from seq_ends(items, k + 1, s, j)


def split_isolated(regex, s):
    """Hugging Face's Split with behavior Isolated: every match is a piece,
    and so is every stretch of text between matches."""
    pieces, i, gap = [], 0, 0
    while i < len(s):
        end = next(ends(regex, s, i), None)
        if end is None or end == i:
            i += 1
            continue
        if gap < i:
            pieces.append(s[gap:i])
        pieces.append(s[i:end])
        i = gap = end
    if gap < len(s):
        pieces.append(s[gap:])
    return pieces


# ---- the byte-level alphabet ----

def byte_chars():
    """GPT-2's byte-level alphabet: printable Latin-1 bytes stand for
    themselves, the others for U+0100, U+0101, ... in byte order."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE]
    chars = {b: chr(b) for b in printable}
    for n, b in enumerate(b for b in range(256) if b not in chars):
        chars[b] = chr(256 + n)
    return chars


BYTE_CHAR = byte_chars()
CHAR_BYTE = {c: b for b, c in BYTE_CHAR.items()}


def to_byte_level(text):
    return "".join(BYTE_CHAR[b] for b in text.encode("utf-8"))


# ---- the reference tokenizer ----

def bpe(piece, ranks):
    """The tokens BPE makes of piece (in the byte-level alphabet): while a
    pair of neighbours has a merge, the lowest-ranked one (the leftmost of
    equals) becomes one token."""
    symbols = list(piece)
    while len(symbols) > 1:
        ranked = [(ranks[p], k) for k, p in enumerate(zip(symbols, symbols[1:])) if p in ranks]
        if not ranked:
            break
        _, k = min(ranked)
        symbols[k:k + 2] = [symbols[k] + symbols[k + 1]]
    return symbols


class Reference:
    """Hugging Face's encode and decode for the pipelines of these files,
    read from a tokenizer.json document."""

    def __init__(self, doc):
        model = doc["model"]
        assert model["type"] == "BPE" and doc["normalizer"] is None, "only BPE without a normalizer"
        self.vocab = model["vocab"]
        self.ranks = {}
        for rank, m in enumerate(model["merges"]):
            left, right = m.split(" ") if isinstance(m, str) else m
            self.ranks[(left, right)] = rank
        self.ignore_merges = bool(model.get("ignore_merges"))
        self.added = {a["content"]: a["id"] for a in doc["added_tokens"]}
        # Hugging Face numbers the added tokens itself: a vocabulary token keeps
        # its id, any other takes the next id after the vocabulary and the
        # added tokens before it. The files must agree.
        largest = -1
        for a in doc["added_tokens"]:
            want = self.vocab.get(a["content"], max(largest + 1, len(self.vocab)))
            assert a["id"] == want, f"added token {a['content']!r} has id {a['id']}, Hugging Face's is {want}"
            largest = max(largest, a["id"])
        self.token_of = {i: t for t, i in self.vocab.items()}
        self.token_of.update({i: t for t, i in self.added.items()})
        pre = doc["pre_tokenizer"]
        if pre["type"] == "ByteLevel":
            assert pre.get("use_regex", True) and not pre["add_prefix_space"]
            self.regex = compile_regex(GPT2_REGEX)
        else:
            split, byte_level = pre["pretokenizers"]
            assert split["behavior"] == "Isolated" and not split["invert"] and not byte_level["use_regex"]
            self.regex = compile_regex(split["pattern"]["Regex"])
        self.prefix, self.suffix = self.template(doc["post_processor"])

    @staticmethod
    def template(post):
        """The ids TemplateProcessing's single template puts before and after $A."""
        steps = post["processors"] if post and post["type"] == "Sequence" else [post] if post else []
        before, after, seen = [], [], False
        for step in steps:
            if step["type"] != "TemplateProcessing":
                continue
            for item in step["single"]:
                if "Sequence" in item:
                    seen = True
                else:
                    ids = step["special_tokens"][item["SpecialToken"]["id"]]["ids"]
                    (after if seen else before).extend(ids)
        return before, after

    def encode_piece(self, piece):
        mapped = to_byte_level(piece)
        if self.ignore_merges and mapped in self.vocab:
            return [self.vocab[mapped]]
        return [self.vocab[s] for s in bpe(mapped, self.ranks)]

    def encode(self, text, add_special_tokens=False):
        ids, i, done = [], 0, 0
        longest_first = sorted(self.added, key=len, reverse=True)
        while i <= len(text):
            found = next((a for a in longest_first if text.startswith(a, i)), None) if i < len(text) else None
            if found is None and i < len(text):
                i += 1
                continue
            for piece in split_isolated(self.regex, text[done:i]):
                ids += self.encode_piece(piece)
            if found is None:
                break
            ids.append(self.added[found])
            i = done = i + len(found)
        return self.prefix + ids + self.suffix if add_special_tokens else ids

    def decode(self, ids):
        """The ByteLevel decoder: each token's characters back to bytes (a
        token with characters outside the alphabet stays as its UTF-8),
        then the bytes read as UTF-8 with U+FFFD for ill-formed ones."""
        out = b""
        for i in ids:
            token = self.token_of.get(i)
            if token is None:
                continue
            if all(c in CHAR_BYTE for c in token):
                out += bytes(CHAR_BYTE[c] for c in token)
            else:
                out += token.encode("utf-8")
        return out.decode("utf-8", errors="replace")


# ---- proving the reference on Hugging Face's golden data ----

def check_llama3(golden_dir):
    shared = os.path.dirname(golden_dir.rstrip("/"))
    with open(os.path.join(shared, "models", "llama3-tokenizer", "tokenizer.json"), encoding="utf-8") as f:
        ref = Reference(json.load(f))
    n = bad = 0
    with open(os.path.join(golden_dir, "llama3.jsonl"), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            case = json.loads(line)
            got = (ref.encode(case["text"]), ref.encode(case["text"], True), ref.decode(case["ids"]))
            if got != (case["ids"], case["ids_with_special"], case["decoded"]):
                bad += 1
                print(f"line {n} differs: {case['text'][:60]!r}")
    print(f"reference vs llama3.jsonl: {n - bad} of {n} lines agree")
    return bad == 0 and n > 0


# ---- the small tokenizers ----

# The training text: words of the project's own, in several scripts.
CORPUS = """\
The tokenizer turns text into numbers, and the numbers back into the same text.
A small model reads the numbers one after another and guesses the next one.
It's what they've said: we'll see, I'm sure they'd agree, and you're right.
Pieces are split by a pattern first; then pairs of bytes are merged, the most
common pairs first, until no rule joins two neighbours any more.
Numbers such as 1024, 65536 and 3.14159 are read three digits at a time.
Count them: 123 456 789 123456789 2024 2025 100 200 300 1000000 12 34 56 78 90.
Hello world, hello again; the world says hello.
    indented code: for (int i = 0; i < n; i++) total += weights[i] * inputs[i];
if (x != NULL) { return x->next; } // a comment /* and another */
Größe, Übung, naïve café, déjà vu, señor, jalapeño, smörgåsbord.
Ngày mai trời sẽ đẹp, nhiều người đi chơi. Tiếng Việt có dấu.
Привет, мир! Москва — столица. Спасибо большое.
你好，世界。这是一个测试。我们喜欢简单的代码。
こんにちは、世界。テストです。
مرحبا بالعالم
Emoji: 🙂 👍 🎉 and a family 👨‍👩‍👧 too.
Tabs\tand\tnew lines\r\nend here.  Two spaces.   Three.
THE END? the end! The End... THE-END: the_end; (the end)
"""

TRAIN_MERGES = {"llama": 420, "gpt2": 360}

# Whole vocabulary entries that no merge makes, as Llama 3 has (588 of them):
# with ignore_merges a pre-token that is one of them is that one token.
UNBUILDABLE = [" nhiều", " Đakovo", ".:.:.:.:", " Москва", "über", " seashells", "999", "'LL", " \u00a0",
               "\u4e16\u754c\u4f60", "zzz"]


def train(pieces, n_merges):
    """Plain BPE training: the most frequent neighbouring pair (the
    smallest pair of those that tie) becomes a merge, n_merges times."""
    words = {}
    for piece in pieces:
        word = tuple(to_byte_level(piece))
        words[word] = words.get(word, 0) + 1
    merges = []
    for _ in range(n_merges):
        counts = {}
        for word, freq in words.items():
            for pair in zip(word, word[1:]):
                counts[pair] = counts.get(pair, 0) + freq
        if not counts:
            break
        best = max(counts.values())
        pair = min(p for p, c in counts.items() if c == best)
        merges.append(pair)
        merged = {}
        for word, freq in words.items():
            out, k = [], 0
            while k < len(word):
                if k + 1 < len(word) and (word[k], word[k + 1]) == pair:
                    out.append(word[k] + word[k + 1])
                    k += 2
                else:
                    out.append(word[k])
                    k += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + freq
        words = merged
    return merges


def byte_level_step(add_prefix_space=False, trim_offsets=True, use_regex=True):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": trim_offsets,
            "use_regex": use_regex}


def added_token(content, id, special=True):
    return {"id": id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}


def template(before, after, ids):
    """TemplateProcessing with the special tokens `before` and `after` $A."""
    single = [{"SpecialToken": {"id": t, "type_id": 0}} for t in before] + [{"Sequence": {"id": "A", "type_id": 0}}] + \
             [{"SpecialToken": {"id": t, "type_id": 0}} for t in after]
    pair = single + [{"Sequence": {"id": "B", "type_id": 1}}]
    return {"type": "TemplateProcessing", "single": single, "pair": pair,
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in before + after}}


def split_then_byte_level(regex_text):
    """Llama 3's pre-tokenizer: Split by the regex, then ByteLevel without one."""
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex_text}, "behavior": "Isolated", "invert": False},
        byte_level_step(use_regex=False)]}


def make_tokenizer(style):
    """The tokenizer.json document of the llama or gpt2 style."""
    if style == "llama":
        regex = compile_regex(LLAMA3_REGEX)
        # Llama 3's order of the byte tokens: the alphabet's printable ones first.
        vocab = {c: i for i, c in enumerate(sorted(BYTE_CHAR.values()))}
    else:
        regex = compile_regex(GPT2_REGEX)
        vocab = {BYTE_CHAR[b]: b for b in range(256)}
    pieces = [p for line in CORPUS.splitlines(keepends=True) for p in split_isolated(regex, line)]
    merges = train(pieces, TRAIN_MERGES[style])
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
             "ignore_merges": style == "llama", "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None}
    if style == "llama":
        ranks = {m: r for r, m in enumerate(merges)}
        for word in UNBUILDABLE:
            assert len(bpe(to_byte_level(word), ranks)) > 1, f"merges make {word!r}"
            vocab[to_byte_level(word)] = len(vocab)
        names = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
        first = len(vocab)
        doc["added_tokens"] = [added_token(n, first + k) for k, n in enumerate(names)] + \
                              [added_token("<tool>", first + len(names), special=False)]
        doc["pre_tokenizer"] = split_then_byte_level(LLAMA3_REGEX)
        doc["post_processor"] = {"type": "Sequence", "processors": [
            byte_level_step(add_prefix_space=True, trim_offsets=False),
            template(["<|begin_of_text|>"], [], {"<|begin_of_text|>": first})]}
        doc["decoder"] = byte_level_step(add_prefix_space=True)
    else:
        # As in GPT-2's file, <|endoftext|> is a vocabulary token too.
        vocab["<|endoftext|>"] = len(vocab)
        names = ["<|endoftext|>", "<s>", "</s>"]
        ids = {n: vocab.get(n, len(vocab) + k - 1) for k, n in enumerate(names)}
        doc["added_tokens"] = [added_token(n, ids[n]) for n in names]
        doc["pre_tokenizer"] = byte_level_step()
        doc["post_processor"] = template(["<s>"], ["</s>"], ids)
        doc["decoder"] = byte_level_step()
    doc["model"] = model
    return doc


# ---- the golden texts ----

# Hand-picked texts for what the pre-tokenizers, ignore_merges and the
# post-processor do; random ones follow.
TEXTS = [
    "", "Hello world", "The tokenizer turns text into numbers.",
    # numbers: runs of 1-3 digits (Llama 3), whole runs after a space (GPT-2)
    "1", "12", "123", "1234", "1234567890", "x123456789y", "3.14159", "$1,024.50", "v1.2.3-rc4", " 65536 ", "١٢٣٤",
    "\uff11\uff12\uff13\uff14", "\u00bd\u00b2\u2167", "a1b22c333d4444",
    # contractions in any case, LONG S, quotes that start none
    "it's", "IT'S", "they've", "THEY'VE", "We'Ll", "I'm", "I'M", "you'D", "'re", "'Re", "''s", "'x", "'",
    "don't' 's", "'\u017f", "'\u017fx", "\u017f'\u017f", "Bob's 'LL' 'll'", "'sss", "'\u212a",
    # white space: runs before newlines and words, \r\n, tabs, Unicode spaces
    "a  b", "a   b", "a\n\nb", "a \n b", "a  \n  b", "x\r\n\r\ny", "\t\tx", "  ", "\n", " \n", "end  ",
    "a\u00a0b", " \u00a0\u00a0x", "\u00a0x", "a\u3000b", "a\u2028b", "a\u0085b", "a\u2009\u2009b", "a\ufeffb",
    "a\u200bb", "a\x1cb", "a\x0b\x0cb", "   ! ?", "x !!\n\n", "?\r\n", " \t\n\t x",
    # punctuation, symbols, emoji, CJK, marks
    "Hello, world!", "(a) [b] {c}", "--> <== ...", "\U0001f642\U0001f44d", " \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\u4f60\u597d\uff0c\u4e16\u754c\u3002", "\u4e16\u754c\u4f60\u597d", "e\u0301t\u00e9", "\u212b \u00c5",
    "x\u0301y", "\u0645\u0631\u062d\u0628\u0627", "\u0e01\u0e32\u0e23",
    # ignore_merges: pre-tokens that are vocabulary entries no merge makes
    " nhi\u1ec1u", "nhi\u1ec1u", " nhi\u1ec1uu", "Ng\u00e0y nhi\u1ec1u ng\u01b0\u1eddi", " \u0110akovo", ".:.:.:.:",
    ".:.:.:.:.", " \u041c\u043e\u0441\u043a\u0432\u0430!", "\u00fcber", "\u00dcber", " seashells", "999", "9999",
    "zzz", "zzzz", "'LL", "x\u00a0x", "\u4e16\u754c\u4f60",
    # added tokens typed in the text, and what is not one
    "<|begin_of_text|>Hi", "<|begin_of_text|><|begin_of_text|>", "a<|eot_id|>b", "<|eot_id", "<|EOT_ID|>",
    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", "<tool>x</tool>", "<s>a</s>", "<|endoftext|>",
    # NUL, long words, a long number
    "a\x00b", "a" * 300, "ab" * 200, "9" * 100, " " * 50 + "x",
]

# Characters random texts are made of.
RANDOM_PARTS = ["a", "Z", "x", "the", " the", "'", "'s", "'S", "'ll", "'LL", "'\u017f", "1", "22", "333", "\uff11",
                " ", "  ", "\t", "\r", "\n", "\r\n", "\u00a0", "\u3000", "\u0085", "\u2028", "\ufeff", "\u200b", "\x1c",
                "\x00", "\u0301", "e\u0301", "\u00e9", "\u4e16", "\u754c", "\U0001f642", "\u200d", "!", "?", ".", ",",
                "-", "(", ":", " nhi\u1ec1u", "zzz", "<|eot_id|>", "<|begin_of_text|>", "<s>", "</s>", "<tool>", "<|"]


def golden_texts():
    rng = random.Random(12)
    texts = list(TEXTS)
    for _ in range(200):
        texts.append("".join(rng.choice(RANDOM_PARTS) for _ in range(rng.randint(1, 24))))
    for t in texts:
        assert all(unicodedata.category(c) != "Cn" for c in t), f"unassigned character in {t!r}"
    return texts


def write(style):
    doc = make_tokenizer(style)
    ref = Reference(doc)
    with open(os.path.join(DATA, f"{style}-style-tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(DATA, f"{style}-style.jsonl"), "w", encoding="utf-8") as f:
        for text in golden_texts():
            ids = ref.encode(text)
            line = {"text": text, "ids": ids, "ids_with_special": ref.encode(text, True), "decoded": ref.decode(ids)}
            f.write(json.dumps(line) + "\n")
    print(f"{style}: {len(doc['model']['vocab'])} vocabulary tokens, {len(doc['model']['merges'])} merges, "
          f"{len(golden_texts())} golden lines")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--check-llama3":
        golden = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "..", "shared", "tokenizer-golden")
        sys.exit(0 if check_llama3(golden) else 1)
    write("llama")
    write("gpt2")
