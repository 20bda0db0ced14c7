"""The reference: the JSON round trip with the entity conventions written in plain Python.

This is deliberately independent of bulkwire's C code: every differential test compares the
C walker against ``json.dumps(json.loads(json.dumps(x, default=entity_default)))``.
"""
from __future__ import annotations

import datetime
import enum
import json
from typing import Any

import numpy as np

NOT_SERIALIZABLE = (" is not JSON serializable (Try add a json default method to convention or "
                    "try to add methods - to_json & classmethod from_json - to object class)")


def entity_default(o: Any) -> Any:
    if isinstance(o, datetime.datetime):
        suffix = "9" if o == datetime.datetime.max else "0"
        return o.strftime("%Y-%m-%dT%H:%M:%S.%f") + suffix
    if isinstance(o, datetime.timedelta):
        seconds = o.seconds
        text = f"{o.days}." if o.days > 0 else ""
        text += f"{seconds // 3600:02}:{seconds // 60 % 60:02}:{seconds % 60:02}"
        if o.microseconds > 0:
            text += f".{o.microseconds:06}"
        return text
    if isinstance(o, enum.Enum):
        return o.value
    to_json = getattr(o, "to_json", None)
    if callable(to_json):
        return to_json()
    attrs = getattr(o, "__dict__", None)
    if attrs:
        return attrs
    if isinstance(o, set):
        return list(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(repr(o) + NOT_SERIALIZABLE)


def round_trip(x: Any, default: Any = entity_default) -> Any:
    return json.loads(json.dumps(x, default=default))


def oracle_bytes(x: Any, default: Any = entity_default) -> bytes:
    return json.dumps(round_trip(x, default)).encode()


def oracle_error(x: Any, default: Any = entity_default) -> BaseException:
    try:
        json.dumps(x, default=default)
    except Exception as exc:  # noqa: BLE001 - the oracle's exception is what we compare
        return exc
    raise AssertionError(f"oracle did not raise for {x!r}")
