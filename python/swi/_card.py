"""Model cards against the package's JSON Schema (card.schema.json; docs/card.md).

``check(path)`` validates a card file with the schema alone, so it needs no compiled part:
``python3 -m swi card --check FILE``. The schema holds each key's type and range; the few
rules across keys (clip low <= high, an nnU-Net card's lists agreeing with one another) are
the C reader's, which ``swi card --check`` applies as ``swi segment`` does.

The validator covers the part of JSON Schema (2020-12) the card's schema uses: type, enum,
const, minimum/maximum (exclusive too), minItems/maxItems, minLength/maxLength, pattern,
items, properties, additionalProperties, required, anyOf, if/then/else and local $ref.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Optional

SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "card.schema.json")
NNUNET_CARD = "nnunet.json"
MAX_BYTES = 1 << 20  # the reader's limit on a card


class CardError(ValueError):
    """A card refused: the message names the file and the key."""


def schema() -> dict[str, Any]:
    with open(SCHEMA_FILE, encoding="utf-8") as f:
        out: dict[str, Any] = json.load(f)
    return out


def _q(key: str) -> str:
    """A key quoted, control characters escaped: a message stays one line."""
    return json.dumps(key, ensure_ascii=False)


def _type_ok(v: Any, t: str) -> bool:
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "null":
        return v is None
    if isinstance(v, bool):
        return False
    if t == "integer":
        return isinstance(v, int) or (isinstance(v, float) and v.is_integer())
    if t == "number":
        return isinstance(v, (int, float))
    return False


def _errors(v: Any, s: dict[str, Any], root: dict[str, Any], at: str) -> Optional[str]:
    """The first way v breaks s, as "KEY: why"; None when it conforms."""
    if "$ref" in s:
        ref = s["$ref"]
        node: Any = root
        for part in ref.lstrip("#/").split("/"):
            node = node[part]
        e = _errors(v, node, root, at)
        if e:
            return e
    where = _q(at) if at else "the card"
    what = s.get("description")
    hint = " (%s)" % what if what else ""
    if "type" in s:
        types = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(_type_ok(v, t) for t in types):
            return "%s: must be %s%s" % (where, " or ".join("an " + t if t[0] in "aeiou" else "a " + t
                                                              for t in types), hint)
    if "const" in s and not (v == s["const"] and type(v) is type(s["const"])):
        return "%s: must be %s" % (where, json.dumps(s["const"]))
    if "enum" in s and not any(v == e and type(v) is type(e) for e in s["enum"]):
        return "%s: must be one of %s%s" % (where, ", ".join(json.dumps(e) for e in s["enum"]), hint)
    if _type_ok(v, "number"):
        if "minimum" in s and v < s["minimum"]:
            return "%s: must be >= %s%s" % (where, s["minimum"], hint)
        if "maximum" in s and v > s["maximum"]:
            return "%s: must be <= %s%s" % (where, s["maximum"], hint)
        if "exclusiveMinimum" in s and not v > s["exclusiveMinimum"]:
            return "%s: must be > %s%s" % (where, s["exclusiveMinimum"], hint)
        if "exclusiveMaximum" in s and not v < s["exclusiveMaximum"]:
            return "%s: must be < %s%s" % (where, s["exclusiveMaximum"], hint)
    if isinstance(v, str):
        if len(v) < s.get("minLength", 0) or len(v) > s.get("maxLength", len(v)):
            return "%s: must have %d to %s characters%s" % (where, s.get("minLength", 0),
                                                             s.get("maxLength", "any"), hint)
        if "pattern" in s and not re.search(s["pattern"], v):
            return "%s: %s does not fit%s" % (where, json.dumps(v), hint or " " + s["pattern"])
    if isinstance(v, list):
        if len(v) < s.get("minItems", 0) or len(v) > s.get("maxItems", len(v)):
            lo, hi = s.get("minItems", 0), s.get("maxItems")
            n = "%d" % lo if hi == lo else "%d to %s" % (lo, hi if hi is not None else "any")
            return "%s: must have %s items%s" % (where, n, hint)
        if "items" in s:
            for i, x in enumerate(v):
                e = _errors(x, s["items"], root, "%s[%d]" % (at, i))
                if e:
                    return e
    if isinstance(v, dict):
        for k in s.get("required", []):
            if k not in v:
                return '%s: required' % _q((at + "." if at else "") + k)
        props = s.get("properties", {})
        for k, x in v.items():
            key = (at + "." if at else "") + k
            if k in props:
                e = _errors(x, props[k], root, key)
                if e:
                    return e
            elif s.get("additionalProperties", True) is False:
                return '%s: unknown key (known: %s)' % (_q(key), ", ".join(props))
    if "anyOf" in s:
        errs = [_errors(v, sub, root, at) for sub in s["anyOf"]]
        if all(errs):
            return "%s: not valid (%s)" % (where, what) if what else errs[0]
    if "if" in s:
        cond = _errors(v, s["if"], root, at) is None
        branch = s.get("then") if cond else s.get("else")
        if branch:
            e = _errors(v, branch, root, at)
            if e:
                return e
    return None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise CardError('not valid JSON: duplicate key %s' % _q(k))
        out[k] = v
    return out


def validate(card: Any, source: str = "card") -> None:
    """Raise CardError("SOURCE: "KEY": why") unless card (parsed JSON) fits the schema."""
    s = schema()
    e = _errors(card, s, s, "")
    if e:
        raise CardError("%s: %s" % (source, e))


def load(path: str) -> tuple[str, Any]:
    """A card file parsed (1 MB at most; duplicate keys refused)."""
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, NNUNET_CARD)):
        path = os.path.join(path, NNUNET_CARD)
    elif path.endswith(".onnx"):
        path = path[:-5] + ".json"
    if not os.path.isfile(path):
        raise CardError("%s: not a regular file" % path)
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise CardError("%s: the model card is larger than 1 MB" % path)
    try:
        return path, json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except CardError as e:
        raise CardError("%s: %s" % (path, e)) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CardError("%s: not valid JSON: %s" % (path, e)) from None


def check(path: str) -> Any:
    """Validate the card at path (a card file, m.onnx's m.json, or an nnU-Net model
    directory); return it parsed, or raise CardError naming the file and the key."""
    where, card = load(path)
    validate(card, where)
    return card


def main(argv: list[str], prog: str = "python3 -m swi card") -> int:
    usage = "usage: %s --check FILE...\n" % prog
    if argv and argv[0] in ("-h", "--help"):
        print(usage + "\nCheck model cards against the package's JSON Schema (docs/card.md).", end="\n")
        return 0
    if not argv or argv[0] != "--check" or len(argv) < 2:
        print(usage, end="", file=__import__("sys").stderr)
        return 2
    rc = 0
    for p in argv[1:]:
        try:
            check(p)
            print("%s: ok" % p)
        except CardError as e:
            print("swi card: %s" % e, file=__import__("sys").stderr)
            rc = 1
    return rc
