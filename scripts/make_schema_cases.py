#!/usr/bin/env python3
"""scripts/make_schema_cases.py - writes tests/data/schema_cases.json, the
cases test_grammar checks the schema grammars against: for each schema of
SCHEMAS, JSON texts labelled valid or invalid by python's jsonschema (with the
draft 2020-12 format checker), the independent judge.

Texts come two ways: made from the schema by a random generator in the form
the grammar writes (properties in order, plain characters) - "canonical": a
valid one of these the grammar must accept - and mutations of those texts
(characters dropped, doubled or changed, values swapped for others), which the
grammar must refuse whenever jsonschema says they are invalid.

Needs python3-jsonschema (scripts/setup.sh --tests). Rerun it after changing
SCHEMAS:  python3 scripts/make_schema_cases.py
"""
import json
import os
import random
import string

import jsonschema

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"],
     "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "number"}}},
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}, "day": {"type": "string", "format": "date"},
                                      "at": {"type": "string", "format": "date-time"}, "t": {"type": "string", "format": "time"}},
     "required": ["id", "day", "at", "t"]},
    {"type": "integer", "minimum": -37, "maximum": 1205},
    {"type": "integer", "exclusiveMinimum": 99},
    {"type": "integer", "maximum": -10},
    {"type": "number", "minimum": -3, "maximum": 12},
    {"type": "number", "minimum": 0},
    {"type": "string", "minLength": 2, "maxLength": 5},
    {"type": "string", "pattern": "^[A-Z]{2}-\\d{3,4}$"},
    {"type": "string", "pattern": "ab+c"},
    {"type": "string", "pattern": "^(red|green|blue)( [a-z]+)?$"},
    {"type": "string", "pattern": "^[^aeiou\\s]*\\.$"},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 2, "maxItems": 4},
    {"type": "array", "items": {"enum": ["x", 1, None, True, {"k": [1, 2]}]}},
    {"enum": ["red", "green", "with \"quote\"", "tab\t", "日本"]},
    {"const": {"a": [1, 2.5, "s"]}},
    {"type": ["string", "null"], "maxLength": 3},
    {"anyOf": [{"type": "integer", "minimum": 5}, {"type": "string", "maxLength": 2}]},
    {"oneOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "string"}, "maxItems": 2}]},
    {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                        "required": ["v", "next"], "additionalProperties": False}},
     "$ref": "#/$defs/node"},
    {"definitions": {"p": {"type": "string", "enum": ["a", "b"]}}, "type": "object",
     "properties": {"x": {"$ref": "#/definitions/p"}, "y": {"$ref": "#/definitions/p"}}, "required": ["y"]},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 4}}, "required": ["name"],
     "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"ab": {"type": "integer"}, "abc": {"type": "integer"}}, "additionalProperties": True},
    {"type": "object"},
    {},
]

rng = random.Random(20261202)
ALPHABET = string.ascii_letters + string.digits + " -_.é日\"\\\n"


def rand_string(lo=0, hi=6, alphabet=ALPHABET):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


def resolve(root, ref):
    if ref == "#":
        return root
    _, kind, name = ref.split("/")
    return root[kind][name]


def gen_date():
    y, m = rng.randint(1, 2999), rng.randint(1, 12)
    days = [31, 29 if (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]
    return "%04d-%02d-%02d" % (y, m, rng.randint(1, days))


def gen_time():
    t = "%02d:%02d:%02d" % (rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59))
    if rng.random() < 0.3:
        t += "." + str(rng.randint(0, 999))
    return t + rng.choice(["Z", "+05:30", "-11:00"])


def gen_pattern(pattern):
    """Strings for the patterns of SCHEMAS, made by hand per pattern."""
    if pattern == "^[A-Z]{2}-\\d{3,4}$":
        return rand_string(2, 2, string.ascii_uppercase) + "-" + rand_string(3, 4, string.digits)
    if pattern == "ab+c":
        return rand_string(0, 3) + "a" + "b" * rng.randint(1, 3) + "c" + rand_string(0, 3)
    if pattern == "^(red|green|blue)( [a-z]+)?$":
        return rng.choice(["red", "green", "blue"]) + rng.choice(["", " " + rand_string(1, 5, string.ascii_lowercase)])
    if pattern == "^[^aeiou\\s]*\\.$":
        return rand_string(0, 5, "bcdfXYZ12-\"") + "."
    raise ValueError(pattern)


def gen(schema, root, depth=0):
    """A value of schema, as the grammar would write it."""
    if schema is True or schema == {}:
        return rng.choice([1, "s", None, [1, "x"], {"k": False}, -2.5])
    if "$ref" in schema:
        return gen(resolve(root, schema["$ref"]), root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "anyOf" in schema or "oneOf" in schema:
        branches = schema.get("anyOf") or schema.get("oneOf")
        if depth > 3:
            branches = [b for b in branches if "$ref" not in b] or branches
        return gen(rng.choice(branches), root, depth + 1)
    t = schema.get("type", "object")
    if isinstance(t, list):
        t = rng.choice(t)
    if t == "null":
        return None
    if t == "boolean":
        return rng.random() < 0.5
    if t == "integer":
        lo = schema.get("minimum", schema.get("exclusiveMinimum", -10**6 - 1) + 1)
        hi = schema.get("maximum", schema.get("exclusiveMaximum", 10**6 + 1) - 1)
        return rng.randint(int(lo), int(hi))
    if t == "number":
        lo, hi = schema.get("minimum", -1000), schema.get("maximum", 1000)
        return round(rng.uniform(lo, hi), rng.randint(0, 4))
    if t == "string":
        if "format" in schema:
            f = schema["format"]
            if f == "uuid":
                return "%08x-%04x-%04x-%04x-%012x" % tuple(rng.getrandbits(b) for b in (32, 16, 16, 16, 48))
            if f == "date":
                return gen_date()
            if f == "time":
                return gen_time()
            return gen_date() + "T" + gen_time()
        if "pattern" in schema:
            return gen_pattern(schema["pattern"])
        return rand_string(schema.get("minLength", 0), schema.get("maxLength", 6))
    if t == "array":
        n = rng.randint(schema.get("minItems", 0), schema.get("maxItems", 3))
        return [gen(schema.get("items", True), root, depth + 1) for _ in range(n)]
    out = {}
    required = schema.get("required", [])
    for name, sub in schema.get("properties", {}).items():
        if name in required or rng.random() < 0.6:
            out[name] = gen(sub, root, depth + 1)
    extra = schema.get("additionalProperties")
    if extra not in (None, False) and rng.random() < 0.5:
        key = rand_string(1, 4, string.ascii_lowercase)
        if key not in out and key not in schema.get("properties", {}):
            out[key] = gen(extra if isinstance(extra, dict) else True, root, depth + 1)
    return out


def mutate(text):
    """A text near text: a character dropped, doubled or replaced, or a
    piece of another value put in."""
    if not text:
        return rand_string(1, 3)
    i = rng.randrange(len(text))
    kind = rng.randrange(5)
    if kind == 0:
        return text[:i] + text[i + 1:]
    if kind == 1:
        return text[:i] + text[i] + text[i:]
    if kind == 2:
        return text[:i] + rng.choice(ALPHABET + "{}[],:0123456789") + text[i + 1:]
    if kind == 3:
        return text[:i] + rng.choice(["1", "-", "\"", "null", "9999", ".5", "e5", "true", ",", " "]) + text[i:]
    return text[:i] + text[i + 1:] + text[i]


def judge(schema, text):
    try:
        value = json.loads(text)
    except ValueError:
        return False
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return validator.is_valid(value)


def main():
    out = []
    for schema in SCHEMAS:
        cases, seen = [], set()
        for _ in range(40):
            value = gen(schema, schema)
            text = json.dumps(value, ensure_ascii=False, separators=rng.choice([(",", ":"), (", ", ": ")]))
            if text not in seen:
                seen.add(text)
                cases.append({"text": text, "valid": judge(schema, text), "canonical": True})
            for _ in range(3):
                m = mutate(text)
                if m not in seen:
                    seen.add(m)
                    cases.append({"text": m, "valid": judge(schema, m), "canonical": False})
        out.append({"schema": json.dumps(schema, ensure_ascii=False), "cases": cases})
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "schema_cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
        f.write("\n")
    n = sum(len(s["cases"]) for s in out)
    print("wrote %s: %d schemas, %d texts" % (os.path.normpath(path), len(out), n))


if __name__ == "__main__":
    main()
