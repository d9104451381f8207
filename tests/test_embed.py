"""tests/test_embed.py RUN MODEL GOLDEN TMP - `run embed` and POST
/v1/embeddings end to end, against the numpy reference's vectors (GOLDEN:
tests/data/embed_golden.json, scripts/make_embed_golden.py) on its
checkpoint MODEL, pooled by the last token (no sentence-transformers files),
by the mean (modules.json with a Pooling and a Normalize module, as
Qwen3-Embedding ships them) and by the CLS token without Normalize. Also the
errors: a usage error or one clear message for the command, a JSON error
with status 400 for the endpoint; and an embeddings request under way when
SIGTERM comes finishes (or gets a 503 when the drain runs out of time). Started by tests/test_embed.sh; prints
"tests/test_embed.sh: N passed, N failed" last. python3 standard library only."""
import base64
import http.client
import json
import math
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RUN, MODEL, GOLDEN, TMP = sys.argv[1:5]
golden = json.load(open(GOLDEN, encoding="utf-8"))
inputs, texts = golden["inputs"], golden["texts"]
check = harness.Checks("tests/test_embed.sh")


def error_of(vector, want):
    """The largest difference between two vectors (inf when their lengths differ)."""
    if len(vector) != len(want):
        return math.inf
    return max(abs(a - b) for a, b in zip(vector, want))


def unit(v):
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def checkpoint_with(name, modules, pooling):
    """A folder with MODEL's files (linked) and sentence-transformers' files."""
    folder = os.path.join(TMP, name)
    os.makedirs(os.path.join(folder, "1_Pooling"))
    for f in os.listdir(MODEL):
        if not os.path.isdir(os.path.join(MODEL, f)):
            os.symlink(os.path.join(MODEL, f), os.path.join(folder, f))
    json.dump(modules, open(os.path.join(folder, "modules.json"), "w"))
    json.dump(pooling, open(os.path.join(folder, "1_Pooling", "config.json"), "w"))
    return folder


TRANSFORMER = {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}
POOLING = {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
NORMALIZE = {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
MODES = {"pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
         "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
         "pooling_mode_lasttoken": False, "include_prompt": True}
MEAN = checkpoint_with("mean", [TRANSFORMER, POOLING, NORMALIZE], {**MODES, "pooling_mode_mean_tokens": True})
CLS = checkpoint_with("cls", [TRANSFORMER, POOLING], {**MODES, "pooling_mode_cls_token": True})
ids_arg = [",".join(map(str, ids)) for ids in inputs]


def embed(*args, stdin=None):
    return subprocess.run([RUN, "embed", *args], capture_output=True, text=True, input=stdin)


def lines_of(out):
    return [[float(x) for x in line.split(" ")] for line in out.splitlines()]


# ---- run embed: the reference's vectors ----
r = embed(MODEL, texts[0], texts[3])
vectors = lines_of(r.stdout) if r.returncode == 0 else []
check(len(vectors) == 2 and error_of(vectors[0], golden["last"][0]) < 1e-4 and error_of(vectors[1], golden["last"][3]) < 1e-4,
      f"run embed, two texts: a line each, the reference's last-token vectors within 1e-4 ({r.stderr})")
r = embed(MODEL, "--ids", *ids_arg)
vectors = lines_of(r.stdout) if r.returncode == 0 else []
check(len(vectors) == len(inputs) and all(error_of(v, golden["last"][i]) < 1e-4 for i, v in enumerate(vectors)),
      f"run embed --ids, {len(inputs)} inputs at once: the reference's vectors ({r.stderr})")
r = embed(MODEL, "-", stdin=texts[0])
check(r.returncode == 0 and error_of(lines_of(r.stdout)[0], golden["last"][0]) < 1e-4, "run embed -: the text from standard input")
r = embed(MEAN, "--json", "--ids", *ids_arg)
doc = json.loads(r.stdout) if r.returncode == 0 else {}
check(doc.get("pooling") == "mean" and doc.get("normalized") is True and len(doc.get("data", [])) == len(inputs) and
      all(d["index"] == i and d["tokens"] == len(inputs[i]) and error_of(d["embedding"], golden["mean"][i]) < 1e-4
          for i, d in enumerate(doc["data"])),
      f"run embed --json on a checkpoint with modules.json (mean, Normalize): the reference's mean-pooled vectors ({r.stderr})")
r = embed(CLS, "--json", "--ids", *ids_arg)
doc = json.loads(r.stdout) if r.returncode == 0 else {}
data = doc.get("data", [])
check(doc.get("pooling") == "CLS token" and doc.get("normalized") is False and len(data) == len(inputs) and
      all(error_of(unit(d["embedding"]), golden["cls"][i]) < 1e-4 for i, d in enumerate(data)) and
      all(abs(math.sqrt(sum(x * x for x in d["embedding"])) - 1) > 1e-3 for d in data),
      "run embed, CLS pooling without a Normalize module: the reference's direction, not scaled to length 1")

# ---- run embed: errors ----
r = embed(MODEL)
check(r.returncode == 2 and "TEXT is missing" in r.stderr, f"run embed without a text: usage error ({r.stderr.strip()})")
r = embed(MODEL, "--ids", "12,x")
check(r.returncode == 2 and "--ids" in r.stderr, f"run embed --ids with a word: usage error ({r.stderr.strip()})")
r = embed(MODEL, "--ids", "999999999")
check(r.returncode == 1 and "outside the vocabulary" in r.stderr and r.stderr.count("\n") == 1,
      f"run embed --ids past the vocabulary: one error ({r.stderr.strip()})")
r = embed(MODEL, "")
check(r.returncode == 1 and "no tokens" in r.stderr and r.stderr.count("\n") == 1, f"run embed '': one error ({r.stderr.strip()})")
r = embed(MODEL, "-c", "8", "a long text that takes more than eight tokens of the context")
check(r.returncode == 1 and "longer than the context of 8" in r.stderr and r.stderr.count("\n") == 1,
      f"run embed, a text longer than -c: one error ({r.stderr.strip()})")
broken = checkpoint_with("broken", [TRANSFORMER, POOLING], {**MODES, "pooling_mode_max_tokens": True})
r = embed(broken, "hi")
check(r.returncode == 1 and "pooling_mode_max_tokens is not supported" in r.stderr and r.stderr.count("\n") == 1,
      f"run embed, max pooling: refused in one line ({r.stderr.strip()})")


# ---- POST /v1/embeddings ----
class Server(harness.Server):
    """A `run serve` (see harness.Server) with the embeddings call."""

    def __init__(self, name, model, *flags):
        super().__init__(RUN, TMP, name, model, *flags)

    def embed(self, body):
        """(status, the JSON document)."""
        status, _, data = self.request("POST", "/v1/embeddings", body, timeout=600)
        return status, json.loads(data)

    def post_bytes(self, body):
        """(status, the body's bytes) of POST /v1/embeddings."""
        status, _, data = self.request("POST", "/v1/embeddings", body, timeout=600)
        return status, data


server = Server("last", MODEL, "-c", "256", "--parallel", "2")
status, body = server.embed({"model": "model", "input": texts[0]})
check(status == 200 and body["object"] == "list" and body["model"] == "model" and len(body["data"]) == 1 and
      body["data"][0]["object"] == "embedding" and body["data"][0]["index"] == 0 and
      error_of(body["data"][0]["embedding"], golden["last"][0]) < 1e-4 and
      body["usage"] == {"prompt_tokens": len(inputs[0]), "total_tokens": len(inputs[0])},
      f"a text: the reference's vector, the list's fields, usage ({str(body)[:300]})")
mixed = [texts[0], inputs[1], inputs[2], texts[3]]
status, body = server.embed({"input": mixed, "encoding_format": "float"})
check(status == 200 and [d["index"] for d in body["data"]] == [0, 1, 2, 3] and
      all(error_of(d["embedding"], golden["last"][i]) < 1e-4 for i, d in enumerate(body["data"])) and
      body["usage"]["prompt_tokens"] == sum(map(len, inputs)),
      "texts and token-id lists, 4 inputs through 2 slots: each the reference's vector, in order")
status, body = server.embed({"input": inputs[1]})
check(status == 200 and len(body["data"]) == 1 and error_of(body["data"][0]["embedding"], golden["last"][1]) < 1e-4,
      "token ids: the reference's vector")
status, floats = server.embed({"input": [inputs[1]], "encoding_format": "float"})
status64, b64 = server.embed({"input": [inputs[1]], "encoding_format": "base64"})
raw = base64.b64decode(b64["data"][0]["embedding"]) if status64 == 200 else b""
check(status64 == 200 and len(raw) == 4 * len(floats["data"][0]["embedding"]) and
      list(struct.unpack("<%df" % (len(raw) // 4), raw)) ==
      [struct.unpack("<f", struct.pack("<f", x))[0] for x in floats["data"][0]["embedding"]],
      "base64: the same float32s, little-endian")
status, body = server.embed({"input": texts[0], "dimensions": 16})
check(status == 200 and error_of(body["data"][0]["embedding"], unit(golden["last"][0][:16])) < 1e-4,
      "dimensions 16: the first 16 components, of length 1 again")
dim = len(golden["last"][0])
for what, payload in [("no input", {}), ("a number as input", {"input": 5}), ("an empty list", {"input": []}),
                      ("an empty id list", {"input": [[1, 2], []]}), ("a fraction as an id", {"input": [1.5]}),
                      ("a negative id", {"input": [[-1]]}), ("an object in the list", {"input": ["a", {"x": 1}]}),
                      ("encoding_format hex", {"input": "a", "encoding_format": "hex"}),
                      ("dimensions 0", {"input": "a", "dimensions": 0}),
                      ("dimensions past the model's", {"input": "a", "dimensions": dim + 1}),
                      ("a number as model", {"input": "a", "model": 5}),
                      ("an id past the vocabulary", {"input": [10 ** 7]}),
                      ("an input longer than the context", {"input": [[1] * 300]}),
                      ("an empty text", {"input": ["a", ""]}), ("2049 inputs", {"input": ["a"] * 2049}),
                      ("a list as body", [1]), ("malformed JSON", b"{\"input\":")]:
    status, data = server.post_bytes(payload)
    try:
        e = json.loads(data)["error"]
    except (ValueError, KeyError, TypeError):
        e = {}
    check(status == 400 and {"message", "type", "code"} <= set(e) and e["code"] == 400,
          f"{what}: 400 with a JSON error (got {status} {data[:200]!r})")
status, _, _ = server.request("GET", "/v1/embeddings")
check(status == 405, "GET /v1/embeddings: 405")
# The server counts a request once its response is out, so the last one may
# reach /metrics a moment after its client has read the answer: ask again
# for up to 5 s.
want = {"200": 6, "400": 17, "405": 1}
deadline = time.monotonic() + 5
while True:
    status, _, data = server.request("GET", "/metrics")
    counts = {s: int(n) for s, n in re.findall(r'^run_requests_total\{endpoint="/v1/embeddings",status="(\d+)"\} (\d+)$',
                                                  data.decode(), re.M)}
    if counts == want or time.monotonic() > deadline:
        break
    time.sleep(0.05)
check(counts == want, f"/metrics counts the embeddings requests by status ({counts})")
code = server.stop()
check(code == 0, f"SIGTERM: exit 0 (got {code})")

# ---- mean pooling through the endpoint; a request under way through a drain ----
server = Server("mean", MEAN, "-c", "256", "--parallel", "2", "--max-body", "8000000", "--drain-timeout", "300")
status, body = server.embed({"input": inputs})
check(status == 200 and all(error_of(d["embedding"], golden["mean"][i]) < 1e-4 for i, d in enumerate(body["data"])),
      "a checkpoint with modules.json (mean, Normalize): the reference's mean-pooled vectors")
# 100 inputs of 250 tokens take 50 waves of 2: SIGTERM comes in the middle,
# and the last wave (the reference's inputs) still runs.
many = [[(i * 7919 + k * 13) % 150000 for k in range(250)] for i in range(100)] + inputs
result = {}


def call(method, *args):
    """method(*args) into result["answer"]; a dropped connection as (None, its error)."""
    try:
        result["answer"] = method(*args)
    except (OSError, http.client.HTTPException, ValueError) as e:
        result["answer"] = (None, repr(e))


thread = threading.Thread(target=call, args=(server.embed, {"input": many}))
thread.start()
time.sleep(0.3)
server.proc.send_signal(signal.SIGTERM)
thread.join()
status, body = result["answer"]
code = server.proc.wait(timeout=600)
check(status == 200 and len(body["data"]) == len(many) and
      all(error_of(body["data"][100 + i]["embedding"], golden["mean"][i]) < 1e-4 for i in range(len(inputs))),
      f"SIGTERM during a request of {len(many)} inputs: it finishes, its last inputs the reference's vectors ({status})")
check("draining" in server.text() and code == 0, f"and the server drained, exit 0 (got {code})")
log = server.text()
# A drain that runs out of time ends the request: a 503, never half-made vectors.
# 2000 inputs take far longer than the 0.2 s drain, and SIGTERM waits until
# /metrics shows them running (a fixed sleep let a fast machine finish first).
server = Server("short", MODEL, "-c", "256", "--parallel", "2", "--max-body", "8000000", "--drain-timeout", "0.2")
many = [[(i * 7919 + k * 13) % 150000 for k in range(250)] for i in range(2000)]
thread = threading.Thread(target=call, args=(server.post_bytes, {"input": many}))
thread.start()
deadline = time.time() + 60
while time.time() < deadline and thread.is_alive():
    _, _, data = server.request("GET", "/metrics")
    if re.search(r"^run_slots_busy [1-9]", data.decode(), re.M):
        break
    time.sleep(0.01)
server.proc.send_signal(signal.SIGTERM)
thread.join()
status, data = result["answer"]
code = server.proc.wait(timeout=600)
check(status == 503 and b"shutting down" in data and code == 0,
      f"SIGTERM with --drain-timeout 0.2 during a long request: 503 'shutting down', exit 0 (got {status} {data!r:.100}, {code})")
log += server.text()
check("Sanitizer" not in log and "runtime error" not in log, "no sanitizer report")

check.finish()
