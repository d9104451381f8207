#!/usr/bin/env python3
"""scripts/bench_serve.py MODEL [flags] - `run serve` under concurrent load.

Starts `./run serve MODEL` on a free port and, for each number of
concurrent streams (--streams, default 1,2,4,8), has that many clients
each stream one greedy /v1/completions of --tokens tokens at once. Prints
per load: the aggregate decode rate (generated tokens of all streams /
wall time from the first token to the last), the mean time to the first
token, and the ratio to one stream's rate. Then the prompt cache: the time
to the first token of a follow-up turn of a --history-token conversation
(its earlier turns cached by a first request) against that of a fresh
16-token prompt.

With LLAMA_CPP set (a llama.cpp folder with build/bin/llama-server) and
--gguf FILE (the same checkpoint converted with ../shared/tools/make_gguf.py),
the same load runs against `llama-server --parallel P` too.

python3 standard library only. The figures depend on the machine: run it
on a quiet one.
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time


def start(cmd, ready, log_path):
    """Starts a server; returns (process, port) once `ready` (a regex with
    the port as group 1, or a fixed port) is seen or the health check answers."""
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 600
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{cmd[0]} exited: see {log_path}")
        if isinstance(ready, int):
            try:
                c = http.client.HTTPConnection("127.0.0.1", ready, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return proc, ready
            except OSError:
                pass
        else:
            m = re.search(ready, open(log_path, errors="replace").read())
            if m:
                return proc, int(m.group(1))
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"{cmd[0]} did not start: see {log_path}")


def stream(port, path, body, result):
    """One streaming request: records the time of each content event."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.time()
    c.request("POST", path, json.dumps({**body, "stream": True}), {"Content-Type": "application/json"})
    r = c.getresponse()
    times = []
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        for ch in chunk.get("choices", []):
            text = ch.get("text") or (ch.get("delta") or {}).get("content")
            if text:
                times.append(time.time())
    c.close()
    result.append((t0, times))


def load(port, n, tokens, chat=False):
    results, threads = [], []
    for i in range(n):
        if chat:
            body = {"messages": [{"role": "user", "content": f"Story {i}: tell me about the sea."}]}
            path = "/v1/chat/completions"
        else:
            body = {"prompt": f"Once upon a time, in story number {i}, there", "temperature": 0}
            path = "/v1/completions"
        body.update({"max_tokens": tokens, "temperature": 0})
        threads.append(threading.Thread(target=stream, args=(port, path, body, results)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = min(times[0] for _, times in results if times)
    last = max(times[-1] for _, times in results if times)
    generated = sum(len(times) - 1 for _, times in results if times)  # tokens after each stream's first
    ttft = sum(times[0] - t0 for t0, times in results if times) / len(results)
    return generated / max(last - first, 1e-9), ttft, sum(len(t) for _, t in results)


def ttft(port, body, path="/v1/chat/completions"):
    results = []
    stream(port, path, {**body, "max_tokens": 2, "temperature": 0}, results)
    t0, times = results[0]
    return times[0] - t0 if times else float("nan")


def cache_test(port, history):
    """Time to the first token: a follow-up turn of a long conversation vs a fresh 16-token prompt.

    Each is the best of three. Three conversations of about `history` tokens
    are sent first (a slot's cache then holds each); each then gets one
    follow-up turn. The fresh prompts share no first token with anything
    cached, so all of their 16 tokens are computed."""
    conversations = []
    for c in range(3):
        words = " ".join(f"word{c}x{i}" for i in range(history // 6))
        conversation = [{"role": "user", "content": f"Remember list {c}: {words}"},
                        {"role": "assistant", "content": "I will remember it."},
                        {"role": "user", "content": "First question?"}]
        ttft(port, {"messages": conversation})  # fills a slot's cache
        conversations.append(conversation)
    follow = min(ttft(port, {"messages": conversation + [{"role": "assistant", "content": "x"},
                                                         {"role": "user", "content": "Second question?"}]})
                 for conversation in conversations)
    fresh = min(ttft(port, {"prompt": f"{animal} went to the market to buy bread, milk and two kinds of cheese"},
                     "/v1/completions") for animal in ("Zebras", "Yaks", "Otters"))
    return follow, fresh


def bench(name, port, streams, tokens):
    base = None
    print(f"{name}:")
    for n in streams:
        rate, first, total = load(port, n, tokens)
        base = base or rate
        print(f"  {n} stream{'s' if n > 1 else ' '}: {rate:7.1f} tok/s aggregate ({rate / base:4.2f}x one stream), "
              f"first token after {first * 1e3:6.0f} ms on average, {total} tokens", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--run", default="./run")
    p.add_argument("--streams", default="1,2,4,8")
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--parallel", type=int, default=8)
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--history", type=int, default=2000)
    p.add_argument("--gguf")
    p.add_argument("--flags", default="", help="more flags for run serve, e.g. '--dtype q8'")
    a = p.parse_args()
    streams = [int(s) for s in a.streams.split(",")]
    tmp = os.environ.get("TMPDIR", "/tmp")

    proc, port = start([a.run, "serve", a.model, "--port", "0", "--parallel", str(a.parallel), "-c", str(a.ctx),
                        *a.flags.split()], r"listening on http://[^:]+:(\d+)", os.path.join(tmp, "bench_serve_run.log"))
    try:
        bench(f"run serve {a.model} --parallel {a.parallel} -c {a.ctx} {a.flags}".strip(), port, streams, a.tokens)
        follow, fresh = cache_test(port, a.history)
        print(f"  first token of a follow-up turn in a ~{a.history}-token conversation: {follow * 1e3:.0f} ms; "
              f"of a fresh 16-token prompt: {fresh * 1e3:.0f} ms ({follow / fresh:.2f}x)")
    finally:
        proc.terminate()
        proc.wait()

    llama = os.environ.get("LLAMA_CPP")
    if llama and a.gguf:
        server = os.path.join(llama, "build", "bin", "llama-server")
        lport = 18080 + os.getpid() % 1000
        # llama-server's -c is shared by its slots: each gets ctx, as in run.
        lctx = a.ctx * a.parallel
        proc, _ = start([server, "-m", a.gguf, "--port", str(lport), "--parallel", str(a.parallel), "-c", str(lctx),
                         "-t", str(len(os.sched_getaffinity(0))), "--cont-batching"], lport, os.path.join(tmp, "bench_serve_llama.log"))
        try:
            bench(f"llama-server {a.gguf} --parallel {a.parallel} -c {lctx}", lport, streams, a.tokens)
            follow, fresh = cache_test(lport, a.history)
            print(f"  first token of a follow-up turn: {follow * 1e3:.0f} ms; of a fresh 16-token prompt: {fresh * 1e3:.0f} ms "
                  f"({follow / fresh:.2f}x)")
        finally:
            proc.terminate()
            proc.wait()
    elif llama or a.gguf:
        print("llama-server skipped: it needs both LLAMA_CPP and --gguf", file=sys.stderr)


if __name__ == "__main__":
    main()
