"""Entity graph -> JSON: thin, typed wrappers over the C walker in ``bulkwire._core``."""
from __future__ import annotations

from . import _core
# dumps is the C function itself: a Python wrapper and its argument parsing cost more than
# encoding a small document does. Its docstring is in C; _core.pyi gives its types.
from ._core import ENTITY, dumps

# Neither typing nor json is imported with the encoder: the annotations are text, and
# to_builtins imports json when it is first called.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Literal, Union

    DefaultHook = Union[Callable[[Any], Any], None, "_core.EntityConventions"]
    Float32Mode = Literal["widen", "shortest"]


class Encoder(_core.Encoder):
    """Reusable JSON encoder holding its options.

    ``default`` is ``bulkwire.ENTITY`` (the built-in entity conventions), ``None`` (plain
    json: unknown types raise ``TypeError``) or any callable whose result is walked again.

    An encoder holds only its options; each ``encode`` call has its own state, so one
    encoder may be shared by threads and called again from inside a hook.

    >>> Encoder().encode({"a": (1, 2.5)})
    b'{"a": [1, 2.5]}'
    >>> Encoder(float32="shortest").float32
    'shortest'
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return (f"Encoder(default={self.default!r}, ensure_ascii={self.ensure_ascii!r}, "
                f"float32={self.float32!r})")


def to_builtins(obj: Any, *, default: DefaultHook = ENTITY) -> Any:
    """Convert ``obj`` to plain dicts, lists, str, int, float, bool and None, equal to
    ``json.loads(json.dumps(obj, default=...))``.

    It parses the C encoder's output with the C-accelerated ``json.loads``: one walk, no
    second implementation of the conventions to drift from the first.

    >>> to_builtins({1: {2, 3}})
    {'1': [2, 3]}
    """
    import json

    return json.loads(_core.dumps(obj, default=default))
