"""tests/test_context.py - every place a position meets the context limit,
end to end, as a property test (run by tests/test_context.sh; under the
sanitizers in `make test-sanitize`, where a write past a KV cache is a
report).

For contexts c drawn at random (CONTEXT_SEED picks them; the seed is
printed), prompts of c-2, c-1, c and c+1 tokens go through gen and chat
with -n -1, 0, 1, 5 and c, through ppl, bench (-p and -n around c) and
fwd (--tokens and POS). The properties:
- no sanitizer report, and the documented exit status;
- a prompt of p <= c tokens gets exactly min(n, c - p + 1) tokens (the last
  token sampled needs no position), none for -n 0, stopped by a full
  context when the context is what ended it, else by the length limit;
- a prompt longer than the context is refused with one line saying what
  to do (raise -c, shorten it);
- where the reference has a greedy continuation for the prompt
  (tests/data/generation_golden.json, scripts/make_golden.py with the numpy
  reference of transformers' Qwen2), the tokens are its first ones.
The prompts are "the the the ...": one Qwen2.5 token a word (checked on the
statistics line, which counts the prompt's tokens)."""
import json
import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

run, model, golden_path = sys.argv[1:4]
golden = json.load(open(golden_path))
seed = int(os.environ.get("CONTEXT_SEED", random.SystemRandom().randrange(1 << 30)))
rng = random.Random(seed)
print(f"test_context: contexts drawn with CONTEXT_SEED={seed}")
LIMITS = lambda c: [-1, 0, 1, 5, c]
check = harness.Checks("test_context", f"(CONTEXT_SEED={seed} repeats this run)")


def invoke(args, stdin=b""):
    p = subprocess.run([run] + [str(a) for a in args], input=stdin, capture_output=True)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def clean(err, what):
    """No sanitizer report on standard error."""
    return check("Sanitizer" not in err and "runtime error" not in err, f"{what}: no sanitizer report\n{err[-2000:]}")


def words(n):
    return " ".join(["the"] * n)


def expected(p, c, n):
    """Tokens a prompt of p <= c tokens gets with -n n, and why it stops."""
    room = c - p + 1
    want = room if n < 0 else min(n, room)
    return want, "a full context" if want == room else "the length limit"


def steps(err):
    """-v's lines: (position, token id) of each generated token."""
    return [(int(m[1]), int(m[2])) for m in re.finditer(r"^pos +(\d+) +token +(\d+) ", err, re.M)]


def refused(rc, err, what, c):
    """A prompt too long: exit 1, one line that names the context and -c."""
    lines = err.strip().split("\n")
    check(rc == 1, f"{what}: exit 1 (got {rc})")
    check(len(lines) == 1 and lines[0].startswith("run: ") and f"context of {c} positions" in lines[0] and "raise -c" in lines[0],
          f"{what}: one line that says to raise -c or shorten: {err!r}")


# ---- gen ----

def gen_case(c, p, n, prompt, stdin_prompt=False, want_ids=None, ignore_eos=True):
    what = f"gen -c {c} -n {n}, a prompt of {p} tokens"
    args = ["gen", model, "-c", c, "-n", n, "--temp", 0, "-v"] + (["--ignore-eos"] if ignore_eos else [])
    rc, out, err = invoke(args + ([] if stdin_prompt else [prompt]), prompt.encode() if stdin_prompt else b"")
    clean(err, what)
    if p > c:
        return refused(rc, err, what, c)
    want, why = expected(p, c, n)
    stats = re.search(r"^prompt: (\d+) tokens?, .*; generated: (\d+) tokens?(, [^;]*)?; stopped by ([^;\n]+)$", err, re.M)
    check(rc == 0 and stats is not None, f"{what}: exit 0 and the statistics (exit {rc}): {err[-500:]!r}")
    if not stats:
        return
    got = steps(err)
    check(int(stats[1]) == p, f"{what}: the statistics count {stats[1]} prompt tokens")
    check(int(stats[2]) == want and len(got) == want, f"{what}: {want} tokens (got {stats[2]}, {len(got)} -v lines)")
    check(stats[4] == why, f"{what}: stopped by {why} (got {stats[4]})")
    check([pos for pos, _ in got] == list(range(p, p + len(got))), f"{what}: positions from {p} on: {got}")
    if want_ids is not None:
        check([t for _, t in got] == want_ids[:want], f"{what}: the reference's first {want} tokens {want_ids[:want]}, got {got}")


def test_gen():
    for c in sorted(rng.sample(range(3, 48), 3)):
        for p in range(c - 2, c + 2):
            for n in LIMITS(c):
                gen_case(c, p, n, words(p))
    # The reference's continuations, with the context around each prompt.
    for g in golden["gen"]:
        p = len(g["prompt_ids"])
        for c in range(max(p - 1, 1), p + 3):
            for n in LIMITS(c):
                gen_case(c, p, n, g["prompt"], stdin_prompt=True, want_ids=g["reply_ids"], ignore_eos=False)


# ---- chat ----

# The Qwen2.5 template's first turn: "hi" makes a prompt of 30 tokens (the
# reference's turn_ids), so a message of k words makes one of 29 + k.
HI = len(golden["chat"]["turn_ids"][0])


def chat_turns(c, n, messages):
    rc, out, err = invoke(["chat", model, "-c", c, "-n", n, "--temp", 0, "--ignore-eos", "-v"],
                          "".join(m + "\n" for m in messages).encode())
    return rc, out, err


def chat_reply_check(what, c, p, n, got):
    """One turn's reply: its tokens and their positions. Returns whether a
    full context ended it."""
    want, why = expected(p, c, n)
    check(len(got) == want, f"{what}: {want} tokens (got {len(got)})")
    check([pos for pos, _ in got] == list(range(p, p + len(got))), f"{what}: positions from {p} on: {got}")
    return why == "a full context"


def full_notes(err, c):
    return err.count(f"(the context of {c} positions is full: the reply was cut")


def test_chat():
    for c in sorted(rng.sample(range(HI + 4, 72), 3)):
        for p in range(c - 2, c + 2):
            k = p - (HI - 1)
            for n in LIMITS(c):
                what = f"chat -c {c} -n {n}, a prompt of {p} tokens"
                rc, out, err = chat_turns(c, n, [words(k)])
                clean(err, what)
                check(rc == 0, f"{what}: exit 0 (got {rc})")
                if p > c:
                    check(out == "" and f"(the message makes a prompt of {p} tokens, longer than the context of {c} "
                                        f"positions: shorten it, or start chat again with a larger -c" in err,
                          f"{what}: refused, saying what to do: {err!r}")
                    continue
                check(out.count("\n") == 1, f"{what}: one reply line")
                full = chat_reply_check(what, c, p, n, steps(err))
                check(full_notes(err, c) == full, f"{what}: a note that the reply was cut iff it was: {err!r}")
                # The turn that drops the old messages: "hi" first, then the
                # same message, which alone makes p tokens.
                what += ", after a first turn it drops"
                rc, out, err = chat_turns(c, n, ["hi", words(k)])
                clean(err, what)
                got, n_first = steps(err), expected(HI, c, n)[0]
                check(rc == 0 and out.count("\n") == 2, f"{what}: exit 0 and two replies (exit {rc}): {out!r}")
                check("(the context is full: the oldest 2 messages were dropped)" in err, f"{what}: the first turn dropped")
                full = chat_reply_check(what + " (the first turn)", c, HI, n, got[:n_first])
                full += chat_reply_check(what, c, p, n, got[n_first:])
                check(full_notes(err, c) == full, f"{what}: a note for each reply cut: {err!r}")
    # The reference's first reply, with the context around its prompt.
    for c in range(HI - 1, HI + 3):
        for n in LIMITS(c):
            what = f"chat -c {c} -n {n}: 'hi'"
            rc, out, err = invoke(["chat", model, "-c", c, "-n", n, "--temp", 0, "-v"], b"hi\n")
            clean(err, what)
            if HI > c:
                check(rc == 0 and "(the message makes a prompt" in err and out == "", f"{what}: refused, chat goes on")
                continue
            want, _ = expected(HI, c, n)
            check([t for _, t in steps(err)] == golden["chat"]["reply_ids"][0][:want],
                  f"{what}: the reference's first {want} tokens: {steps(err)}")


# ---- ppl ----

def windows(n, c, stride):
    """Windows of c tokens every stride over n tokens, the last reaching the end."""
    w = 1
    while (w - 1) * stride + c < n:
        w += 1
    return w


def test_ppl():
    for c in sorted(rng.sample(range(2, 48), 3)):
        for n in range(max(c - 2, 2), c + 2):
            what = f"ppl -c {c}, a text of {n} tokens"
            rc, out, err = invoke(["ppl", model, "-", "-c", c], words(n).encode())
            clean(err, what)
            w, stride = windows(n, c, c // 2 or 1), c // 2 or 1
            check(rc == 0 and re.match(rf"perplexity: [0-9.]+ \+/- [0-9.]+ \({n - 1} tokens scored, {w} windows? of {c} "
                                       rf"tokens, stride {stride}, ", out),
                  f"{what}: every token but the first scored, in {w} windows (exit {rc}): {out!r} {err[-300:]!r}")


# ---- bench ----

def test_bench():
    for c in sorted(rng.sample(range(3, 40), 2)):
        for p in range(c - 2, c + 2):
            for n in LIMITS(c):
                depth = rng.choice([0, 1])
                what = f"bench -c {c} -p {p} -n {n} --depth {depth}"
                rc, out, err = invoke(["bench", model, "-c", c, "-p", p, "-n", n, "-r", 1, "--depth", depth])
                clean(err, what)
                if n < 0:
                    check(rc == 2 and "-n: expected an integer in [0, " in err, f"{what}: a usage error (exit {rc})")
                elif depth + p > c or depth + n > c:
                    refused(rc, err, what, c)
                else:
                    check(rc == 0 and (f"\npp{p}: " in out) == (p > 0) and (f"\ntg{n}: " in out) == (n > 0),
                          f"{what}: the pp and tg lines asked for (exit {rc}): {out[-200:]!r} {err[-300:]!r}")


# ---- fwd ----

def test_fwd():
    for c in sorted(rng.sample(range(3, 48), 3)):
        for n in range(c - 2, c + 2):
            what = f"fwd -c {c} --tokens of {n} ids"
            rc, out, err = invoke(["fwd", model, "-c", c, "--tokens", "-"], " ".join(["279"] * n).encode())
            clean(err, what)
            if n > c:
                refused(rc, err, what, c)
            else:
                check(rc == 0 and f"next token after id 279 at position {n - 1}:" in out, f"{what}: exit 0 (got {rc})")
            what = f"fwd -c {c}, a token at POS {n}"
            rc, out, err = invoke(["fwd", model, "-c", c, 279, n])
            clean(err, what)
            if n >= c:
                refused(rc, err, what, c)
            else:
                check(rc == 0 and f"at position {n}:" in out, f"{what}: exit 0 (got {rc})")
    # The reference's next token, with the prompt filling the context.
    for g in golden["gen"]:
        p = len(g["prompt_ids"])
        rc, out, err = invoke(["fwd", model, "-c", p, "--tokens", ",".join(map(str, g["prompt_ids"]))])
        clean(err, f"fwd -c {p}")
        top = re.search(r"^  1\. id (\d+) ", out, re.M)
        check(rc == 0 and top and int(top[1]) == g["reply_ids"][0], f"fwd -c {p}: the reference's next token first")
    # Standard input that fills the reading buffer exactly (64 KiB): no byte
    # is written past it.
    ids = ("1 " * 40000).encode()
    for size in (65535, 65536, 65537):
        what = f"fwd --tokens - with {size} bytes"
        rc, out, err = invoke(["fwd", model, "-c", 8, "--tokens", "-"], ids[:size])
        clean(err, what)
        check(rc == 1 and "past the context of 8 positions" in err, f"{what}: read whole, refused for the context")
        rc, out, err = invoke(["detok", model], ids[:size])
        clean(err, f"detok with {size} bytes")
        check(rc == 0 and out == '"' * ((size + 1) // 2), f"detok with {size} bytes: every id read")


test_gen()
test_chat()
test_ppl()
test_bench()
test_fwd()
check.finish()
