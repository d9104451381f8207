"""tests/test_server.py RUN MODEL GOLDEN TMP - `run serve` end to end.

Started by tests/test_server.sh. Checks the replies against the reference's
greedy continuations and log-probabilities (GOLDEN, made by
scripts/make_golden.py with the numpy reference), sampling against `run gen`
with the same seed, and every limit and error status against raw sockets.
Prints "tests/test_server.sh: N passed, N failed" last. python3 standard
library only."""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RUN, MODEL, GOLDEN, TMP = sys.argv[1:5]
golden = json.load(open(GOLDEN, encoding="utf-8"))
check = harness.Checks("tests/test_server.sh")


def read_until(s, end, got=b""):
    """Reads from socket s onto `got` until it ends with `end` (b"": until
    the peer closes) or the socket's timeout passes."""
    try:
        while not (end and got.endswith(end)):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        pass
    return got


class Server(harness.Server):
    """A `run serve` of MODEL (see harness.Server), and raw sockets to it."""

    def __init__(self, name, *flags):
        super().__init__(RUN, TMP, name, MODEL, *flags)

    def raw(self, data, wait=5.0, then_close=True):
        """Sends bytes on a raw socket; returns everything read until the
        server closes (or `wait` seconds)."""
        s = socket.create_connection(("127.0.0.1", self.port))
        s.settimeout(wait)
        if data:
            s.sendall(data)
        got = read_until(s, b"")
        if then_close:
            s.close()
        return got


def status_of(raw):
    m = re.match(rb"HTTP/1\.1 (\d+) ", raw)
    return int(m.group(1)) if m else None


def json_error(raw):
    """The error object of a raw response, or None."""
    body = raw.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in raw else b""
    try:
        e = json.loads(body)["error"]
        return e if {"message", "type", "code"} <= set(e) else None
    except (ValueError, KeyError, TypeError):
        return None


def events(data):
    """The JSON chunks of a server-sent event stream, and whether it ended with [DONE]."""
    chunks, done = [], False
    for line in data.decode().split("\n"):
        if line.startswith("data: "):
            if line == "data: [DONE]":
                done = True
            else:
                chunks.append(json.loads(line[6:]))
    return chunks, done


def chat(server, messages, **fields):
    return server.post("/v1/chat/completions", {"messages": messages, **fields})


def streamed_text(chunks):
    out = ""
    for c in chunks:
        for ch in c["choices"]:
            out += ch.get("delta", {}).get("content") or ch.get("text") or ""
    return out


# The reference's conversation and continuations.
conversation = golden["chat"]["conversation"]
first_turn = conversation[:1]
replies = golden["chat"]["stdout"].split("\n")[:2]
n_chat = golden["chat_tokens"]
n_gen = golden["gen_tokens"]
turn_ids = golden["chat"]["turn_ids"]

server = Server("main", "-c", "256", "--parallel", "4", "--queue", "16", "--timeout", "1", "--seed", "1")

# ---- the plain endpoints ----
status, _, body = server.request("GET", "/health")
check(status == 200 and json.loads(body) == {"status": "ok"}, "GET /health")
status, _, body = server.request("GET", "/v1/models")
check(status == 200 and json.loads(body)["data"][0]["id"] == "model", "GET /v1/models names the model")
prompt0 = golden["gen"][0]
status, body = server.post("/tokenize", {"content": prompt0["prompt"]})
check(status == 200 and body["tokens"] == prompt0["prompt_ids"], "POST /tokenize: the reference's ids")
status, body = server.post("/detokenize", {"tokens": golden["chat"]["reply_ids"][0]})
check(status == 200 and body["content"] == replies[0], "POST /detokenize: the reference's text")

# ---- chat: the reference's replies, whole and streamed; the cache ----
status, body = chat(server, first_turn, max_tokens=n_chat)
check(status == 200 and body["choices"][0]["message"]["content"] == replies[0],
      f"chat turn 1: the reference's reply (got {body})")
check(body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-") and body["model"] == "model"
      and body["choices"][0]["finish_reason"] == "length" and body["usage"]["prompt_tokens"] == len(turn_ids[0])
      and body["usage"]["completion_tokens"] == n_chat, f"chat turn 1: the response's fields ({body})")
status, _, data = server.request("POST", "/v1/chat/completions",
                                 {"messages": first_turn, "max_tokens": n_chat, "stream": True,
                                  "stream_options": {"include_usage": True}})
chunks, done = events(data)
check(status == 200 and done and streamed_text(chunks) == replies[0], "chat turn 1 streamed: the same text, then [DONE]")
check(chunks[0]["choices"][0]["delta"].get("role") == "assistant" and chunks[-1]["choices"] == []
      and chunks[-1]["usage"]["completion_tokens"] == n_chat
      and chunks[-2]["choices"][0]["finish_reason"] == "length", "chat streamed: role first, finish_reason, usage last")
# The follow-up turn starts with turn 1 and its reply: the slot that ran it
# has all of that but the reply's last token (fed only by the next step).
status, body = chat(server, conversation, max_tokens=n_chat)
want_cached = len(turn_ids[0]) + n_chat - 1
check(status == 200 and body["choices"][0]["message"]["content"] == replies[1], "chat turn 2: the reference's reply")
check(body["usage"]["prompt_tokens"] == len(turn_ids[1]) and
      body["usage"]["prompt_tokens_details"]["cached_tokens"] == want_cached,
      f"chat turn 2: {want_cached} prompt tokens from the cache (usage: {body['usage']})")
check(server.wait_log(f"prompt={len(turn_ids[1])} cached={want_cached} generated={n_chat}"),
      "chat turn 2: the log line shows the cached tokens")
# Another conversation that merely begins alike goes to another slot, so
# turn 2's cache survives it.
status, body = chat(server, [{"role": "user", "content": "a different conversation"}], max_tokens=2)
check(status == 200, "chat: a second conversation")
status, body = chat(server, conversation, max_tokens=n_chat)
check(status == 200 and body["choices"][0]["message"]["content"] == replies[1] and
      body["usage"]["prompt_tokens_details"]["cached_tokens"] >= len(turn_ids[1]) - 1,
      f"chat turn 2 again after another conversation: its cache kept (usage: {body['usage']})")
status, body = chat(server, [{"role": "user", "content": [{"type": "text", "text": "h"}, {"type": "text", "text": "i"}]}],
                    max_tokens=n_chat)
check(status == 200 and body["choices"][0]["message"]["content"] == replies[0], "chat: content as text parts")

# ---- completions: the reference's continuations, its log-probabilities ----
for i, g in enumerate(golden["gen"]):
    status, body = server.post("/v1/completions", {"prompt": g["prompt"], "max_tokens": n_gen})
    check(status == 200 and body["choices"][0]["text"] == g["stdout"][:-1], f"completion {i}: the reference's continuation")
status, body = server.post("/v1/completions", {"prompt": prompt0["prompt_ids"], "max_tokens": n_gen})
check(status == 200 and body["choices"][0]["text"] == prompt0["stdout"][:-1] and
      body["usage"]["prompt_tokens"] == len(prompt0["prompt_ids"]),
      "completion: the prompt as the reference's token ids, the same continuation")
status, body = server.post("/v1/completions", {"prompt": [prompt0["prompt_ids"][:1] + [10 ** 9]], "max_tokens": 1})
check(status == 400 and "vocabulary" in body["error"]["message"], f"completion: a token id past the vocabulary: 400 ({body})")
status, body = server.post("/v1/completions", {"prompt": prompt0["prompt"], "max_tokens": 2, "logprobs": 5})
lp = body["choices"][0]["logprobs"]
want = [t["logprob"] for t in prompt0["top_logprobs"]]
got = sorted(lp["top_logprobs"][0].values(), reverse=True)
check(len(got) == 5 and all(abs(a - b) < 1e-4 for a, b in zip(got, want)),
      f"completion logprobs: the reference's top 5 (got {got}, want {want})")
check(abs(lp["token_logprobs"][0] - want[0]) < 1e-4, "completion logprobs: the chosen token's")
status, body = chat(server, first_turn, max_tokens=3, logprobs=True, top_logprobs=20)
items = body["choices"][0]["logprobs"]["content"]
check(len(items) == 3 and all(len(it["top_logprobs"]) == 20 for it in items), "chat logprobs: 20 top tokens a step")
check(all(it["logprob"] == it["top_logprobs"][0]["logprob"] and bytes(it["bytes"]).decode("utf-8", "replace") is not None
          for it in items), "chat logprobs: greedy picks the most probable")
check(b"".join(bytes(it["bytes"]) for it in items).decode() ==
      server.post("/detokenize", {"tokens": golden["chat"]["reply_ids"][0][:3]})[1]["content"],
      "chat logprobs: the tokens' bytes make the reply")

# ---- stop strings ----
text0 = prompt0["stdout"][:-1]
stop = "⛵"
for stream in (False, True):
    status, _, data = server.request("POST", "/v1/completions",
                                     {"prompt": prompt0["prompt"], "max_tokens": n_gen, "stop": [stop, "zzz"],
                                      "stream": stream})
    if stream:
        chunks, done = events(data)
        text, finish = streamed_text(chunks), chunks[-1]["choices"][0]["finish_reason"]
    else:
        body = json.loads(data)
        text, finish = body["choices"][0]["text"], body["choices"][0]["finish_reason"]
    check(text == text0[:text0.index(stop)] and finish == "stop",
          f"stop string ({'streamed' if stream else 'whole'}): the text before it, finish_reason stop (got {text!r})")

# ---- sampling: the same tokens as `run gen` with the same seed ----
gen = subprocess.run([RUN, "gen", MODEL, "Hello", "-n", "12", "--temp", "0.9", "--top-k", "40", "--seed", "7"],
                     capture_output=True, text=True)
status, body = server.post("/v1/completions", {"prompt": "Hello", "max_tokens": 12, "temperature": 0.9, "top_k": 40,
                                               "seed": 7})
check(status == 200 and body["choices"][0]["text"] == gen.stdout[:-1], "sampling with a seed: gen's text")

# ---- concurrency: each of several requests at once gets its solo result ----
results = {}


def run_completion(i, g):
    results[i] = server.post("/v1/completions", {"prompt": g["prompt"], "max_tokens": n_gen})


threads = [threading.Thread(target=run_completion, args=(i, golden["gen"][i % len(golden["gen"])])) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check(all(results[i][0] == 200 and results[i][1]["choices"][0]["text"] == golden["gen"][i % 5]["stdout"][:-1]
          for i in range(8)), "8 requests at once on 4 slots: each the reference's continuation")

# ---- a bounded load: every request answered exactly once ----
answers, lock = [], threading.Lock()


def client(k):
    for j in range(200 // 16 + (k < 200 % 16)):
        if (k + j) % 2:
            status, body = chat(server, [{"role": "user", "content": f"question {k} {j}"}], max_tokens=2)
        else:
            status, body = server.post("/v1/completions", {"prompt": f"text {k} {j}", "max_tokens": 2})
        with lock:
            answers.append((status, body["id"] if status == 200 else None))


threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check(len(answers) == 200 and all(s == 200 for s, _ in answers) and len({i for _, i in answers}) == 200,
      f"200 requests from 16 threads: 200 answers, all 200, distinct ids ({sorted(set(s for s, _ in answers))})")

# ---- bad requests: a JSON error with the right status ----
def bad(body, path="/v1/chat/completions", status=400, what=""):
    st, h, data = server.request("POST", path, body)
    e = json.loads(data).get("error", {}) if data.startswith(b"{") else {}
    check(st == status and {"message", "type", "code"} <= set(e), f"{what or body}: status {st}, expected {status}")


good = {"messages": first_turn, "max_tokens": 2}
bad(b"{not json", what="malformed JSON")
bad(b"[1, 2]", what="not an object")
bad({**good, "temperature": "hot"}, what="a string temperature")
bad({**good, "max_tokens": 1.5}, what="a fractional max_tokens")
bad({"messages": [{"role": "wizard", "content": "hi"}]}, what="an unknown role")
bad({"messages": "hi"}, what="messages not a list")
bad({"messages": [{"role": "user", "content": 5}]}, what="a number as content")
bad({**good, "n": 2}, what="n = 2")
bad({**good, "max_tokens": -2}, what="max_tokens = -2")
bad({**good, "seed": 1e20}, what="seed = 1e20")
bad({**good, "top_logprobs": 3}, what="top_logprobs without logprobs")
bad({**good, "logprobs": True, "top_logprobs": 21}, what="top_logprobs = 21")
bad({**good, "stop": ["a", "b", "c", "d", "e"]}, what="five stop strings")
bad({**good, "top_p": 1.5}, what="top_p = 1.5")
bad({"prompt": "hello " * 400, "max_tokens": 1}, path="/v1/completions", what="a prompt longer than the context")
bad({"prompt": 5}, path="/v1/completions", what="a number as prompt")
bad({"tokens": [-1]}, path="/detokenize", what="a negative token id")
st, h, data = server.request("POST", "/v2/nothing", {})
check(st == 404 and json_error(b"\r\n\r\n" + data), "an unknown path: 404")
st, h, data = server.request("GET", "/v1/chat/completions")
check(st == 405 and h.get("Allow") == "POST, OPTIONS" and json_error(b"\r\n\r\n" + data), "GET on a POST endpoint: 405 with Allow")

# ---- hostile HTTP ----
head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
body = json.dumps(good).encode()
r = server.raw(head + b"X-Big: " + b"a" * 17000 + b"\r\n\r\n")
check(status_of(r) == 431 and json_error(r), "headers over 16 KiB: 431")
r = server.raw(head + b"\r\n" + body)
check(status_of(r) == 411 and json_error(r), "a POST without Content-Length: 411")
r = server.raw(head + b"Content-Length: 2000000\r\n\r\n")
check(status_of(r) == 413 and json_error(r), "a body over 1 MiB: 413")
r = server.raw(head + b"Content-Length: 2000000\r\n\r\n" + b" " * 2000000)
check(status_of(r) == 413, "a body over 1 MiB sent anyway: 413")
r = server.raw(head + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
check(status_of(r) == 200 and b'"chat.completion"' in r, "a chunked body: 200")
r = server.raw(head + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n")
check(status_of(r) == 400 and json_error(r), "a malformed chunked body: 400")
r = server.raw(head + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n")
check(status_of(r) == 400, "both Content-Length and chunked: 400")
r = server.raw(b"GARBAGE\r\n\r\n")
check(status_of(r) == 400 and json_error(r), "a malformed request line: 400")
r = server.raw(b"GET /health HTTP/2.0\r\n\r\n")
check(status_of(r) == 505, "HTTP/2.0 on this parser: 505")
t0 = time.time()
r = server.raw(b"GET /health HTTP/1.1\r\nHost: x\r\n", wait=10)
check(time.time() - t0 < 5 and (r == b"" or status_of(r) == 408), "slowloris (headers never end): dropped after --timeout")
t0 = time.time()
r = server.raw(head + b"Content-Length: 100\r\n\r\n{\"messages\"", wait=10)
check(time.time() - t0 < 5 and status_of(r) == 408 and json_error(r), "a lying Content-Length: 408 after --timeout")
r = server.raw(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
check(r.count(b"HTTP/1.1 200 OK") == 2, "two pipelined requests on one connection: two answers")
check(server.request("GET", "/health")[0] == 200, "the server still answers")
code = server.stop()
check(code == 0, f"SIGTERM: exit status 0 (got {code})")
log = server.text()
check("Sanitizer" not in log and "runtime error" not in log, "no sanitizer report:\n" + log[-3000:])

# ---- a second server: the API key, a full queue, disconnects, SIGTERM mid-stream ----
server = Server("small", "-c", "4096", "--parallel", "1", "--queue", "0", "--api-key", "s3cret", "--max-connections", "3",
                "--drain-timeout", "0.2")
key = {"Authorization": "Bearer s3cret"}
check(server.wait_log(r"\(1 slot of 4096 tokens\)"), "one slot: '1 slot', not '1 slots'")
st, _, data = server.request("POST", "/v1/chat/completions", good)
check(st == 401 and json_error(b"\r\n\r\n" + data), "--api-key: no key, 401")
st, _, _ = server.request("POST", "/v1/chat/completions", good, {"Authorization": "Bearer s3cre"})
check(st == 401, "--api-key: a wrong key, 401")
st, _, _ = server.request("GET", "/v1/models", None, {"Authorization": "Bearer s3cret!"})
check(st == 401, "--api-key: a longer key, 401")
check(server.request("GET", "/health")[0] == 200, "--api-key: /health needs none")
time.sleep(0.5)  # the connections of the requests above end
idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
time.sleep(0.3)
r = server.raw(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
check(status_of(r) == 503 and json_error(r), f"--max-connections 3: a fourth connection gets 503 (got {r[:200]!r})")
for sock in idle:
    sock.close()
t0 = time.time()
while time.time() - t0 < 5 and status_of(server.raw(b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")) != 200:
    time.sleep(0.05)
check(time.time() - t0 < 5, "closed connections make room again")
# A connection counts until the server has seen the client close it, so a
# request right after another's close may still find no room (503 "too many
# open connections"); those are retried, for up to 5 s.
NO_ROOM = b"too many open connections"


def request_with_room(method, path, body, headers):
    t0 = time.time()
    while True:
        st, h, data = server.request(method, path, body, headers)
        if not (st == 503 and NO_ROOM in data) or time.time() - t0 > 5:
            return st, h, data
        time.sleep(0.05)


st, _, _ = request_with_room("POST", "/v1/chat/completions", good, key)
check(st == 200, f"--api-key: the right key, 200 (got {st})")


def open_stream(max_tokens):
    """A streaming request on a raw socket, read until its first text chunk
    (retried while the server has no room for the connection yet)."""
    t0 = time.time()
    while True:
        s = socket.create_connection(("127.0.0.1", server.port))
        req = json.dumps({"prompt": "Hello", "max_tokens": max_tokens, "stream": True}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(req) + req)
        got = b""
        while got.count(b"data: ") < 2:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        if NO_ROOM not in got or time.time() - t0 > 5:
            return s, got
        s.close()
        time.sleep(0.05)


s, _ = open_stream(100000)
st, h, data = request_with_room("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1}, key)
check(st == 503 and NO_ROOM not in data and h.get("Retry-After") and json_error(b"\r\n\r\n" + data),
      "one slot busy, no queue: 503 with Retry-After")
s.close()
t0 = time.time()
st = None
while time.time() - t0 < 10:
    st, _, _ = server.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1}, key)
    if st == 200:
        break
    time.sleep(0.02)
check(st == 200, "a disconnect mid-stream frees the slot")
m = server.wait_log(r"POST /v1/completions 499 prompt=\d+ cached=\d+ generated=(\d+)")
check(m is not None and int(m.group(1)) < 100000, "the disconnected stream stopped (logged 499)")
s, got = open_stream(100000)
code = server.stop()
s.settimeout(10)
got = read_until(s, b"data: [DONE]\n\n\r\n0\r\n\r\n", got)
check(code == 0, f"SIGTERM with a stream open: exit status 0 (got {code})")
check(b"data: [DONE]" in got and b'"finish_reason":"stop"' in got,
      "SIGTERM, --drain-timeout 0.2: the endless stream ends after it with [DONE]")
log = server.text()
check("Sanitizer" not in log and "runtime error" not in log, "no sanitizer report:\n" + log[-3000:])

# ---- the context's edge: prompts of c-2 .. c+1 tokens, max_tokens -1, 0, 1, 5, c ----
c = 16
server = Server("edges", "-c", str(c), "--parallel", "3", "--queue", "8", "--seed", "1")
check(server.wait_log(r"\(3 slots of 16 tokens\)"), "the log line says the slots and their context")


def edge(p, limit, first):
    """A completion of prompt ids [first, 1, 2, ...] (p of them): (status, body)."""
    ids = [first] + [(7 * i + first) % 500 + 1 for i in range(1, p)]
    return server.post("/v1/completions", {"prompt": ids, "max_tokens": limit})


def check_edge(p, limit, status, body, how):
    what = f"c {c}, prompt {p}, max_tokens {limit}{how}"
    if p > c:
        check(status == 400 and f"longer than the context of {c}" in body["error"]["message"], f"{what}: refused ({body})")
        return
    n, finish = body["usage"]["completion_tokens"], body["choices"][0]["finish_reason"]
    room = c - p + 1
    least = room if limit < 0 else min(limit, room)
    ok = status == 200 and n <= c - p + 1 and (limit < 0 or n <= limit) and finish in ("length", "stop")
    # Only an end token ("stop") may end a reply before the limit or the context.
    check(ok and (finish == "stop" or n >= least), f"{what}: {n} tokens, finish_reason {finish} ({body})")


for limit in (-1, 0, 1, 5, c):
    for p in range(c - 2, c + 2):
        status, body = edge(p, limit, 600 + p)
        check_edge(p, limit, status, body, "")
    # The four at once: slots at different positions in one batch.
    got = {}
    threads = [threading.Thread(target=lambda p=p: got.__setitem__(p, edge(p, limit, 700 + p + 10 * limit)))
               for p in range(c - 2, c + 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in range(c - 2, c + 2):
        check_edge(p, limit, *got[p], " (at once)")
check(server.request("GET", "/health")[0] == 200, "after the edges the server still answers")
code = server.stop()
check(code == 0, f"SIGTERM: exit status 0 (got {code})")
log = server.text()
check("Sanitizer" not in log and "runtime error" not in log, "no sanitizer report:\n" + log[-3000:])

# ---- for operators: metrics, props, a model by id, CORS, the JSON access log, a graceful drain ----
# (A long drain timeout: the drain below waits for 300 tokens, which the
# plain kernels under the sanitizers on a busy machine take more than the
# default 30 s to write.)
server = Server("operators", "-c", "512", "--parallel", "2", "--seed", "1", "--cors", "https://good.example",
                "--log-format", "json", "--drain-timeout", "600")
status, _, body = server.request("GET", "/v1/models/model")
check(status == 200 and json.loads(body)["id"] == "model" and json.loads(body)["object"] == "model",
      "GET /v1/models/{id}: the model")
status, _, body = server.request("GET", "/v1/models/other")
check(status == 404 and json_error(b"\r\n\r\n" + body), "GET /v1/models/{another id}: 404")
status, _, body = server.request("GET", "/props")
props = json.loads(body)
check(status == 200 and props["slots"] == 2 and props["context_per_slot"] == 512 and props["model"] == "model"
      and props["chat_template"] == {"tools": True, "thinking": False, "tool_call_syntax": "qwen"},
      f"GET /props: slots, context, Qwen2.5's template shows tools, writes Qwen's calls, has no thinking switch ({props})")
usage = []
for i in range(3):
    status, body = server.post("/v1/completions", {"prompt": golden["gen"][i]["prompt"], "max_tokens": 4 + i})
    usage.append(body["usage"])
server.request("GET", "/nowhere")
status, h, body = server.request("GET", "/metrics")
text = body.decode()
check(status == 200 and h.get("Content-Type", "").startswith("text/plain; version=0.0.4"), "GET /metrics: the text format")
# Without the parser, the samples read by the format's grammar: name{labels} value.
samples = {}
for line in text.splitlines():
    if line and not line.startswith("#"):
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\})? (\S+)', line)
        check(m is not None, f"/metrics: a sample line ({line!r})")
        if m:
            samples[m.group(1) + (m.group(2) or "")] = float(m.group(3))
check(samples.get('run_requests_total{endpoint="/v1/completions",status="200"}') == 3
      and samples.get('run_requests_total{endpoint="other",status="404"}') == 1,
      f"/metrics: requests by endpoint and status ({samples})")
check(samples.get("run_prompt_tokens_total") == sum(u["prompt_tokens"] for u in usage)
      and samples.get("run_generated_tokens_total") == sum(u["completion_tokens"] for u in usage)
      and samples.get("run_time_to_first_token_seconds_count") == 3
      and samples.get("run_time_per_output_token_seconds_count") == sum(u["completion_tokens"] - 1 for u in usage)
      and samples.get("run_slots") == 2 and samples.get("run_slots_busy") == 0 and samples.get("run_queue_length") == 0,
      "/metrics: the tokens of the replies, a first token each, the gaps between the others, the slots")
# Prometheus' own parser (python3-prometheus-client), in this python or in
# Debian's when this one is another (a pyenv python3 on the PATH).
PARSE = """
import json, sys
from prometheus_client.parser import text_string_to_metric_families
print(json.dumps([{"name": f.name, "type": f.type, "samples": [[s.name, s.labels, s.value] for s in f.samples]}
                  for f in text_string_to_metric_families(sys.stdin.read())]))
"""
families = None
for python in (sys.executable, "/usr/bin/python3"):
    parsed = subprocess.run([python, "-c", PARSE], input=text, capture_output=True, text=True) if os.path.exists(python) else None
    if parsed and parsed.returncode == 0:
        families = {f["name"]: f for f in json.loads(parsed.stdout)}
        break
check(families is not None, "/metrics read by prometheus_client (python3-prometheus-client: scripts/setup.sh --tests)")
families = families or {}
ttft = families.get("run_time_to_first_token_seconds")
buckets = [smp for smp in ttft["samples"] if smp[0].endswith("_bucket")] if ttft else []
check(ttft is not None and ttft["type"] == "histogram" and buckets[-1][1]["le"] == "+Inf"
      and buckets[-1][2] == 3 and all(a[2] <= b[2] for a, b in zip(buckets, buckets[1:])),
      "/metrics read by prometheus_client: a histogram, cumulative buckets up to +Inf")
req = families.get("run_requests")
check(req is not None and req["type"] == "counter" and
      any(smp[1] == {"endpoint": "/v1/completions", "status": "200"} and smp[2] == 3 for smp in req["samples"]),
      "/metrics read by prometheus_client: the requests counter by endpoint and status")
check({"run_prompt_tokens", "run_cached_prompt_tokens", "run_generated_tokens", "run_slots_busy",
       "run_queue_length", "run_time_per_output_token_seconds"} <= set(families),
      f"/metrics read by prometheus_client: every family ({sorted(families)})")

# CORS: an allowed origin gets it back, a foreign one nothing; the preflight.
_, h, _ = server.request("GET", "/v1/models", headers={"Origin": "https://good.example"})
check(h.get("Access-Control-Allow-Origin") == "https://good.example" and h.get("Vary") == "Origin",
      "CORS: an allowed origin is named back")
_, h, _ = server.request("GET", "/v1/models", headers={"Origin": "https://evil.example"})
check("Access-Control-Allow-Origin" not in h, "CORS: a foreign origin gets no CORS header")
status, h, _ = server.request("OPTIONS", "/v1/chat/completions",
                              headers={"Origin": "https://good.example", "Access-Control-Request-Method": "POST",
                                       "Access-Control-Request-Headers": "authorization,content-type"})
check(status == 204 and h.get("Access-Control-Allow-Origin") == "https://good.example"
      and "POST" in h.get("Access-Control-Allow-Methods", "")
      and {"Authorization", "Content-Type"} <= {x.strip() for x in h.get("Access-Control-Allow-Headers", "").split(",")},
      f"CORS preflight: 204, the methods and headers ({status} {h})")
status, h, data = server.request("POST", "/v1/chat/completions", {"messages": first_turn, "max_tokens": 2, "stream": True},
                                 headers={"Origin": "https://good.example"})
check(status == 200 and h.get("Access-Control-Allow-Origin") == "https://good.example", "CORS: on a stream too")
lines = [json.loads(l) for l in server.text().splitlines() if l.startswith("{")]
check(len(lines) >= 10 and all({"method", "path", "status", "ms", "generated_tokens"} <= set(l) for l in lines)
      and any(l["path"] == "/nowhere" and l["status"] == 404 for l in lines),
      f"--log-format json: one JSON object per request ({len(lines)} lines)")

# The drain: a stream under way finishes with all its tokens; /health says
# draining on an open connection; new connections are refused; exit 0.
keep = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
keep.request("GET", "/health")
r = keep.getresponse()
check(r.status == 200 and json.loads(r.read()) == {"status": "ok"}, "/health before SIGTERM: ok")
s = socket.create_connection(("127.0.0.1", server.port))
req = json.dumps({"prompt": prompt0["prompt"], "max_tokens": 300, "stream": True}).encode()
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(req) + req)
s.settimeout(30)
got = read_until_data = b""
while got.count(b"data: ") < 2:
    got += s.recv(65536)
server.proc.send_signal(signal.SIGTERM)
check(server.wait_log("draining"), "SIGTERM: the log says it drains")
keep.request("GET", "/health")
r = keep.getresponse()
check(r.status == 503 and json.loads(r.read()) == {"status": "draining"}, "/health while draining: 503 draining")
try:
    socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
    refused = False
except OSError:
    refused = True
check(refused, "while draining: new connections refused")
got = read_until(s, b"data: [DONE]\n\n\r\n0\r\n\r\n", got)
chunks, done = events(got.split(b"\r\n\r\n", 1)[1].replace(b"\r\n", b"\n"))
check(done and chunks[-1]["choices"][0]["finish_reason"] == "length"
      and sum(1 for c in chunks if c["choices"] and c["choices"][0]["text"]) >= 250,
      f"the stream under way finished: all 300 tokens, finish_reason length, [DONE] (done {done}, "
      f"{sum(1 for c in chunks if c['choices'] and c['choices'][0]['text'])} text chunks, last {chunks[-1:]!r:.300})")
keep.close()
s.close()
code = server.proc.wait(timeout=30)
check(code == 0, f"drained: exit status 0 (got {code})")
log = server.text()
check("Sanitizer" not in log and "runtime error" not in log, "no sanitizer report:\n" + log[-3000:])

# A second signal ends the drain at once.
server = Server("second", "-c", "4096", "--parallel", "1")
s, got = None, b""
s = socket.create_connection(("127.0.0.1", server.port))
req = json.dumps({"prompt": "Hello", "max_tokens": 100000, "stream": True}).encode()
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(req) + req)
s.settimeout(30)
while got.count(b"data: ") < 2:
    got += s.recv(65536)
server.proc.send_signal(signal.SIGTERM)
server.wait_log("draining")
t0 = time.time()
server.proc.send_signal(signal.SIGINT)
got = read_until(s, b"data: [DONE]\n\n\r\n0\r\n\r\n", got)
code = server.proc.wait(timeout=30)
check(code == 0 and time.time() - t0 < 5 and b"data: [DONE]" in got,
      f"a second signal: the stream ends at once with [DONE], exit 0 (got {code})")
s.close()

# ---- a KV cache of bf16 keys and values in the slots ----
# One slot: a follow-up turn computes only its new tokens from the kept
# cache, then, after another conversation took the slot, all of them again;
# the reply is the same both ways (cached rows are the rows a new pass writes).
server = Server("bf16-cache", "-c", "256", "--parallel", "1", "-ctk", "bf16", "--cache-type-v=bf16")
status, body = chat(server, first_turn, max_tokens=n_chat, temperature=0)
check(status == 200 and body["usage"]["completion_tokens"] == n_chat, f"bf16 KV cache: chat turn 1 ({body})")
follow_up = first_turn + [{"role": "assistant", "content": body["choices"][0]["message"]["content"]},
                          {"role": "user", "content": conversation[2]["content"]}]
status, kept = chat(server, follow_up, max_tokens=n_chat, temperature=0)
status2, _ = chat(server, [{"role": "user", "content": "a different conversation"}], max_tokens=2)
status3, again = chat(server, follow_up, max_tokens=n_chat, temperature=0)
check(status == status2 == status3 == 200 and kept["usage"]["prompt_tokens_details"]["cached_tokens"] >= len(turn_ids[0])
      and again["usage"]["prompt_tokens_details"]["cached_tokens"] < len(turn_ids[0]),
      f"bf16 KV cache: turn 2 from the kept cache, then computed again ({kept['usage']}, {again['usage']})")
check(kept["choices"][0]["message"]["content"] == again["choices"][0]["message"]["content"],
      "bf16 KV cache: the same reply from the kept cache as computed again")
server.stop()
r = subprocess.run([RUN, "serve", MODEL, "--port", "0", "-ctk", "q8_0"], capture_output=True, text=True, timeout=30)
check(r.returncode == 1 and "a q8_0 KV cache needs head_dim to be a multiple of 32" in r.stderr,
      f"serve -ctk q8_0 on head_dim 16: refused ({r.stderr.strip()})")
r = subprocess.run([RUN, "serve", MODEL, "--port", "0", "-ctv", "q4_0"], capture_output=True, text=True, timeout=30)
check(r.returncode == 2 and "the types are f32 (exact), bf16 and q8_0" in r.stderr, f"serve -ctv q4_0: refused ({r.stderr.strip()})")

# ---- serve's flags: only what serve honours ----
h = subprocess.run([RUN, "serve", "--help"], capture_output=True, text=True)
check(h.returncode == 0 and "--parallel" in h.stdout and "-v, -vv" not in h.stdout and "--report" not in h.stdout,
      "serve --help: lists neither -v nor --report")
for flag in (["-v"], ["--report", os.path.join(TMP, "r.html")]):
    r = subprocess.run([RUN, "serve", MODEL, *flag], capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and "not available with serve" in r.stderr, f"serve {flag[0]}: refused ({r.stderr.strip()})")

check.finish()
sys.exit(1 if failed else 0)
