#!/usr/bin/python3
"""scripts/make_tools_golden.py - what chat templates render for OpenAI chat
requests with tools, tool calls and tool results, made by Python's jinja2
set up as transformers sets it up, for tests/test_chat.c.

    /usr/bin/python3 scripts/make_tools_golden.py
        writes tests/data/templates/tools_golden.json

Each case is a request body (as a client sends it to /v1/chat/completions,
JSON text in "body") and a template of tests/data/templates (with the
special tokens of its tokenizer_config.json in "tokens"); its "output" (or "error") is what
jinja2 renders for the variables transformers' apply_chat_template(messages,
tools=tools, add_generation_prompt=True, **chat_template_kwargs) passes,
with the messages made from the request as vLLM and llama-server make them:
"developer" is "system", a list of text parts is joined, an assistant's
null content is "", and each tool call's "arguments" (JSON text in the API)
is parsed into the object it holds. Needs Debian's python3-jinja2 (see
scripts/make_template_golden.py, whose environment this uses).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_template_golden as golden  # noqa: E402 (the jinja2 environment transformers uses)

WEATHER = golden.WEATHER_TOOL
TIME = golden.TIME_TOOL
NESTED = {
    "type": "function",
    "function": {
        "name": "book",
        "description": "Books a table — «quoted» names welcome",
        "parameters": {
            "type": "object",
            "properties": {
                "guests": {"type": "integer", "minimum": 1, "maximum": 12},
                "when": {"type": "object", "properties": {"day": {"type": "string", "format": "date"},
                                                          "hour": {"type": "integer"}}},
                "notes": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["guests"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}

REQUESTS = {
    "tools_first_turn": {
        "messages": [{"role": "system", "content": "Use tools when they help."},
                     {"role": "user", "content": "Weather in Zürich, and the time in Tokyo?"}],
        "tools": [WEATHER, TIME],
    },
    "tools_developer_parts": {
        "messages": [{"role": "developer", "content": [{"type": "text", "text": "Be brief. "}, {"type": "text", "text": "Use tools."}]},
                     {"role": "user", "content": [{"type": "text", "text": "Book for 4 tomorrow at 19."}]}],
        "tools": [NESTED],
        "tool_choice": "required",
    },
    "tool_history": {
        "messages": [
            {"role": "user", "content": "Weather in Paris and the time in Tokyo?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_a1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}},
                {"id": "call_b2", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"Asia/Tokyo\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_a1", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
            {"role": "tool", "tool_call_id": "call_b2", "name": "get_time", "content": "23:05"},
            {"role": "assistant", "content": "It is 21.5 °C in Paris; 23:05 in Tokyo."},
            {"role": "user", "content": "Thanks!"},
        ],
        "tools": [WEATHER, TIME],
    },
    "tool_history_one_call": {
        "messages": [
            {"role": "system", "content": "You call tools."},
            {"role": "user", "content": "Book a table."},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_c3", "type": "function", "function": {
                    "name": "book", "arguments": "{\"guests\": 4, \"when\": {\"day\": \"2025-01-02\", \"hour\": 19}, "
                                                 "\"notes\": [\"window\", \"naïve «x»\"]}"}}]},
            {"role": "tool", "tool_call_id": "call_c3", "content": [{"type": "text", "text": "booked"}]},
        ],
        "tools": [NESTED],
        "chat_template_kwargs": {"date_string": "01 Jan 2025"},
    },
    "tool_history_without_tools": {
        "messages": [
            {"role": "user", "content": "Lima?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call_d4", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Lima\"}"}}]},
            {"role": "tool", "tool_call_id": "call_d4", "content": "cloudy"},
        ],
        "chat_template_kwargs": {"date_string": "01 Jan 2025"},
    },
    "tool_steps_thinking": {
        "messages": [
            {"role": "user", "content": "Warmer in Oslo or Rome?"},
            {"role": "assistant", "content": "Let me check Oslo.", "reasoning_content": "Oslo first.",
             "tool_calls": [{"id": "call_e5", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "call_e5", "content": "{\"temperature\": 4}"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "call_f6", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
            {"role": "tool", "tool_call_id": "call_f6", "content": "{\"temperature\": 19}"},
        ],
        "tools": [WEATHER],
        "chat_template_kwargs": {"enable_thinking": False},
    },
}

# tools_dated.jinja would print today's date (strftime_now) without one.
for _request in REQUESTS.values():
    _request.setdefault("chat_template_kwargs", {}).setdefault("date_string", "26 Jul 2024")

TOKENS_QWEN = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
TOKENS_OWN = {"bos_token": "<s>", "eos_token": "</s>"}
TEMPLATES = {
    "qwen2.5.jinja": TOKENS_QWEN,
    "qwen3.jinja": TOKENS_QWEN,
    "tools_dated.jinja": TOKENS_OWN,
    "reasoning_like.jinja": TOKENS_OWN,
    "llama3_like.jinja": {"bos_token": "<|bos|>", "eos_token": "<|turn_end|>"},
}


def template_messages(request):
    """The request's messages as the template sees them (vLLM's way)."""
    out = []
    for m in request["messages"]:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(part["text"] for part in content)
        message = {"role": "system" if m["role"] == "developer" else m["role"], "content": content or ""}
        if "name" in m:
            message["name"] = m["name"]
        if "tool_calls" in m:
            message["tool_calls"] = [{"id": c["id"], "type": "function",
                                      "function": {"name": c["function"]["name"],
                                                   "arguments": json.loads(c["function"]["arguments"])}}
                                     for c in m["tool_calls"]]
        if "tool_call_id" in m:
            message["tool_call_id"] = m["tool_call_id"]
        if "reasoning_content" in m:
            message["reasoning_content"] = m["reasoning_content"]
        out.append(message)
    return out


def main():
    cases = []
    for template, tokens in TEMPLATES.items():
        text = golden.read_template(template)
        for name, request in REQUESTS.items():
            variables = {"messages": template_messages(request), "tools": request.get("tools"), "documents": None,
                         "add_generation_prompt": True, **tokens, **request.get("chat_template_kwargs", {})}
            case = {"name": f"{template} {name}", "template_file": template, "tokens": tokens,
                    "body": json.dumps(request, ensure_ascii=False)}
            case.update(golden.render(text, variables))
            cases.append(case)
    path = os.path.join(golden.DATA, "tools_golden.json")
    golden.write_json(path, {"jinja2": golden.jinja2.__version__, "cases": cases})
    errors = sum("error" in c for c in cases)
    print(f"{len(cases)} cases ({errors} errors) written to tests/data/templates/tools_golden.json")


if __name__ == "__main__":
    main()
