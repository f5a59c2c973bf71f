"""Pydantic validation errors of a teleop payload, as a reason and a one-line detail."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from hilbot.driver.teleop.payloads import MAX_NAME_LENGTH, UNION_TAGS, CommandName
from hilbot.driver.teleop.rejection import Invalid, RejectReason

#: Fields whose value is a tagged union: the tag that follows them in a path is left out.
_UNION_FIELDS = frozenset({"position", "orientation", "axis"})
_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "a boolean",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
}
_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
#: Numbers smaller than this are shown as sent (up to 17 digits: any seq, any value in range).
_EXACT_INT = 10**17


def invalid_from(exc: ValidationError, allowed: Sequence[str]) -> Invalid:
    """Turn the first error of a payload's validation into an :class:`Invalid`.

    Args:
        exc: what pydantic raised validating the payload.
        allowed: the payload's top-level fields (in the order to name them when one is
            unknown).
    """
    error = exc.errors(include_url=False)[0]
    kind = error["type"]
    value = error.get("input")
    if kind == "finite_number":
        return Invalid(RejectReason.NON_FINITE, f"{_where(error['loc'])} is {value}")
    if kind == "float_type" and isinstance(value, int) and not isinstance(value, bool):
        # Every int a float can hold passes: this one is too large and overflows to infinity.
        return Invalid(
            RejectReason.NON_FINITE,
            f"{_where(error['loc'])} is {number_text(value)}, too large: it overflows to infinity",
        )
    if kind == "enum" and isinstance(value, str):
        known = ", ".join(c.value for c in CommandName)
        return Invalid(
            RejectReason.UNKNOWN_COMMAND,
            f"unknown command {value[:MAX_NAME_LENGTH]!r}; known: {known}",
        )
    return Invalid(RejectReason.INVALID, _detail(error, allowed))


def _detail(error: ErrorDetails, allowed: Sequence[str]) -> str:
    loc = error["loc"]
    where = _where(loc)
    kind = error["type"]
    ctx: dict[str, Any] = error.get("ctx") or {}
    value = error.get("input")
    if kind == "missing":
        return f"missing field {where!r}"
    if kind == "extra_forbidden":
        detail = f"unknown field {where!r}"
        return detail + (f"; allowed: {', '.join(allowed)}" if len(loc) == 1 else "")
    if kind in _EXPECTED:
        return f"{where} must be {_EXPECTED[kind]}, got {json_kind(value)}"
    if kind in ("too_short", "too_long"):
        return _size(where, ctx)
    bound = next((k for k in _BOUNDS if k in ctx), None)
    if bound is not None:
        limit = ctx[bound]
        return f"{where} must be {_BOUNDS[bound]} {limit}, got {_beyond(value, bound, limit)}"
    if kind in ("vector_form", "orientation_form"):
        return f"{where} {error['msg']}, got {json_kind(value)}"
    if kind == "string_too_long":
        return f"{where} must be at most {ctx['max_length']} characters long"
    if kind == "enum":
        return f"{where} must be a string, got {json_kind(value)}"
    return f"{where}: {error['msg']}" if where else error["msg"]


def _size(where: str, ctx: dict[str, Any]) -> str:
    low, high, actual = ctx.get("min_length"), ctx.get("max_length"), ctx["actual_length"]
    if ctx.get("field_type") == "List":  # every list in the payloads has a fixed length
        return f"{where} needs {low if low is not None else high} numbers, got {actual}"
    if actual == 0:
        return f"{where} is empty"
    if high is not None and actual > high:
        return f"{where} has {actual} entries, at most {high}"
    return f"{where} has {actual} entries, at least {low}"


def _where(loc: Sequence[int | str]) -> str:
    """Dotted path of a field, ``orientation.axis[2]``, without union tags."""
    path = ""
    previous: int | str | None = None
    for item in loc:
        if isinstance(item, int):
            path += f"[{item}]"
        elif item == "[key]":
            path += " (the name)"
        elif not (item in UNION_TAGS and previous in _UNION_FIELDS):
            name = item[:MAX_NAME_LENGTH]  # a joint name is the sender's text
            path += f".{name}" if path else name
        previous = item
    return path


def number_text(value: object) -> str:
    """A number as an error detail shows it: as sent, or in 6 digits when it is huge.

    ``1e+300`` and ``1.11111e+160`` instead of hundreds of digits; an integer of up to 17
    digits (every ``seq``) is exact. Anything else is its ``str``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        # Decimal, not float: an int can be beyond any float (and past str()'s 4300 digits).
        if abs(value) < _EXACT_INT:
            return str(value)
        mantissa, _, exponent = f"{Decimal(value):.6g}".partition("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{exponent}"  # as float's .6g: 1e+20
    return repr(value) if abs(value) < _EXACT_INT else f"{value:.6g}"


def _beyond(value: Any, bound: str, limit: Any) -> str:
    """``value`` in as few digits (6 or more) as still show it past ``limit``: 1500.6."""
    if not isinstance(value, float) or not isinstance(limit, int | float):
        return number_text(value)
    for digits in range(6, 18):
        text = f"{value:.{digits}g}"
        if _VIOLATES[bound](float(text), limit):
            return text
    return repr(value)


_VIOLATES: dict[str, Callable[[float, float], bool]] = {
    "ge": lambda value, limit: value < limit,
    "gt": lambda value, limit: value <= limit,
    "le": lambda value, limit: value > limit,
    "lt": lambda value, limit: value >= limit,
}


def json_kind(value: Any) -> str:
    """JSON name of a value's type, for error messages: ``a string``, ``null``, ``a number``.

    One function for every detail that names a type (a payload that is not an object, a
    field of the wrong type), so none says Python's ``str`` or ``NoneType``.
    """
    match value:
        case None:
            return "null"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string"
        case list():
            return "an array"
        case dict():
            return f"an object with the fields {', '.join(value) or 'none'}"
    return type(value).__name__
