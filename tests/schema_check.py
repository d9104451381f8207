"""tests/schema_check.py - a JSON Schema validator in python's standard
library, for the end-to-end tests (which may not need python3-jsonschema):
the keywords schema.c supports, with draft 2020-12's meaning.

    errors(instance, schema) -> list of what is wrong (empty: valid)

Run as a script, it checks itself against the verdicts python's jsonschema
gave on tests/data/schema_cases.json (scripts/make_schema_cases.py) and
prints "schema_check: N agree, N differ"."""
import datetime
import json
import math
import re
import sys
import uuid

_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_TIME = re.compile(r"^(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|z|[+-](\d{2}):(\d{2}))$")


def _is_date(s):
    m = _DATE.match(s)
    if not m:
        return False
    try:
        datetime.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return False
    return True


def _is_time(s):
    m = _TIME.match(s)
    if not m:
        return False
    h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if m.group(6) is not None and (int(m.group(6)) > 23 or int(m.group(7)) > 59):
        return False
    return h <= 23 and mi <= 59 and sec <= 60


def _is_date_time(s):
    parts = re.split("[Tt]", s)
    return len(parts) == 2 and _is_date(parts[0]) and _is_time(parts[1])


def _is_uuid(s):
    try:
        uuid.UUID(s)
    except ValueError:
        return False
    # As jsonschema checks it: what UUID() reads, with hyphens at the four places.
    return len(s) > 23 and all(s[i] == "-" for i in (8, 13, 18, 23))


FORMATS = {"date": _is_date, "time": _is_time, "date-time": _is_date_time, "uuid": _is_uuid}


def _type_ok(x, t):
    if t == "null":
        return x is None
    if t == "boolean":
        return isinstance(x, bool)
    if t == "integer":
        return (isinstance(x, int) and not isinstance(x, bool)) or (isinstance(x, float) and x.is_integer())
    if t == "number":
        return isinstance(x, (int, float)) and not isinstance(x, bool)
    if t == "string":
        return isinstance(x, str)
    if t == "array":
        return isinstance(x, list)
    if t == "object":
        return isinstance(x, dict)
    raise ValueError(f"unknown type {t}")


def _equal(a, b):
    """JSON equality: 1 == 1.0, but true != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _resolve(root, ref):
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        raise ValueError(f"unsupported $ref {ref}")
    node = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def errors(x, schema, root=None, path="$"):
    root = schema if root is None else root
    if schema is True:
        return []
    if schema is False:
        return [f"{path}: the schema false"]
    out = []
    if "$ref" in schema:
        out += errors(x, _resolve(root, schema["$ref"]), root, path)
    t = schema.get("type")
    if t is not None and not any(_type_ok(x, u) for u in (t if isinstance(t, list) else [t])):
        return out + [f"{path}: not of type {t}"]
    if "const" in schema and not _equal(x, schema["const"]):
        out.append(f"{path}: not the const")
    if "enum" in schema and not any(_equal(x, v) for v in schema["enum"]):
        out.append(f"{path}: not in the enum")
    if "anyOf" in schema and not any(not errors(x, s, root, path) for s in schema["anyOf"]):
        out.append(f"{path}: no anyOf branch")
    if "oneOf" in schema and sum(not errors(x, s, root, path) for s in schema["oneOf"]) != 1:
        out.append(f"{path}: not exactly one oneOf branch")
    for s in schema.get("allOf", []):
        out += errors(x, s, root, path)
    if isinstance(x, dict):
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in x:
                out.append(f"{path}: {k} missing")
        extra = schema.get("additionalProperties", True)
        for k, v in x.items():
            if k in props:
                out += errors(v, props[k], root, f"{path}.{k}")
            else:
                out += errors(v, extra, root, f"{path}.{k}")
    if isinstance(x, list):
        if "items" in schema:
            for i, v in enumerate(x):
                out += errors(v, schema["items"], root, f"{path}[{i}]")
        if len(x) < schema.get("minItems", 0) or len(x) > schema.get("maxItems", math.inf):
            out.append(f"{path}: {len(x)} items")
    if isinstance(x, str):
        if len(x) < schema.get("minLength", 0) or len(x) > schema.get("maxLength", math.inf):
            out.append(f"{path}: length {len(x)}")
        if "pattern" in schema and not re.search(schema["pattern"], x):
            out.append(f"{path}: pattern")
        if "format" in schema and schema["format"] in FORMATS and not FORMATS[schema["format"]](x):
            out.append(f"{path}: format {schema['format']}")
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        if "minimum" in schema and x < schema["minimum"]:
            out.append(f"{path}: below the minimum")
        if "maximum" in schema and x > schema["maximum"]:
            out.append(f"{path}: above the maximum")
        if "exclusiveMinimum" in schema and x <= schema["exclusiveMinimum"]:
            out.append(f"{path}: not above the exclusive minimum")
        if "exclusiveMaximum" in schema and x >= schema["exclusiveMaximum"]:
            out.append(f"{path}: not below the exclusive maximum")
    return out


def self_check(path):
    """Compares the verdicts with jsonschema's on the committed cases."""
    agree = differ = 0
    for group in json.load(open(path, encoding="utf-8")):
        schema = json.loads(group["schema"])
        for case in group["cases"]:
            try:
                ok = not errors(json.loads(case["text"]), schema)
            except ValueError:  # not JSON (json.JSONDecodeError is one)
                ok = False
            if ok == case["valid"]:
                agree += 1
            else:
                differ += 1
                print(f"DIFFERENT: {group['schema']} {case['text']!r}: jsonschema {case['valid']}, here {ok}")
    return agree, differ


if __name__ == "__main__":
    agree, differ = self_check(sys.argv[1] if len(sys.argv) > 1 else "tests/data/schema_cases.json")
    print(f"schema_check: {agree} agree, {differ} differ")
    sys.exit(1 if differ else 0)
