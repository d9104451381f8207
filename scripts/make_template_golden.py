#!/usr/bin/python3
"""scripts/make_template_golden.py - golden renderings of chat templates, made
by Python's jinja2 set up as Hugging Face transformers sets it up, for
tests/test_template.c.

    /usr/bin/python3 scripts/make_template_golden.py
        writes tests/data/templates/conversations/*.json and
        tests/data/templates/golden.json
    /usr/bin/python3 scripts/make_template_golden.py --import-qwen DIR
        first copies the chat templates of DIR/qwen2.5-tokenizer and
        DIR/qwen3-tokenizer (tokenizer_config.json) into tests/data/templates
    /usr/bin/python3 scripts/make_template_golden.py --check CONFIG DRIVER
        renders the chat template of tokenizer_config.json CONFIG with every
        conversation and option, with jinja2 and with the C program DRIVER
        (build/render_template), and compares them (for templates that may
        not be committed, such as Llama 3's: see scripts/check_templates.sh)
    /usr/bin/python3 scripts/make_template_golden.py --random SEED COUNT DRIVER
        renders COUNT random templates (statements, expressions, filters,
        tests and whitespace control, made from SEED) with jinja2 and DRIVER
        and prints where they differ: a search for differences, not a test

Needs /usr/bin/python3 with Debian's python3-jinja2 (3.1.2), the version the
golden files were made with.

transformers (chat_template_utils.py) renders with an
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
loopcontrols extension and its own {% generation %} tag; it replaces the
tojson filter by json.dumps(x, ensure_ascii=False, indent=indent,
separators=separators, sort_keys=sort_keys) and adds the globals
raise_exception (raises TemplateError) and strftime_now (datetime.now()
formatted). Here strftime_now formats the fixed time NOW, which the C test
passes to template_render too.

golden.json holds {"now": ..., "default_vars": {...}, "cases": [...]}; a case
names its template (template_file, in tests/data/templates, or the text
itself), its variables (those of conversations/NAME.json with "kwargs" on
top and the "without" ones taken away, or "vars": "default") and what jinja2 gave: "output", or "error" with
the template line (null when jinja2 gives none), jinja2's exception type and
its message.
"""
import argparse
import copy
import datetime
import json
import os
import subprocess
import sys
import tempfile
import traceback
import warnings

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "templates")
NOW = datetime.datetime(2024, 7, 26, 14, 5, 9)
NOW_TEXT = NOW.strftime("%Y-%m-%d %H:%M:%S")


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: renders its body (transformers
    also records where that text is, which rendering alone does not need)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def make_environment():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return env


ENV = make_environment()
# Python warns about compiled templates such as `true[1:]`; they are meant.
warnings.filterwarnings("ignore", category=SyntaxWarning)


def error_line(e):
    """The template line jinja2 blames: a syntax error's, or the last
    template frame of the traceback (None for Python's own SyntaxError)."""
    if isinstance(e, jinja2.exceptions.TemplateSyntaxError):
        return e.lineno
    line = None
    for frame in traceback.extract_tb(e.__traceback__):
        if frame.filename == "<template>":
            line = frame.lineno
    return line


def render(text, variables):
    """{"output": ...} or {"error": {"line", "type", "message"}}."""
    try:
        # A copy: a template can change what it is given (list.pop is allowed,
        # and the indent filter appends to a list with +=).
        return {"output": ENV.from_string(text).render(**copy.deepcopy(variables))}
    except Exception as e:  # every failure of a template is an expected result here
        return {"error": {"line": error_line(e), "type": type(e).__name__, "message": str(e)}}


# ---------------------------------------------------------------------------
# Conversations

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city, in °C",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. \"Zürich\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The time now, in a time zone",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": []},
    },
}


def many_turns(n):
    """A system message and n user/assistant exchanges, with text that
    varies (numbers, some Unicode, some long lines) from turn to turn."""
    words = ["alpha", "beta", "gamma", "δέλτα", "эпсилон", "ζήτα", "日本語", "😀", "naïve", "café"]
    messages = [{"role": "system", "content": "You answer briefly.\nAlways in English."}]
    for i in range(n):
        q = " ".join(words[(i * 7 + k) % len(words)] for k in range(1 + i % 5))
        messages.append({"role": "user", "content": f"Question {i}: what about {q}?"})
        answer = f"Answer {i}: " + ", ".join(words[(i + k) % len(words)] for k in range(1 + (i * 3) % 7))
        if i % 9 == 4:
            answer += "\n\n" + "A longer paragraph. " * 12
        messages.append({"role": "assistant", "content": answer})
    messages.append({"role": "user", "content": "Thanks! One more: 2 + 2?"})
    return messages


CONVERSATIONS = {
    "single_user": {"messages": [{"role": "user", "content": "Hello!"}]},
    "basic": {
        "messages": [
            {"role": "user", "content": "Hi, who are you?"},
            {"role": "assistant", "content": "I am an assistant. How can I help?"},
            {"role": "user", "content": "Tell me a joke."},
        ]
    },
    "system": {
        "messages": [
            {"role": "system", "content": "You are a pirate. Speak like one."},
            {"role": "user", "content": "Where is the treasure?"},
            {"role": "assistant", "content": "Arr, buried on the island!"},
            {"role": "user", "content": "Which island?"},
        ]
    },
    "assistant_last": {
        "messages": [
            {"role": "system", "content": "Complete the user's sentence."},
            {"role": "user", "content": "The quick brown fox"},
            {"role": "assistant", "content": "jumps over the lazy dog."},
        ]
    },
    "many_turns": {"messages": many_turns(50)},
    "unicode": {
        "messages": [
            {"role": "system", "content": "Réponds en français. 日本語も大丈夫。"},
            {"role": "user", "content": "Ça va? 🤖👍🏽 — «guillemets» Ελληνικά Русский עברית العربية"},
            {"role": "assistant", "content": "Très bien!\u200b Zero-width space, e\u0301 combining, \u2028line sep, \ttab."},
            {"role": "user", "content": "Quotes ' \" and backslash \\ and braces {{ not_a_var }} {% if %} {# no #}"},
        ]
    },
    "empty": {
        "messages": [
            {"role": "system", "content": ""},
            {"role": "user", "content": "   "},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "\n\nline\n\n"},
        ]
    },
    "thinking": {
        "messages": [
            {"role": "user", "content": "What is 2 + 2?"},
            {"role": "assistant", "content": "<think>\nTwo plus two.\nThat is four.\n</think>\n\n2 + 2 = 4."},
            {"role": "user", "content": "And 3 + 3?"},
            {"role": "assistant", "content": "3 + 3 = 6.", "reasoning_content": "\nThree and three make six.\n"},
            {"role": "user", "content": "And 4 + 4?"},
            {"role": "assistant", "content": "<think>Eight.</think>4 + 4 = 8.", "reasoning_content": None},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "thinking_last": {
        "messages": [
            {"role": "system", "content": "Think first."},
            {"role": "user", "content": "Is 91 prime?"},
            {"role": "assistant", "content": "<think>\n91 = 7 * 13.\n</think>\n\nNo: 91 = 7 × 13."},
        ]
    },
    "tools": {
        "tools": [WEATHER_TOOL, TIME_TOOL],
        "messages": [
            {"role": "system", "content": "Use the tools when they help."},
            {"role": "user", "content": "What is the weather in Paris and the time in Tokyo?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}},
                    {"type": "function", "function": {"name": "get_time", "arguments": "{\"tz\": \"Asia/Tokyo\"}"}},
                ],
            },
            {"role": "tool", "name": "get_weather", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
            {"role": "tool", "name": "get_time", "content": "23:05"},
            {"role": "assistant", "content": "It is 21.5 °C and clear in Paris; in Tokyo it is 23:05."},
            {"role": "user", "content": "Thanks!"},
        ],
    },
    "tool_steps": {
        "tools": [WEATHER_TOOL],
        "messages": [
            {"role": "user", "content": "Is it warmer in Oslo or in Rome?"},
            {
                "role": "assistant",
                "content": "<think>\nCheck Oslo first.\n</think>\n\nLet me check Oslo.",
                "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}],
            },
            {"role": "tool", "content": "{\"temperature\": 4}"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}],
            },
            {"role": "tool", "content": "{\"temperature\": 19}"},
            {"role": "user", "content": "<tool_response>\nextra data\n</tool_response>"},
        ],
    },
    "tool_call_plain": {
        "tools": [WEATHER_TOOL],
        "messages": [
            {"role": "user", "content": "Weather in Lima?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Lima"}}]},
            {"role": "tool", "content": "cloudy"},
        ],
    },
    "roles_broken": {
        "messages": [
            {"role": "user", "content": "One"},
            {"role": "user", "content": "Two in a row"},
        ]
    },
}

# Each template, with the special tokens transformers passes for it and the
# conversations and options it is rendered with. "tools" runs each
# conversation that has tools both with them and without (absent, and None
# as transformers passes when no tools are given).
TOKENS_QWEN = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
TOKENS_OWN = {"bos_token": "<s>", "eos_token": "</s>"}
ALL = list(CONVERSATIONS)
TEMPLATES = {
    "qwen2.5.jinja": {"tokens": TOKENS_QWEN, "conversations": ALL},
    "qwen3.jinja": {"tokens": TOKENS_QWEN, "conversations": ALL, "thinking": True},
    "llama3_like.jinja": {"tokens": {"bos_token": "<|bos|>", "eos_token": "<|turn_end|>"}, "conversations": ALL},
    "reasoning_like.jinja": {"tokens": TOKENS_OWN, "conversations": ALL},
    "small_chatml.jinja": {"tokens": TOKENS_OWN, "conversations": ALL},
    "newline_style.jinja": {"tokens": TOKENS_OWN, "conversations": ALL},
    "tools_dated.jinja": {"tokens": TOKENS_OWN, "conversations": ALL, "dated": True},
    "alternating.jinja": {"tokens": TOKENS_OWN, "conversations": ALL},
    "model_turns.jinja": {"tokens": TOKENS_OWN, "conversations": ALL},
    "generation_marks.jinja": {"tokens": TOKENS_OWN, "conversations": ALL},
}


def template_options(spec, conversation):
    """The kwargs each conversation is rendered with for one template."""
    has_tools = "tools" in CONVERSATIONS[conversation]
    options = [{"add_generation_prompt": True}, {"add_generation_prompt": False}]
    if conversation == "many_turns":
        return [{"add_generation_prompt": True}]  # long: once is enough
    if spec.get("thinking"):
        options += [{"add_generation_prompt": True, "enable_thinking": False},
                    {"add_generation_prompt": True, "enable_thinking": True}]
    if has_tools:  # "absent": the conversation's tools taken away
        options += [{"add_generation_prompt": True, "tools": None}, {"add_generation_prompt": True, "tools": "absent"}]
    else:
        options += [{"add_generation_prompt": True, "tools": None}]
    if spec.get("dated"):
        options += [{"add_generation_prompt": True, "date_string": "01 Jan 2025", "tools_in_user_message": False}]
    return options


def conversation_vars(conversation, kwargs):
    variables = dict(CONVERSATIONS[conversation])
    for key, value in kwargs.items():
        if value == "absent":
            variables.pop(key, None)
        else:
            variables[key] = value
    return variables


# ---------------------------------------------------------------------------
# Hand-written templates, one construct (or a few) each. They run with
# these variables unless a case gives its own.

DEFAULT_VARS = {
    "messages": [
        {"role": "system", "content": "Sys"},
        {"role": "user", "content": "Hi é"},
        {"role": "assistant", "content": "Hello"},
    ],
    "add_generation_prompt": True,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "x": None,
    "n": 3,
    "f": 1.5,
    "s": "text",
    "l": [1, 2, 3],
    "d": {"a": 1, "b": [1, 2]},
    "big": 9007199254740993,
    "nested": {"k": [{"v": "deep"}]},
}

CONSTRUCTS = [
    # text and whitespace control (trim_blocks, lstrip_blocks, -, +)
    ("lstrip_trim", "a\n  {% if true %}\n    b\n  {% endif %}\nc"),
    ("minus_both_sides", "a  {%- if true -%}  b  {%- endif -%}  c"),
    ("plus_keeps", "  {%+ if true %}x{% endif +%}\ny"),
    ("comments", "{# comment #}\n  {# indented comment #}\nx {#- strip -#} y"),
    ("raw", "{% raw %}{{ not evaluated }}{% endraw %}\n  {% raw -%}  a  {%- endraw %}"),
    ("print_lines", "line1\n{{ 'v' }}\n  {{ 'w' }}\n{%- for i in [1,2] %}\n  item{{ i }}\n{% endfor %}\nend"),
    ("minus_loop", "{% for i in [1,2] -%}\n  {{ i }}\n{%- endfor %}"),
    ("trailing_newlines", "{% if true %}\n{% endif %}\n\n\ntrailing\n\n\n"),
    ("variable_minus", "{{- ' a ' -}}\n   {{ 'b' }}   "),
    ("tab_indent", "\t{% if true %}tab{% endif %}"),
    ("crlf", "a\r\n{% if true %}\r\n  b\r\n{% endif %}\r\nc\r\n"),
    ("set_lines", "x\n{% set a = 1 %}\n{{ a }}"),
    ("macro_whitespace", "{%- macro m(x) -%}\n  [{{ x }}]\n{%- endmacro -%}\n{{ m(1) }} {{ m('two') }}"),
    ("unicode_space_strip", "a\u3000{%- if true %}b{% endif %}\u00a0\n  {%- if true %}c{% endif %}"),
    # literals
    ("string_literals", "{{ \"a\" \"b\" 'c' }}|{{ 'it''s' }}|{{ '\\x41\\u00e9\\n\\'\\\"\\\\ \\q \\101' }}|{{ '\\é' }}"),
    ("numbers", "{{ 1_000 }}|{{ 0x1f }}|{{ 0b11 }}|{{ 0o17 }}|{{ 1.5e3 }}|{{ 1e3 }}|{{ 1_0.5 }}|{{ 1.0 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 0.0001 }}|{{ 0.00001 }}"),
    ("constants", "{{ true }}|{{ True }}|{{ false }}|{{ none }}|{{ None }}|{{ -0.0 }}|{{ 0.1 + 0.2 }}|{{ 1/3 }}|{{ 123456789.0 }}|{{ 1.5e-10 }}|{{ 1e22 }}"),
    ("containers", "{{ [1, [2, [3]]] }}|{{ {'a': {'b': None}} }}|{{ (1,) }}|{{ ('a', 1.0) }}|{{ () }}|{{ [true, false, none] }}|{{ [] }}|{{ {} }}"),
    ("string_repr", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', '\\n', '\\t', '\\\\', 'é', '\\xa0', '\\x00', '\\u200b', '😀'] }}"),
    ("dict_keys", "{{ {1: 'a', none: 2, true: 3, 1.5: 4} }}|{{ {'x': 1, 'x': 2} }}"),
    # arithmetic and operators
    ("arithmetic", "{{ 1 + 2 * 3 - 4 / 2 }}|{{ (1 + 2) * 3 }}|{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}|{{ 10 // 3 }}|{{ -10 // 3 }}|{{ 10 % 3 }}|{{ -10 % 3 }}|{{ 7 % -3 }}|{{ 7 / 2 }}|{{ 2 ** -1 }}|{{ 5.5 // 2 }}|{{ -5.5 % 2 }}|{{ -7.5 % 2 }}|{{ 2 ** 0.5 }}"),
    ("sequence_ops", "{{ [1] + [2] }}|{{ (1,) + (2,) }}|{{ 'ab' * 2 }}|{{ 2 * 'ab' }}|{{ [0] * 3 }}|{{ true + 1 }}|{{ 'x' * 0 }}|{{ [1] * -1 }}"),
    ("concat", "{{ 'a' ~ 'b' ~ 3 }}|{{ 2 * 3 ~ 4 }}|{{ 'x' * 3 ~ '!' }}|{{ 'a' ~ 1 ~ 1.0 ~ none ~ true ~ [1] ~ x ~ undefined_var }}"),
    ("logic", "{{ not true }}|{{ not 0 }}|{{ true and false }}|{{ 1 or 2 }}|{{ 0 and 1 }}|{{ none or 'd' }}|{{ not (1 == 1) }}|{{ [] or none }}|{{ 1 and [] }}|{{ x and 1 }}|{{ 0 or 'y' }}"),
    ("comparisons", "{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 1 == 1.0 != 2 }}|{{ 'a' < 'b' }}|{{ 'B' < 'a' }}|{{ 'é' > 'z' }}|{{ [1, 2] < [1, 3] }}|{{ (1, 2) == [1, 2] }}|{{ {'a': 1} == {'a': 1.0} }}|{{ 1 == true }}|{{ 2 == true }}|{{ none == false }}|{{ 'a' == x }}|{{ undefined_a == undefined_b }}|{{ big == big + 0.0 }}"),
    ("membership", "{{ 'ab' in 'cabd' }}|{{ 'z' not in 'abc' }}|{{ 2 in [1,2] }}|{{ 'k' in {'k': 1} }}|{{ 3 not in (1, 2) }}|{{ '' in 'abc' }}|{{ 'x' in undefined_var }}|{{ 1 in d.values() }}"),
    ("conditional_expr", "{{ 'abc' if true }}|{{ 'abc' if false }}|{{ 'a' if false else 'b' }}|{{ 1 if x is defined else 2 }}|{{ 'y' if n > 2 else 'n' if n > 1 else 'z' }}"),
    # variables, attributes, items, slices
    ("attributes_items", "{{ messages[0].role }}|{{ messages[0]['content'] }}|{{ messages[-1].content }}|{{ messages|length }}|{{ messages[1:]|length }}|{{ messages[::-1][0].role }}|{{ messages[5] is defined }}|{{ nested.k[0].v }}|{{ nested['k'].0['v'] }}|{{ d.b.1 }}"),
    ("dict_methods", "{{ d.a }}|{{ d['b'][1] }}|{{ d.get('a') }}|{{ d.get('zz', 'no') }}|{{ d.get('zz') }}|{{ d.missing is defined }}|{{ d.items() }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d['items'] is defined }}|{{ d.copy() }}"),
    ("slices", "{{ [1,2,3][::-1] }}|{{ 'hello'[1:3] }}|{{ 'hello'[-1] }}|{{ [1,2,3][-5:] }}|{{ 'hello'[::2] }}|{{ [1,2,3][5:1:-1] }}|{{ 'héllo'[1] }}|{{ 'héllo'[::-1] }}|{{ 'héllo'[1:4] }}|{{ (1,2,3)[1:] }}|{{ 'abc'[5] }}|{{ [1][3] is defined }}|{{ l[1.5] is defined }}"),
    ("undefined_printing", "[{{ undefined_var }}]|{{ undefined_var is defined }}|{{ undefined_var is undefined }}|{{ d.nothing }}|{{ none.foo }}|{{ {'a': undefined_var} }}|{{ undefined_var|length }}|{{ undefined_var|list }}|{% for i in undefined_var %}never{% endfor %}"),
    ("none_tests", "{{ x }}|{{ x is none }}|{{ x is not none }}|{{ x|default('dflt') }}|{{ x|default('dflt', true) }}|{{ undefined_thing|default('u') }}|{{ undefined_thing|d('v') }}|{{ ''|default('e') }}|{{ ''|default('e', true) }}"),
    # tests
    ("is_tests", "{{ x is defined }}|{{ none is none }}|{{ 1 is number }}|{{ true is number }}|{{ 'a' is string }}|{{ {} is mapping }}|{{ [] is sequence }}|{{ 'a' is sequence }}|{{ {} is sequence }}|{{ 3 is odd }}|{{ 4 is even }}|{{ true is boolean }}|{{ 1 is true }}|{{ true is true }}|{{ false is false }}|{{ undefined_v is iterable }}|{{ 'a' is iterable }}|{{ 1 is iterable }}|{{ 1.0 is integer }}|{{ 1.0 is float }}|{{ 6 is divisibleby 3 }}|{{ 'A' is upper }}|{{ 'a' is lower }}|{{ 1 is eq 1 }}|{{ 2 is gt 1 }}|{{ 1 is in [1] }}|{{ undefined_v is callable }}|{{ range is callable }}|{{ 'a' is sameas 'a' }}|{{ none is sameas none }}|{{ 'upper' is filter }}|{{ 'odd' is test }}|{{ 1 is ne 2 }}|{{ 2 is ge 2 }}|{{ 1 is lessthan 2 }}"),
    ("is_not", "{{ x is not defined }}|{{ messages is not string }}|{{ messages[0] is not mapping }}|{{ not messages[0].content is defined }}|{{ messages[0].tool_calls is not defined }}"),
    # loops
    ("loop_vars", "{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.depth }}|{% endfor %}"),
    ("loop_items", "{% for x in [1,2,3] %}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('a','b') }}{{ loop.changed(x > 1) }};{% endfor %}"),
    ("loop_filter_else", "{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.role }}{% if not loop.last %},{% endif %}{% else %}none{% endfor %}|{% for m in [] %}x{% else %}empty{% endfor %}|{% for m in [1, 2, 3, 4] if m is even %}{{ loop.index }}/{{ loop.length }}:{{ m }}{% endfor %}"),
    ("break_continue", "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}|{% for i in range(3) %}{% for j in range(3) %}{% if j == 1 %}{% break %}{% endif %}{{ i }}{{ j }}{% endfor %}{% endfor %}"),
    ("nested_loops", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }}{% endfor %}{{ loop.index }};{% endfor %}"),
    ("unpacking", "{% for a, b in [(1,2),(3,4)] %}{{a}}{{b}}{% endfor %}|{% for k, v in {'x':1}.items() %}{{k}}={{v}}{% endfor %}|{% for k in {'x':1, 'y':2} %}{{k}}{% endfor %}|{% for c in 'ab' %}{{c}}{% endfor %}|{% for (a, b), c in [((1, 2), 3)] %}{{ a }}{{ b }}{{ c }}{% endfor %}"),
    ("recursive_loop", "{% for item in [{'n': 'a', 'c': [{'n': 'b', 'c': []}, {'n': 'c', 'c': [{'n': 'd', 'c': []}]}]}] recursive %}<{{ item.n }}{{ loop.depth }}{{ loop(item.c) }}>{% endfor %}"),
    ("loop_scoping", "{% set c = 0 %}{% for i in range(3) %}{% set c = c + 1 %}{{ c }}{% endfor %}|{{ c }}|{% for i in range(3) %}{% if i == 0 %}{% set q = 5 %}{% endif %}{{ q }},{% endfor %}|{% set i = 'outer' %}{% for i in range(2) %}{{ i }}{% endfor %}{{ i }}|{% for i in range(2) %}{% set z = i %}{% endfor %}{{ z }}"),
    ("set_in_if", "{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}|{% for i in [1] %}{% set x = 3 %}{% endfor %}{{ x }}"),
    # set, namespace, with, filter blocks, macros
    ("set_forms", "{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set t = 1, 2 %}{{ t }}|{% set block %}  captured {{ 1 + 1 }}  {% endset %}[{{ block }}]|{% set b2 | trim | upper %}  t  {% endset %}[{{ b2 }}]"),
    ("namespace", "{% set ns = namespace(count=0, items=[], flag=false) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% set ns.items = ns.items + [m.role] %}{% if m.role == 'user' %}{% set ns.flag = true %}{% endif %}{% endfor %}{{ ns.count }}{{ ns.items }}{{ ns.flag }}|{{ ns.missing is defined }}|{{ ns }}|{% set n2 = namespace(d) %}{{ n2.a }}"),
    ("with_filter_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a is defined }}|{% filter upper %}abc {{ 'def' }}{% endfilter %}|{% filter replace('a', 'o') | title %}banana{% endfilter %}"),
    ("macros", "{% macro greet(name, greeting='Hello', punct=greeting[0]) -%}\n{{ greeting }}, {{ name }}{{ punct }}\n{%- endmacro %}{{ greet('A') }}|{{ greet('B', greeting='Hi') }}|{{ greet(name='C') }}|{{ greet() }}|{{ greet }}"),
    ("macro_varargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, z=3) }}|{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}|{% set y = 1 %}{% macro late() %}{{ y }}{% endmacro %}{% set y = 3 %}{{ late() }}"),
    ("macro_scope", "{% macro m(a) %}{% set a = a ~ 'x' %}{% set inner = 1 %}{{ a }}{% endmacro %}{{ m(1) }}{{ inner is defined }}|{% for i in [1, 2] %}{% macro show() %}{{ i }}{% endmacro %}{{ show() }}{% endfor %}"),
    # filters
    ("string_filters", "{{ s|upper }}|{{ s|lower }}|{{ s|title }}|{{ s|capitalize }}|{{ s|length }}|{{ s|count }}|{{ s|reverse }}|{{ s|replace('t', 'T') }}|{{ 'abcabc'|replace('b', 'X', 1) }}|{{ s|string }}|{{ 'hello wORLD-foo (bar'|title }}|{{ 'straße'|upper }}|{{ 'ÉCOLE'|lower }}|{{ 'héllo wörld'|upper }}|{{ 'éa'|capitalize }}"),
    ("trim", "{{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ '\\u3000\\n x \\t'|trim }}|{{ none|trim }}|{{ 5|trim }}"),
    ("list_filters", "{{ l|join(', ') }}|{{ l|join }}|{{ l|first }}|{{ l|last }}|{{ l|length }}|{{ l|sum }}|{{ l|max }}|{{ l|min }}|{{ l|reverse|list }}|{{ l|sort(reverse=true) }}|{{ l|map('string')|join('-') }}|{{ l|select('odd')|list }}|{{ l|reject('odd')|list }}|{{ l|select|list }}|{{ 'abc'|list }}|{{ []|first is defined }}|{{ []|max is defined }}"),
    ("attr_filters", "{{ messages|selectattr('role', 'equalto', 'user')|list|length }}|{{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }}|{{ messages|map(attribute='content')|join('/') }}|{{ messages|selectattr('missing')|list }}|{{ messages|map(attribute='missing', default='D')|list }}|{{ [nested]|map(attribute='k.0.v')|list }}|{{ messages|map(attribute='role')|unique|list }}"),
    ("sort_unique", "{{ [3, 1, 2]|sort|join }}|{{ ['b', 'A', 'c']|sort|join }}|{{ ['b', 'A', 'c']|sort(case_sensitive=true)|join }}|{{ [{'n': 2}, {'n': 1}]|sort(attribute='n') }}|{{ [1, 2, 2, 3, 1]|unique|list }}|{{ ['a', 'A', 'b']|unique|list }}|{{ ['a', 'A']|unique(case_sensitive=true)|list }}|{{ {'b': 1, 'a': 2}|dictsort }}|{{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }}"),
    ("tojson", "{{ {'b': 1, 'a': [1, 'x', none, true, 1.5]}|tojson }}|{{ messages[0]|tojson }}|{{ \"é\\\"\\\\\\n\\t<>&'\\u2028\\x7f\\x1f\"|tojson }}|{{ d|tojson(indent=2) }}|{{ d|tojson(sort_keys=true) }}|{{ [1, {'a': []}, {}]|tojson(indent=4) }}|{{ none|tojson }}|{{ 1.0|tojson }}|{{ 1e20|tojson }}|{{ (1, 2)|tojson }}|{{ {1: 'a', none: 2, true: 3}|tojson }}|{{ [1, [2]]|tojson(indent='\\t') }}|{{ d|tojson(separators=(',', ':')) }}|{{ 'é😀'|tojson(ensure_ascii=true) }}|{{ big|tojson }}"),
    ("number_filters", "{{ -3|abs }}|{{ -2.5|abs }}|{{ 3.7|round }}|{{ 2.5|round }}|{{ 3|round }}|{{ 3.14159|round(2) }}|{{ 2.675|round(2) }}|{{ 3.14159|round(2, 'floor') }}|{{ 3.14159|round(1, 'ceil') }}|{{ '12'|int + 1 }}|{{ 'abc'|int }}|{{ 'abc'|int(7) }}|{{ '3.9'|int }}|{{ 3.9|int }}|{{ '1.5'|float }}|{{ 'x'|float }}|{{ true|int }}|{{ '0b101'|int(base=0) }}|{{ ' 42 '|int }}|{{ '0x1A'|int(0, 16) }}|{{ n|float }}"),
    ("text_filters", "{{ 'abc'|batch(2)|list }}|{{ [1,2,3,4,5]|batch(2, 0)|list }}|{{ [1,2,3,4,5]|slice(3)|list }}|{{ 'hello'|center(11) }}|{{ 'x y z'|wordcount }}|{{ 'abcdefghij'|truncate(7) }}|{{ 'hello world foo bar'|truncate(12) }}|{{ 'abcdefghijklmnop'|truncate(9, true) }}|{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=true) }}|{{ '<a href=\"x\">&</a>'|e }}|{{ '<b>'|safe }}|{{ ('<b>'|safe) + '<i>' }}|{{ [1, 2]|sum(start=10) }}|{{ [{'p': 1}, {'p': 2}]|sum(attribute='p') }}"),
    ("items_filter", "{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}|{{ undefined_var|items|list }}|{{ {'a': 1}|items|list }}|{{ {'b': 2, 'a': 1}|list }}"),
    ("format", "{{ '%s and %s' % ('a', 'b') }}|{{ '%d%%' % 50 }}|{{ '%5.1f|%-4s|%04d|%x|%r' % (3.14159, 'x', 42, 255, 'q') }}|{{ '{} {}'.format('a', 1) }}|{{ '{0}{1}{0}'.format('x', 'y') }}|{{ '{name}!'.format(name='N') }}|{{ '%s'|format('f') }}|{{ '%(a)s-%(b)d'|format(a='x', b=2) }}|{{ '{0!r:>6}|{1:.2f}|{2:05d}|{3:,}'.format('x', 2.5, 7, 1234567) }}|{{ '{m[0][role]}'.format(m=messages) }}"),
    # str methods
    ("str_methods", "{{ '  a  b '.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ '  a b  c  '.split(None, 1) }}|{{ ' x '.strip() }}|{{ 'xyx'.strip('x') }}|{{ 'ab'.startswith('a') }}|{{ 'ab'.endswith(('x','b')) }}|{{ 'ab'.upper() }}|{{ 'a b'.title() }}|{{ \"they're bill's\".title() }}|{{ 'abc'.replace('', '-') }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'hello'.find('l') }}|{{ 'hello'.rfind('l') }}|{{ 'héllo'.find('l') }}|{{ 'hello'.count('l') }}|{{ 'hello'.index('e') }}"),
    ("str_methods_2", "{{ 'a-b-c'.partition('-') }}|{{ 'a-b-c'.rpartition('-') }}|{{ 'x'.center(5, '*') }}|{{ 'x'.ljust(3) }}|{{ 'x'.rjust(3, '.') }}|{{ '42'.zfill(5) }}|{{ '-42'.zfill(5) }}|{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ 'a\\nb\\n'.splitlines(true) }}|{{ 'Hello'.swapcase() }}|{{ 'hello world'.capitalize() }}|{{ 'prefix-x'.removeprefix('prefix-') }}|{{ 'x.txt'.removesuffix('.txt') }}|{{ ', '.join(['a', 'b']) }}|{{ 'abc'.isalpha() }}|{{ '123'.isdigit() }}|{{ ' '.isspace() }}|{{ 'Ab'.islower() }}|{{ 'AB'.isupper() }}|{{ 'Title Case'.istitle() }}|{{ 'ab12'.isalnum() }}"),
    ("think_split", "{% set c = '<think>\\nreason\\n</think>\\n\\nanswer' %}{{ c.split('</think>')[-1].lstrip('\\n') }}|{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}|{{ '</think>' in c }}|{{ c.startswith('<think>') and c.endswith('answer') }}"),
    ("list_methods", "{{ [3, 1].index(1) }}|{{ [1, 1, 2].count(1) }}|{{ (1, 2).index(2) }}|{{ [1, 2].copy() }}|{% set l2 = [1, 2, 3] %}{{ l2.pop() }}{{ l2 }}{{ l2.pop(0) }}{{ l2 }}|{{ [1].append }}|{{ {'a': 1}.pop }}"),
    # globals
    ("globals", "{{ range(3) }}|{{ range(1, 3)|list }}|{{ range(0, 10, 3)|list }}|{{ range(10, 0, -3)|list }}|{{ range(3)|length }}|{{ range(5)[1] }}|{{ dict(a=1) }}|{{ dict({'b': 2}, c=3) }}|{{ dict([('k', 'v')]) }}|{{ namespace(a=1).a }}|{{ dict() }}"),
    ("strftime_now", "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %H:%M:%S %A %B %j %p %I %y %f %z%Z') }}|{{ strftime_now('%-d %e') }}"),
    ("generation_tag", "{% for m in messages %}{% generation %}[{{ m.content }}]{% endgeneration %}{% endfor %}"),
    ("print_tag", "{% print 'a', 1 %}{% print messages[0].role %}"),
    ("loop_object_print", "{% for i in [1, 2] %}{{ loop }}{% endfor %}|{{ loop }}|{{ loop is defined }}"),
    ("undefined_in_filters", "{{ undefined_var|upper }}|{{ undefined_var|join(',') }}|{{ undefined_var|first is defined }}|{{ undefined_var|string }}|{{ undefined_var|capitalize }}|{{ undefined_var ~ 'x' }}"),
    ("mutating_loop_list", "{% set l3 = [1, 2, 3] %}{% for i in l3 %}{{ i }}{% endfor %}{{ l3|length }}"),
    ("unknown_filter_in_if", "{% if false %}{{ x|no_such_filter }}{{ x is no_such_test }}{% endif %}ok"),
    ("big_ints", "{{ big }}|{{ big - 1 }}|{{ 9223372036854775807 }}|{{ -9223372036854775807 - 1 }}|{{ 2 ** 62 }}|{{ 3 ** 39 }}"),
    # jinja2's own ways, found by comparing random templates with it
    ("for_else_quirk", "{% for i in 'ab' %}A{% continue %}{% else %}E{% endfor %}|{% for i in 'ab' %}{% break %}{% else %}E{% endfor %}|{% for i in 'ab' %}{% if i == 'b' %}{% continue %}{% endif %}{{ i }}{% else %}E{% endfor %}|{% for i in 'ab' if i == 'z' %}{% else %}E{% endfor %}"),
    ("scoping_set_later", "{{ n }}{% for m in messages %}[{{ n }}]{% endfor %}{% set n = 5 %}{{ n }}"),
    ("scoping_macro_later", "{% macro f() %}[{{ n }}]{% endmacro %}{{ f() }}{% set n = 5 %}{{ f() }}"),
    ("scoping_loop_later", "{% for m in messages %}{{ n }}{% endfor %}{% for q in [1] %}{% set n = 5 %}{% endfor %}|{% for m in messages %}{{ m.role }}{{ n }}{% set n = 9 %}{{ n }}{% endfor %}{{ n }}"),
    ("scoping_branches", "{% for m in messages %}{{ n }}{% endfor %}{% if false %}{% set n = 5 %}{% endif %}|{% for m in messages %}{{ s }}{% endfor %}{% if false %}{% set s = 5 %}{% elif true %}{% set s = 6 %}{% else %}{% set s = 7 %}{% endif %}{{ s }}"),
    ("scoping_with_setblock", "{% with a = n %}{{ n }}{% set n = 1 %}{{ a }}{{ n }}{% endwith %}{{ n }}|{% set blk %}{{ f }}{% set f = 4 %}{{ f }}{% endset %}{{ blk }}{{ f }}"),
    ("lazy_generators", "{% set g = l|map('string') %}{{ g|list }}{{ g|list }}|{{ (n|map('upper')) is defined }}|{% set bad = 5|select %}ok|{{ l|select('odd')|first }}|{{ 'a' in l|map('string') }}"),
    ("constant_slices", "{{ true[1:] }}|{{ none[:2] }}|{% if true[1:]|lower %}no{% else %}empty{% endif %}|{{ (1, 2, 3)[1:] }}"),
    ("folding_dynamic", "{% set z = (loop|indent(2) if none[:2] else 2|int) %}{{ z }}|{{ not (1.0[:2] if 3 else l) }}|{{ 'a' or x[:2] }}|{{ (none[1:] or 5) + 1 }}|{{ x[:2] if false else 1 }}|{{ (false if '%s' else item[::-1])[1:] }}"),
    ("reverse_undefined", "{{ undefined_var|reverse|list }}|{{ (undefined_var|reverse) is iterable }}|{{ range(5)[1:4] }}|{{ range(10)[::3] }}"),
    ("percent_mapping", "{{ 'abc' % [1] }}|{{ '%s' % undefined_var }}|{{ 'x' % {} }}|{{ '%(a)s' % d }}"),
    ("break_in_blocks", "{% for i in [1, 2, 3] %}{% set x %}a{{ i }}{% if i == 2 %}{% break %}{% endif %}{% endset %}{{ x }}{% endfor %}|{% for i in [1, 2, 3] %}{% filter upper %}a{{ i }}{% if i == 2 %}{% continue %}{% endif %}{% endfilter %}{% endfor %}|{% for i in [1, 2, 3] %}{% with y = i %}{{ y }}{% if i == 2 %}{% break %}{% endif %}{% endwith %}{% endfor %}"),
    ("empty_captures_first", "{% macro e() %}{% endmacro %}{{ e() }}{% set b %}{% endset %}{{ b }}{% filter upper %}{% endfilter %}x"),
    ("qwen_like_tool_loop",
     "{%- for message in messages %}{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}<{{ message.role }}>{%- endif %}{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}</{{ message.role }}>{%- endif %}{%- endfor %}"),
]

# Templates that must fail: (name, template). A syntax error, a runtime
# error, or raise_exception with its message.
ERRORS = [
    ("raise_exception", "line 1\n{% if true %}\n  {{ raise_exception('boom: ' ~ 42) }}\n{% endif %}"),
    ("raise_in_loop", "{% for i in range(3) %}\n{% if i == 2 %}{{ raise_exception('stop at ' ~ i) }}{% endif %}\n{% endfor %}"),
    ("raise_role_check", "{% if messages[0]['role'] != 'user' %}{{ raise_exception('first must be user, got ' + messages[0]['role']) }}{% endif %}"),
    ("undefined_attribute_chain", "a\n{% for m in messages %}\n{{ m.nope.deeper }}\n{% endfor %}"),
    ("undefined_var_attribute", "{{ undefined_var.attr }}"),
    ("none_attribute_chain", "{{ none.foo.bar }}"),
    ("missing_item_attribute", "{{ [1, 2][5].x }}"),
    ("undefined_call", "{{ undefined_fn() }}"),
    ("undefined_arithmetic", "{{ undefined_var + 1 }}"),
    ("undefined_in_macro", "{% macro m(a) %}\n{{ a.b.c }}\n{% endmacro %}\ntext\n{{ m(1) }}"),
    ("str_plus_int", "{{ 'a' + 1 }}"),
    ("concat_precedence", "{{ 1 ~ 2 + 3 }}"),
    ("int_plus_str", "{% set y = 1 %}\n{{ y + 'a' }}"),
    ("order_mismatch", "{{ 1 < 'a' }}"),
    ("sort_mismatch", "{{ [1, 'a']|sort }}"),
    ("zero_division", "{{ 5 // 0 }}"),
    ("float_zero_division", "{{ 5 / 0.0 }}"),
    ("not_iterable", "{% for x in 5 %}{% endfor %}"),
    ("none_not_iterable", "{% for x in none %}{% endfor %}"),
    ("unpack_count", "{% for a, b in [(1, 2, 3)] %}{% endfor %}"),
    ("range_too_big", "{{ range(1000000)|length }}"),
    ("slice_step_zero", "{{ [1, 2, 3][::0] }}"),
    ("slice_float_index", "{{ l[1.0:] }}"),
    ("slice_none", "{{ x[1:] }}"),
    ("unsafe_dict_pop", "{{ {'a': 1}.pop('a') }}"),
    ("unsafe_append", "{{ messages.append(1) }}"),
    ("unknown_method", "{{ 'abc'.nosuchmethod() }}"),
    ("namespace_assign", "{% set ns = namespace() %}{% set other.x = 1 %}"),
    ("macro_too_many_args", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}"),
    ("macro_unknown_kwarg", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(z=3) }}"),
    ("tojson_undefined", "{{ undefined_var|tojson }}"),
    ("length_of_int", "{{ 5|length }}"),
    ("split_empty_separator", "{{ 'a b'.split('') }}"),
    ("join_non_str", "{{ ', '.join([1, 2]) }}"),
    ("list_count_arguments", "{{ l.count(1, 2) }}"),
    ("items_not_mapping", "{{ [1]|items|list }}"),
    ("str_in_int", "{{ 'a' in 5 }}"),
    ("int_in_str", "{{ 1 in 'abc' }}"),
    ("unhashable_key", "{{ {[1]: 2} }}"),
    ("cond_expr_undefined", "{{ ('abc' if false).x }}"),
    ("not_callable", "{{ messages() }}"),
    ("loop_not_recursive", "{% for i in [1] %}{{ loop([2]) }}{% endfor %}"),
    ("constant_slice_in_set", "{% set i = true[1:] %}"),
    ("lazy_generator_error", "{{ 5|select|list }}"),
    ("reverse_int", "{{ 5|reverse }}"),
    ("percent_unused", "{{ 'x' % 5 }}"),
    ("indent_int", "{{ 5|indent }}"),
    ("truncate_bool", "{{ true|truncate(3) }}"),
    # syntax errors
    ("syntax_loop_assign", "{% for i in l %}{% set loop = 1 %}{% endfor %}"),
    ("syntax_error_before_unknown_filter", "{{ x|nosuch }}\n{{ ) }}"),
    ("syntax_empty_if", "{% if %}"),
    ("syntax_dangling_operator", "{{ 1 + }}"),
    ("syntax_unclosed_for", "{% for x in y %}\nno end"),
    ("syntax_wrong_end", "{% if true %}\n{% endfor %}"),
    ("syntax_unknown_tag", "\n\n{% foo %}"),
    ("syntax_unterminated_string", "{{ 'unterminated }}"),
    ("syntax_bracket_mismatch", "a\nb {{ (1 }}"),
    ("syntax_unknown_filter", "{{ x|nosuch }}"),
    ("syntax_unknown_test", "x\n{{ 1 is nosuch }}"),
    ("syntax_break_outside_loop", "{% break %}"),
    ("syntax_continue_outside_loop", "{% for i in [1] %}{% endfor %}{% continue %}"),
    ("syntax_unclosed_comment", "{#\nunterminated comment"),
    ("syntax_unclosed_raw", "{% raw %}\nno end"),
    ("syntax_bad_escape", "{{ \"\\x4\" }}"),
    ("syntax_assign_const", "{% set 1 = 2 %}"),
    ("syntax_macro_defaults", "{% macro m(a=1, b) %}{% endmacro %}"),
    ("syntax_unclosed_variable", "{{ x "),
    ("syntax_elif_after_else", "{% if x %}{% else %}{% elif y %}{% endif %}"),
    ("syntax_chained_is", "{{ x is defined is true }}"),
    ("syntax_bad_character", "{{ x ! y }}"),
    ("syntax_unexpected_end_tag", "a }} b %} c {{ 'ok' }}\n{{ ) }}"),
]


# ---------------------------------------------------------------------------

def read_template(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return f.read()


def import_qwen(models_dir):
    """Copies the Qwen templates (Apache-2.0) out of their tokenizer_config.json."""
    for model in ("qwen2.5", "qwen3"):
        with open(os.path.join(models_dir, f"{model}-tokenizer", "tokenizer_config.json"), encoding="utf-8") as f:
            template = json.load(f)["chat_template"]
        with open(os.path.join(DATA, f"{model}.jinja"), "w", encoding="utf-8") as f:
            f.write(template)


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1)
        f.write("\n")


def real_template_cases():
    cases = []
    for name, spec in TEMPLATES.items():
        text = read_template(name)
        for conversation in spec["conversations"]:
            for kwargs in template_options(spec, conversation):
                kwargs = {**spec["tokens"], **kwargs}
                case = {"name": f"{name} {conversation} {json.dumps(kwargs, sort_keys=True)}",
                        "template_file": name, "conversation": conversation,
                        "kwargs": {k: v for k, v in kwargs.items() if v != "absent"},
                        "without": [k for k, v in kwargs.items() if v == "absent"]}
                case.update(render(text, conversation_vars(conversation, kwargs)))
                cases.append(case)
    return cases


def snippet_cases():
    cases = []
    for name, text in CONSTRUCTS:
        result = render(text, DEFAULT_VARS)
        if "error" in result:
            sys.exit(f"construct {name} fails in jinja2: {result['error']}")
        cases.append({"name": name, "template": text, "vars": "default", **result})
    for name, text in ERRORS:
        result = render(text, DEFAULT_VARS)
        if "error" not in result:
            sys.exit(f"error case {name} renders in jinja2: {result['output']!r}")
        cases.append({"name": name, "template": text, "vars": "default", **result})
    return cases


def generate():
    os.makedirs(os.path.join(DATA, "conversations"), exist_ok=True)
    for name, variables in CONVERSATIONS.items():
        write_json(os.path.join(DATA, "conversations", f"{name}.json"), variables)
    cases = real_template_cases() + snippet_cases()
    golden = {"jinja2": jinja2.__version__, "now": NOW_TEXT, "default_vars": DEFAULT_VARS, "cases": cases}
    write_json(os.path.join(DATA, "golden.json"), golden)
    errors = sum("error" in c for c in cases)
    print(f"{len(cases)} cases ({errors} errors) written to tests/data/templates/golden.json")


def check(config_path, driver):
    """Renders a tokenizer_config.json's template with jinja2 and the C
    driver over every conversation and option; returns the mismatches."""
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except OSError as e:
        sys.exit(f"{config_path}: {e.strerror}")
    text = config["chat_template"]
    tokens = {k: config[k] for k in ("bos_token", "eos_token") if isinstance(config.get(k), str)}
    spec = {"tokens": tokens, "thinking": True, "dated": True}
    agree = differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        template_path = os.path.join(tmp, "template.jinja")
        with open(template_path, "w", encoding="utf-8") as f:
            f.write(text)
        for conversation in CONVERSATIONS:
            for kwargs in template_options(spec, conversation):
                kwargs = {**tokens, **kwargs}
                variables = conversation_vars(conversation, kwargs)
                want = render(text, variables)
                vars_path = os.path.join(tmp, "vars.json")
                write_json(vars_path, variables)
                got = subprocess.run([driver, template_path, vars_path, NOW_TEXT], capture_output=True)
                if got.returncode == 0:
                    same = want.get("output", "").encode("utf-8") == got.stdout and "output" in want
                else:
                    same = "error" in want and (want["error"]["line"] is None or
                                                f"template line {want['error']['line']}:".encode() in got.stderr)
                if same:
                    agree += 1
                else:
                    differ += 1
                    print(f"DIFFERENT: {conversation} {kwargs}\n  jinja2: {want!r:.300}\n  C:      "
                          f"{(got.stdout if got.returncode == 0 else got.stderr)!r:.300}")
    print(f"{config_path}: {agree} renderings identical to jinja2, {differ} different")
    return differ


# ---------------------------------------------------------------------------
# Random templates

class RandomTemplates:
    """Templates made of random statements and expressions over the names
    of DEFAULT_VARS, most of them wrong in some way: what they exercise is
    what happens then (errors, undefined values, Python's types)."""

    NAMES = ["messages", "x", "n", "f", "s", "l", "d", "undefined_var", "nested", "big", "add_generation_prompt",
             "bos_token", "loop", "i", "item"]
    STRINGS = ["''", "'a'", "'Ab c'", "'é'", "' x '", "'<think>y</think>z'", "'\\n'", "'a,b'", "'%s'", "'{}'", "'1'"]
    ATTRIBUTES = ["role", "content", "a", "b", "missing", "items", "keys", "get", "upper", "split", "strip", "k",
                  "v", "index", "first", "last", "length", "append", "lower", "title", "startswith"]
    FILTERS = ["trim", "length", "upper", "lower", "string", "tojson", "first", "last", "list", "join", "join(',')",
               "default('D')", "default('D', true)", "items", "int", "float", "capitalize", "title", "reverse", "sort",
               "unique", "sum", "max", "min", "replace('a', 'X')", "abs", "round", "map('upper')",
               "map(attribute='role')", "select('odd')", "reject('none')", "selectattr('role')",
               "rejectattr('role', 'eq', 'user')", "count", "indent(2)", "center(6)", "truncate(5, true, '')",
               "batch(2)", "slice(2)", "dictsort", "wordcount", "safe", "e", "tojson(indent=1)", "format(1)", "d"]
    TESTS = ["defined", "undefined", "none", "string", "number", "mapping", "sequence", "iterable", "odd", "even",
             "true", "false", "boolean", "integer", "float", "callable", "lower", "upper", "eq 1", "in [1, 'a']",
             "divisibleby 2", "sameas none", "gt 0"]
    OPERATORS = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "and", "or"]
    METHODS = ["split", "strip", "startswith", "endswith", "get", "upper", "replace", "find", "count", "join", "items",
               "lstrip", "rstrip", "title", "format"]

    def __init__(self, seed):
        import random
        self.r = random.Random(seed)

    def expr(self, depth):
        r = self.r
        if depth <= 0 or r.random() < 0.25:
            c = r.random()
            if c < 0.3:
                return r.choice(self.NAMES)
            if c < 0.5:
                return r.choice(self.STRINGS)
            if c < 0.65:
                return str(r.choice([0, 1, 2, 3, -1, 10, 300]))
            if c < 0.72:
                return r.choice(["0.5", "1.0", "2.5", "1e3", "-0.0"])
            return r.choice(["true", "false", "none"])
        c, e = r.random(), lambda: self.expr(depth - 1)
        if c < 0.15:
            return f"{e()}.{r.choice(self.ATTRIBUTES)}"
        if c < 0.25:
            return f"{e()}[{r.choice(['0', '-1', '1', 'n', '5', '1:', '::-1', ':2', repr('role'), repr('a')])}]"
        if c < 0.4:
            return f"{e()}|{r.choice(self.FILTERS)}"
        if c < 0.48:
            return f"{e()} is {r.choice(['', 'not '])}{r.choice(self.TESTS)}"
        if c < 0.68:
            return f"({e()} {r.choice(self.OPERATORS)} {e()})"
        if c < 0.73:
            return f"not {e()}"
        if c < 0.77:
            return f"-{e()}"
        if c < 0.82:
            return f"({e()} if {e()} else {e()})"
        if c < 0.87:
            return "[" + ", ".join(e() for _ in range(r.randint(0, 3))) + "]"
        if c < 0.9:
            return "{" + ", ".join(f"{r.choice(self.STRINGS)}: {e()}" for _ in range(r.randint(0, 2))) + "}"
        if c < 0.95:
            return f"{e()}.{r.choice(self.METHODS)}(" + ", ".join(e() for _ in range(r.randint(0, 2))) + ")"
        return r.choice([f"range({r.randint(0, 4)})", f"namespace(a={e()})", f"dict(a={e()})"])

    def space(self):
        return self.r.choice(["", "", " ", "\n", "\n  ", "  \n", "\t", "\n\n"])

    def block(self, text):
        r = self.r
        return r.choice(["{%", "{%", "{%-", "{%+"]) + " " + text + " " + r.choice(["%}", "%}", "-%}", "+%}"])

    def statements(self, depth):
        r, out = self.r, []
        for _ in range(r.randint(1, 3)):
            c = r.random()
            if depth <= 0 or c < 0.3:
                out.append(self.space() + r.choice(["text", "A b", "", "x\ny", " "]) + self.space())
            elif c < 0.55:
                out.append(self.space() + r.choice(["{{", "{{", "{{-"]) + " " + self.expr(3) + " " +
                           r.choice(["}}", "}}", "-}}"]) + self.space())
            elif c < 0.68:
                text = self.block("if " + self.expr(2)) + self.statements(depth - 1)
                if r.random() < 0.3:
                    text += self.block("elif " + self.expr(2)) + self.statements(depth - 1)
                if r.random() < 0.4:
                    text += self.block("else") + self.statements(depth - 1)
                out.append(self.space() + text + self.block("endif") + self.space())
            elif c < 0.8:
                target = r.choice(["i", "item", "k, v", "i"])
                iterable = r.choice(["messages", "l", "d", "s", "d.items()", "range(3)", self.expr(2), "'ab'"])
                test = " if " + self.expr(1) if r.random() < 0.2 else ""
                body = self.statements(depth - 1)
                if r.random() < 0.3:
                    body += "{{ loop." + r.choice(["index", "index0", "first", "last", "length", "revindex",
                                                   "previtem", "nextitem"]) + " }}"
                if r.random() < 0.15:
                    body += self.block(r.choice(["break", "continue"]))
                other = self.block("else") + self.statements(depth - 1) if r.random() < 0.2 else ""
                out.append(self.space() + self.block(f"for {target} in {iterable}{test}") + body + other +
                           self.block("endfor") + self.space())
            elif c < 0.92:
                out.append(self.space() + self.block(f"set {r.choice(['x', 'n', 'i', 'z', 's'])} = {self.expr(2)}") +
                           self.space())
            else:
                out.append(self.space() + "{# c #}" + self.space())
        return "".join(out)


def compare_random(seed, count, driver):
    """Renders count random templates with jinja2 and the driver; prints the
    differences, counting apart those that are only Python's object
    addresses (in the repr of a generator or method, which nothing can
    match) and the wording of TypeErrors. Returns the other differences."""
    import re
    templates = RandomTemplates(seed)
    differ = addresses = wording = 0
    with tempfile.TemporaryDirectory() as tmp:
        template_path, vars_path = os.path.join(tmp, "template.jinja"), os.path.join(tmp, "vars.json")
        write_json(vars_path, DEFAULT_VARS)
        for _ in range(count):
            text = templates.statements(3)
            with open(template_path, "w", encoding="utf-8") as f:
                f.write(text)
            want = render(text, DEFAULT_VARS)
            got = subprocess.run([driver, template_path, vars_path, NOW_TEXT], capture_output=True)
            if "output" in want and got.returncode == 0 and got.stdout == want["output"].encode():
                continue
            if "error" in want and got.returncode != 0:
                line = re.search(rb"template line (\d+): (.*)", got.stderr)
                e = want["error"]
                if line and e["line"] in (None, int(line.group(1))):
                    if message_must_match(e["type"]) and line.group(2).decode() != e["message"].replace("\n", " "):
                        wording += 1
                    continue
            if "output" in want and re.search(r"object at 0x|<built-in method", want["output"], re.IGNORECASE):
                addresses += 1
                continue
            differ += 1
            print(f"DIFFERENT: {text!r}\n  jinja2: {want!r:.300}\n  C:      "
                  f"{(got.stdout if got.returncode == 0 else got.stderr)!r:.300}")
    print(f"{count} random templates: {count - differ - addresses} agree with jinja2 ({wording} with other "
          f"wording of an error), {addresses} differ only in Python's object addresses, {differ} differ")
    return differ


def message_must_match(error_type):
    return error_type not in ("TemplateSyntaxError", "TemplateAssertionError", "SyntaxError")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--import-qwen", metavar="MODELS_DIR")
    parser.add_argument("--check", nargs=2, metavar=("TOKENIZER_CONFIG", "DRIVER"))
    parser.add_argument("--random", nargs=3, metavar=("SEED", "COUNT", "DRIVER"))
    args = parser.parse_args()
    if jinja2.__version__ != "3.1.2":
        print(f"warning: jinja2 {jinja2.__version__}, not Debian's 3.1.2", file=sys.stderr)
    if args.check:
        sys.exit(1 if check(*args.check) else 0)
    if args.random:
        sys.exit(1 if compare_random(int(args.random[0]), int(args.random[1]), args.random[2]) else 0)
    if args.import_qwen:
        import_qwen(args.import_qwen)
    generate()


if __name__ == "__main__":
    main()
