"""tests/test_serve_tools.py RUN TMP - `run serve`'s structured output, tool
calls, reasoning, logit_bias and penalties, end to end.

Started by tests/test_serve_tools.sh, which writes random-weight
checkpoints into TMP. The judges are independent of the server: JSON
validity by python's json, schemas by tests/schema_check.py (itself checked
against python3-jsonschema's verdicts on tests/data/schema_cases.json
first), prompts by the jinja2 renderings of
tests/data/templates/tools_golden.json, the bias and the penalties by
hand from the model's own log-probabilities. Random-weight models at
temperature 1 are the hardest case for a grammar: every reply that stops
must be valid. Prints "tests/test_serve_tools.sh: N passed, N failed" last.
python3 standard library only."""
import http.client
import json
import os
import re
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import schema_check  # noqa: E402

RUN, TMP = sys.argv[1:3]
check = harness.Checks("tests/test_serve_tools.sh")


class Server(harness.Server):
    """A `run serve` (see harness.Server) with a chat call, whose stop checks
    the log for sanitizer reports."""

    def __init__(self, name, model, *flags):
        super().__init__(RUN, TMP, name, model, *flags)

    def chat(self, **body):
        status, reply = self.post("/v1/chat/completions", body)
        if status != 200:
            print("unexpected", status, reply)
        return reply if status == 200 else None

    def stop(self):
        code = super().stop()
        check(self.sanitizer_clean(), f"{self.log}: no sanitizer report")
        return code


def stream_chunks(data):
    return [json.loads(line[6:]) for line in data.decode().split("\n") if line.startswith("data: {")]


def assemble(chunks):
    """The message a stream's deltas add up to, and its finish_reason."""
    content, reasoning, calls, finish = "", None, [], None
    for c in chunks:
        if not c["choices"]:
            continue
        choice = c["choices"][0]
        delta = choice["delta"]
        content += delta.get("content") or ""
        if "reasoning_content" in delta:
            reasoning = (reasoning or "") + delta["reasoning_content"]
        for t in delta.get("tool_calls", []):
            if "id" in t:
                calls.append({"id": t["id"], "name": t["function"]["name"], "arguments": t["function"]["arguments"]})
                ok = t["index"] == len(calls) - 1 and t["type"] == "function"
                check(ok, f"a streamed call starts with its index, id, type and name: {t}")
            else:
                calls[t["index"]]["arguments"] += t["function"]["arguments"]
        finish = choice["finish_reason"] or finish
    return {"content": content, "reasoning": reasoning, "calls": calls}, finish


def message_of(reply):
    m = reply["choices"][0]["message"]
    calls = [{"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in m.get("tool_calls") or []]
    return {"content": m["content"] or "", "reasoning": m.get("reasoning_content"), "calls": calls}


def in_parallel(server, bodies):
    """The replies to bodies, sent at once (the server batches its slots)."""
    replies = [None] * len(bodies)

    def one(i):
        replies[i] = server.chat(**bodies[i])
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return replies


USER = [{"role": "user", "content": "Answer in JSON, please."}]

# Schemas whose every sentence is short (bounded strings, arrays and
# numbers): a reply under them ends within the token limit.
SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                      "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                      "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "array", "items": {"type": "integer", "minimum": -5, "exclusiveMaximum": 5}, "minItems": 1, "maxItems": 4},
    {"anyOf": [{"type": "boolean"}, {"type": "null"}, {"type": "string", "pattern": "^[a-c]{2,4}$"}]},
    {"$defs": {"point": {"type": "object", "properties": {"x": {"type": "number", "minimum": -1, "maximum": 1},
                                                          "y": {"type": "integer", "minimum": 0, "maximum": 9}},
                         "required": ["x", "y"], "additionalProperties": False}},
     "type": "object", "properties": {"from": {"$ref": "#/$defs/point"}, "to": {"$ref": "#/$defs/point"}},
     "required": ["from", "to"], "additionalProperties": False},
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}, "day": {"type": "string", "format": "date"},
                                      "kind": {"const": "event"}}, "required": ["id", "day", "kind"],
     "additionalProperties": False},
    {"type": "string", "minLength": 2, "maxLength": 5},
    {"oneOf": [{"type": "integer", "minimum": 0, "maximum": 999}, {"type": "string", "maxLength": 3}]},
    {"type": "object", "properties": {"when": {"type": "string", "format": "time"}, "ok": {"type": "boolean"}},
     "required": ["when"], "additionalProperties": False},
]

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string", "maxLength": 12}},
                                       "required": ["tz"], "additionalProperties": False}}}
NOW = {"type": "function", "function": {"name": "now"}}
TOOLS = [WEATHER, TIME, NOW]


def parameters_of(name):
    for t in TOOLS:
        if t["function"]["name"] == name:
            # No parameters: OpenAI's empty parameter list, {} alone.
            return t["function"].get("parameters", {"type": "object", "additionalProperties": False})
    return None


def valid_calls(message, names=None):
    """Whether every call names a listed function (one of names) and its
    arguments are JSON that its parameters schema accepts; problems printed."""
    ok = True
    for c in message["calls"]:
        schema = parameters_of(c["name"])
        try:
            args = json.loads(c["arguments"])
            problems = schema_check.errors(args, schema) if schema else ["no such function"]
        except ValueError as e:
            problems = [f"not JSON: {e}"]
        if names and c["name"] not in names:
            problems.append("not the function asked for")
        if problems:
            print(f"  call {c['name']} {c['arguments']!r}: {problems}")
            ok = False
    ids = [c["id"] for c in message["calls"]]
    return ok and len(set(ids)) == len(ids) and all(re.fullmatch(r"call_[A-Za-z0-9]{24}", i) for i in ids)


def valid_json(text, schema):
    try:
        value = json.loads(text)
    except ValueError as e:
        print(f"  not JSON: {text!r}: {e}")
        return False
    problems = schema_check.errors(value, schema)
    if problems:
        print(f"  {text!r}: {problems}")
    return not problems


# ---------------------------------------------------------------------------

def test_validator():
    agree, differ = schema_check.self_check("tests/data/schema_cases.json")
    check(differ == 0 and agree > 3000, f"schema_check agrees with python's jsonschema on {agree} texts ({differ} differ)")


def test_schemas(s):
    """Each schema at temperature 1, four replies at once on four slots."""
    stopped = total = 0
    for k, schema in enumerate(SCHEMAS):
        bodies = [{"messages": USER, "temperature": 1, "seed": 100 * k + i, "max_tokens": 400,
                   "response_format": {"type": "json_schema", "json_schema": {"name": f"s{k}", "strict": True, "schema": schema}}}
                  for i in range(4)]
        for i, reply in enumerate(in_parallel(s, bodies)):
            total += 1
            if reply is None:
                check(False, f"schema {k}, seed {i}: a reply")
                continue
            finish, text = reply["choices"][0]["finish_reason"], reply["choices"][0]["message"]["content"]
            if finish == "stop":
                stopped += 1
                check(valid_json(text, schema), f"schema {k}, seed {i}: the reply is valid ({text[:200]!r})")
    check(stopped >= 0.95 * total, f"{stopped} of {total} replies under bounded schemas stopped within 400 tokens")

    # llama.cpp's "json_schema" field, and /v1/completions with response_format.
    body = {"messages": USER, "temperature": 1, "seed": 7, "max_tokens": 300, "json_schema": SCHEMAS[1]}
    reply = s.chat(**body)
    check(reply and reply["choices"][0]["finish_reason"] == "stop" and valid_json(reply["choices"][0]["message"]["content"], SCHEMAS[1]),
          "the json_schema field")
    status, reply = s.post("/v1/completions", {"prompt": "A list:", "temperature": 1, "seed": 8, "max_tokens": 300,
                                               "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMAS[0]}}})
    check(status == 200 and reply["choices"][0]["finish_reason"] == "stop" and valid_json(reply["choices"][0]["text"], SCHEMAS[0]),
          "a completion under response_format")

    # Streamed: the deltas add up to the same valid text as the whole reply.
    body = {"messages": USER, "temperature": 1, "seed": 11, "max_tokens": 400,
            "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMAS[3]}}}
    whole = s.chat(**body)
    status, data = s.post("/v1/chat/completions", {**body, "stream": True})
    message, finish = assemble(stream_chunks(data))
    check(status == 200 and whole and message["content"] == whole["choices"][0]["message"]["content"] and finish == "stop" and
          valid_json(message["content"], SCHEMAS[3]), "streamed under a schema: the same valid reply")


def test_json_object(s):
    bodies = [{"messages": USER, "temperature": 1, "seed": 50 + i, "max_tokens": 200, "response_format": {"type": "json_object"}}
              for i in range(4)]
    replies = in_parallel(s, bodies)
    check(all(r is not None for r in replies), "json_object: four replies, none an error")
    for i, r in enumerate(replies):
        if r and r["choices"][0]["finish_reason"] == "stop":
            text = r["choices"][0]["message"]["content"]
            try:
                check(isinstance(json.loads(text), dict), f"json_object {i}: a JSON object")
            except ValueError:
                check(False, f"json_object {i}: JSON ({text[:200]!r})")
    # With greedy decoding and a tiny limit too.
    reply = s.chat(messages=USER, temperature=0, max_tokens=3, response_format={"type": "json_object"})
    check(reply and reply["choices"][0]["finish_reason"] == "length", "json_object cut short: finish_reason length, no error")


def test_tools(s):
    # required: one call (parallel_tool_calls false) of a listed function, valid arguments.
    bodies = [{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "tools": TOOLS,
               "tool_choice": "required", "parallel_tool_calls": False, "temperature": 1, "seed": 200 + i, "max_tokens": 300}
              for i in range(4)]
    for i, r in enumerate(in_parallel(s, bodies)):
        m = r and message_of(r)
        check(r and r["choices"][0]["finish_reason"] == "tool_calls" and len(m["calls"]) == 1 and valid_calls(m) and
              r["choices"][0]["message"]["content"] is None, f"required, seed {i}: one valid call, content null ({m})")
    # required with parallel calls: every call valid when the reply ends by itself.
    r = s.chat(**{**bodies[0], "parallel_tool_calls": True, "max_tokens": 600})
    m = r and message_of(r)
    check(r and (r["choices"][0]["finish_reason"] == "length" or (len(m["calls"]) >= 1 and valid_calls(m))),
          f"required, parallel calls: valid ({m and len(m['calls'])} calls, {r and r['choices'][0]['finish_reason']})")
    # A named function.
    bodies = [{**bodies[0], "tool_choice": {"type": "function", "function": {"name": "get_time"}}, "seed": 300 + i} for i in range(4)]
    for i, r in enumerate(in_parallel(s, bodies)):
        m = r and message_of(r)
        check(r and r["choices"][0]["finish_reason"] == "tool_calls" and len(m["calls"]) == 1 and valid_calls(m, ["get_time"]),
              f"named get_time, seed {i}: its call, valid ({m})")
    # Streamed: the deltas (index, id, type and name, then arguments) add up to the whole reply's call.
    body = {**bodies[0], "tool_choice": "required", "seed": 31}
    whole = s.chat(**body)
    status, data = s.post("/v1/chat/completions", {**body, "stream": True})
    message, finish = assemble(stream_chunks(data))
    w = whole and message_of(whole)
    check(status == 200 and w and finish == "tool_calls" and
          [(c["name"], c["arguments"]) for c in message["calls"]] == [(c["name"], c["arguments"]) for c in w["calls"]] and
          valid_calls(message), f"streamed call: the same as the whole reply's ({message['calls']} vs {w and w['calls']})")
    # auto: free text until the model writes <tool_call> (made sure of by a logit bias), then a valid call.
    r = s.chat(messages=bodies[0]["messages"], tools=TOOLS, temperature=1, seed=41, max_tokens=300, parallel_tool_calls=False,
               logit_bias={"151657": 100})
    m = r and message_of(r)
    check(r and r["choices"][0]["finish_reason"] == "tool_calls" and len(m["calls"]) == 1 and valid_calls(m),
          f"auto, <tool_call> written: then a valid call ({m})")
    r = s.chat(messages=bodies[0]["messages"], tools=TOOLS, temperature=1, seed=42, max_tokens=40)
    m = r and message_of(r)
    check(r and (r["choices"][0]["finish_reason"] != "tool_calls" or valid_calls(m)), "auto, free text: no call, or valid ones")
    # none: the tools are in the prompt, no call is read.
    with_tools = s.chat(messages=bodies[0]["messages"], tools=TOOLS, tool_choice="none", max_tokens=1)
    without = s.chat(messages=bodies[0]["messages"], max_tokens=1)
    check(with_tools and without and with_tools["usage"]["prompt_tokens"] > without["usage"]["prompt_tokens"] + 50 and
          "tool_calls" not in with_tools["choices"][0]["message"], "tool_choice none: the tools in the prompt, no calls read")


def test_prompts(s):
    """The prompt of each request of tools_golden.json (Qwen2.5's template)
    has the tokens of jinja2's text."""
    golden = json.load(open("tests/data/templates/tools_golden.json", encoding="utf-8"))
    n = 0
    for c in golden["cases"]:
        if c["template_file"] != "qwen2.5.jinja" or "output" not in c:
            continue
        body = json.loads(c["body"])
        reply = s.chat(**body, max_tokens=0)
        status, tokens = s.post("/tokenize", {"content": c["output"]})
        n += 1
        check(reply and status == 200 and reply["usage"]["prompt_tokens"] == len(tokens["tokens"]),
              f"{c['name']}: the prompt is jinja2's text ({reply and reply['usage']['prompt_tokens']} tokens, "
              f"want {len(tokens['tokens'])})")
    check(n >= 5, f"{n} golden prompts")


def test_bias_and_penalties(s):
    """logit_bias and the penalties, predicted by hand from the model's own
    log-probabilities (which are those of its raw logits)."""
    ask = [{"role": "user", "content": "Say something."}]
    r = s.chat(messages=ask, temperature=0, max_tokens=1, logprobs=True, top_logprobs=5)
    top = r["choices"][0]["logprobs"]["content"][0]["top_logprobs"]

    def token_id(entry):
        status, got = s.post("/tokenize", {"content": entry["token"]})
        return got["tokens"][0] if status == 200 and len(got["tokens"]) == 1 else None
    a, c = top[0], next((t for t in top[2:] if token_id(t) is not None), None)
    if c is None:
        check(False, "a top token that is one token on its own")
        return
    gap = a["logprob"] - c["logprob"]  # the logit gap between the first and this one
    for extra, want in ((0.05, c), (-0.05, a)):
        bias = {str(token_id(c)): gap + extra}
        r = s.chat(messages=ask, temperature=0, max_tokens=1, logprobs=True, logit_bias=bias)
        got = r["choices"][0]["logprobs"]["content"][0]["token"]
        check(got == want["token"], f"logit_bias {gap + extra:.3f} on {c['token']!r} (gap {gap:.3f}): {got!r}, want {want['token']!r}")
    r = s.chat(messages=ask, temperature=0, max_tokens=1, logprobs=True, logit_bias={str(token_id(c)): 100})
    check(r["choices"][0]["logprobs"]["content"][0]["token"] == c["token"], "logit_bias 100: that token")

    # Greedy with penalties over 16 steps: each step's choice is the best of
    # the raw top 20 once each token generated before lost count * frequency
    # + presence (OpenAI's rule: generated tokens only).
    for frequency, presence in ((1.5, 0.5), (0.0, 2.0), (0.7, 0.0)):
        r = s.chat(messages=ask, temperature=0, max_tokens=16, logprobs=True, top_logprobs=20,
                   frequency_penalty=frequency, presence_penalty=presence)
        steps = r["choices"][0]["logprobs"]["content"]
        seen, checked, wrong = [], 0, 0
        for step in steps:
            scored = []
            for t in step["top_logprobs"]:
                n = seen.count(tuple(t["bytes"]))
                scored.append((t["logprob"] - n * frequency - (n > 0) * presence, t["bytes"]))
            scored.sort(key=lambda x: -x[0])
            if scored[0][0] - scored[1][0] > 1e-3:
                checked += 1
                wrong += scored[0][1] != step["bytes"]
            seen.append(tuple(step["bytes"]))
        check(wrong == 0 and checked >= 10,
              f"frequency {frequency}, presence {presence}: {checked} steps as predicted by hand, {wrong} not")


def test_refusals(s):
    for body, want in (
        ({"messages": USER, "foo": 1}, "'foo' is not supported"),
        ({"messages": USER, "logit_bias": {"999999": 1}}, "'logit_bias' token 999999 is not below the vocabulary size"),
        ({"messages": USER, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string",
                                                                                                                "format": "email"}}}},
         "schema at /: format 'email'"),
        ({"messages": USER, "grammar": "root ::= x"}, "'grammar': "),
        ({"messages": USER, "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "does not list"),
    ):
        status, reply = s.post("/v1/chat/completions", body)
        check(status == 400 and want in reply["error"]["message"], f"{json.dumps(body)[:80]}: 400 '{want}' ({reply})")


def test_grammar_bounds(s):
    """A reply whose parse outgrows the grammar's bounds (here its depth:
    each "a" opens a level, a logit bias writes "a" after "a") is cut short:
    finish_reason length, never stop, well before the token limit."""
    r = s.chat(messages=USER, grammar='root ::= "a" root "b" | "c"', logit_bias={"64": 100}, max_tokens=3500)
    check(r and r["choices"][0]["finish_reason"] == "length" and r["usage"]["completion_tokens"] < 3000,
          f"a grammar past its depth: finish_reason length ({r and r['usage']})")


def test_reasoning(s):
    """Qwen3: the <think> part of a reply is reasoning_content (a grammar
    writes the reply, so that it is known)."""
    gbnf = 'root ::= "<think>\\nFirst, the sky.\\nThen the sea.\\n</think>\\n\\nBlue." '
    body = {"messages": [{"role": "user", "content": "Colour?"}], "grammar": gbnf, "max_tokens": 60, "temperature": 1, "seed": 3}
    r = s.chat(**body)
    m = r and r["choices"][0]["message"]
    check(m and m["reasoning_content"] == "First, the sky.\nThen the sea." and m["content"] == "Blue.",
          f"reasoning_content and content ({m})")
    status, data = s.post("/v1/chat/completions", {**body, "stream": True})
    message, finish = assemble(stream_chunks(data))
    check(message["reasoning"] == "First, the sky.\nThen the sea." and message["content"] == "Blue." and finish == "stop",
          f"streamed: delta.reasoning_content, then delta.content ({message})")
    r = s.chat(**body, reasoning_format="none")
    check(r and r["choices"][0]["message"]["content"] == "<think>\nFirst, the sky.\nThen the sea.\n</think>\n\nBlue." and
          "reasoning_content" not in r["choices"][0]["message"], "reasoning_format none: inline")
    # Thinking switched off: calls and schemas from the first token.
    off = {"enable_thinking": False}
    bodies = [{"messages": [{"role": "user", "content": "Weather?"}], "tools": TOOLS, "tool_choice": "required",
               "parallel_tool_calls": False, "temperature": 1, "seed": 60 + i, "max_tokens": 300, "chat_template_kwargs": off}
              for i in range(2)]
    for i, r in enumerate(in_parallel(s, bodies)):
        m = r and message_of(r)
        check(r and r["choices"][0]["finish_reason"] == "tool_calls" and len(m["calls"]) == 1 and valid_calls(m),
              f"qwen3, required, seed {i}: a valid call ({m})")
    r = s.chat(messages=USER, temperature=1, seed=9, max_tokens=400, chat_template_kwargs=off,
               response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMAS[0]}})
    check(r and r["choices"][0]["finish_reason"] == "stop" and valid_json(r["choices"][0]["message"]["content"], SCHEMAS[0]),
          "qwen3, json_schema: valid")


def test_llama(s):
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    c.request("GET", "/props")
    props = json.loads(c.getresponse().read())
    check(props["chat_template"]["tool_call_syntax"] == "llama3", f"a Llama-3.1-style template: JSON calls ({props['chat_template']})")
    body = {"messages": [{"role": "user", "content": "Weather in Lima?"}], "tools": TOOLS, "tool_choice": "required",
            "parallel_tool_calls": False, "temperature": 1, "max_tokens": 300,
            "chat_template_kwargs": {"date_string": "26 Jul 2024"}}
    for i in range(3):
        r = s.chat(**body, seed=70 + i)
        m = r and message_of(r)
        check(r and r["choices"][0]["finish_reason"] == "tool_calls" and len(m["calls"]) == 1 and valid_calls(m),
              f"llama, required, seed {i}: a valid call ({m}, {r and r['choices'][0]['finish_reason']}, {r and r['usage']})")
    status, data = s.post("/v1/chat/completions", {**body, "seed": 80, "stream": True})
    message, finish = assemble(stream_chunks(data))
    check(finish == "tool_calls" and len(message["calls"]) == 1 and valid_calls(message), f"llama, streamed: a valid call ({message})")
    r = s.chat(messages=USER, temperature=1, seed=9, max_tokens=300,
               response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMAS[1]}})
    check(r and r["choices"][0]["finish_reason"] == "stop" and valid_json(r["choices"][0]["message"]["content"], SCHEMAS[1]),
          "llama, json_schema: valid")


def test_no_tools_template(s):
    status, reply = s.post("/v1/chat/completions", {"messages": USER, "tools": TOOLS})
    check(status == 400 and "does not show tools" in reply["error"]["message"], f"tools for a template without them: 400 ({reply})")
    r = s.chat(messages=USER, tools=TOOLS, tool_choice="none", max_tokens=2)
    check(r is not None, "... but tool_choice none is fine")


test_validator()
qwen2 = Server("qwen2", os.path.join(TMP, "qwen2"), "--parallel", "4", "-c", "4096")
test_schemas(qwen2)
test_json_object(qwen2)
test_tools(qwen2)
test_prompts(qwen2)
test_bias_and_penalties(qwen2)
test_refusals(qwen2)
test_grammar_bounds(qwen2)
qwen2.stop()
qwen3 = Server("qwen3", os.path.join(TMP, "qwen3"), "--parallel", "2", "-c", "1024")
test_reasoning(qwen3)
qwen3.stop()
llama = Server("llama", os.path.join(TMP, "llama"), "-c", "4096")
test_llama(llama)
llama.stop()
plain = Server("plain", os.path.join(TMP, "plain"), "-c", "512")
test_no_tools_template(plain)
plain.stop()
check.finish()
