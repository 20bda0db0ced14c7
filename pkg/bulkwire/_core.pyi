from typing import Any, Callable, Literal

MAX_DEPTH: int

class EntityConventions: ...

ENTITY: EntityConventions

class Encoder:
    def __init__(
        self,
        *,
        default: Callable[[Any], Any] | EntityConventions | None = ...,
        ensure_ascii: bool = ...,
        float32: Literal["widen", "shortest"] = ...,
    ) -> None: ...
    @property
    def default(self) -> Callable[[Any], Any] | EntityConventions | None: ...
    @property
    def ensure_ascii(self) -> bool: ...
    @property
    def float32(self) -> str: ...
    def encode(self, obj: Any) -> bytes: ...

def dumps(
    obj: Any,
    *,
    default: Callable[[Any], Any] | EntityConventions | None = ...,
    ensure_ascii: bool = ...,
    float32: Literal["widen", "shortest"] = ...,
) -> bytes: ...
