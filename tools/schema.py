"""A small checker for the subset of JSON Schema the tool parameters use."""

from __future__ import annotations

from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
    "number": (int, float),
}


def _type_ok(value: Any, expected: str) -> bool:
    if expected in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[expected])


def check(schema: dict[str, Any], args: Any) -> str | None:
    """Return the first problem with ``args`` as a sentence, or None."""
    if not isinstance(args, dict):
        return "arguments must be a JSON object"
    props: dict[str, Any] = schema.get("properties", {})
    unknown = sorted(k for k in args if k not in props)
    if unknown and schema.get("additionalProperties") is False:
        return f"unknown argument(s) {', '.join(unknown)}; expected: {', '.join(props)}"
    for key in schema.get("required", []):
        if key not in args:
            return f"missing required argument {key!r}"
    for key, value in args.items():
        problem = _check_value(key, props.get(key, {}), value)
        if problem:
            return problem
    return None


def _check_value(key: str, spec: dict[str, Any], value: Any) -> str | None:
    expected = spec.get("type")
    if expected is None:
        return None
    if not _type_ok(value, expected):
        return f"{key!r} must be {expected}, not {type(value).__name__}"
    if expected in ("integer", "number"):
        if "minimum" in spec and value < spec["minimum"]:
            return f"{key!r} must be at least {spec['minimum']}"
        if "maximum" in spec and value > spec["maximum"]:
            return f"{key!r} must be at most {spec['maximum']}"
    if expected == "array":
        if len(value) < spec.get("minItems", 0):
            return f"{key!r} needs at least {spec['minItems']} item(s)"
        item_type = spec.get("items", {}).get("type")
        if item_type and not all(_type_ok(v, item_type) for v in value):
            return f"every item of {key!r} must be {item_type}"
    return None
