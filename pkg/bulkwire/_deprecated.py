"""Old spellings that keep working: every one warns with a ``DeprecationWarning`` that names
its new spelling, pointing at the code that used it.

- :func:`warn_deprecated`: the warning itself, for any old value or name.
- :func:`renamed_keywords`: a call's old keyword arguments mapped to their new names.
- :func:`renamed_fields`: a dataclass whose fields were renamed (constructor keywords,
  attributes and pickles of the old spelling).
- :func:`renamed_module_attributes`: a module ``__getattr__`` for renamed constants.
"""
from __future__ import annotations

import functools
import sys
import warnings
from typing import Any, Callable, Dict, Mapping, TypeVar

__all__ = ["warn_deprecated", "renamed_keywords", "renamed_fields", "renamed_module_attributes"]

T = TypeVar("T", bound=type)


def warn_deprecated(old: str, new: str, stacklevel: int = 2) -> None:
    """Warns ``"<old> is deprecated: use <new>"`` (``DeprecationWarning``). ``stacklevel``
    counts from the function that calls this one: 1 is that function, 2 (the default) its
    caller.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_deprecated("f(a=1)", "f(b=1)")
    >>> str(caught[0].message)
    'f(a=1) is deprecated: use f(b=1)'
    """
    warnings.warn(f"{old} is deprecated: use {new}", DeprecationWarning, stacklevel=stacklevel + 1)


def renamed_keywords(renamed: Mapping[str, str], what: str, kwargs: Dict[str, Any],
                     stacklevel: int = 2) -> Dict[str, Any]:
    """``kwargs`` with each old keyword of ``renamed`` (old name -> new name) under its new
    name, each one found warned about (as a keyword of ``what`` when given; ``stacklevel``
    as :func:`warn_deprecated`'s). Both spellings at once is a ``TypeError`` naming both.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     renamed_keywords({"a": "b"}, "f", {"a": 1, "c": 2})
    {'c': 2, 'b': 1}
    """
    for old, new in renamed.items():
        if old in kwargs:
            if new in kwargs:
                raise TypeError(f"{what or 'the call'} got both {new} and {old} (the deprecated "
                                f"spelling of {new}): pass {new} alone")
            warn_deprecated(f"{what}({old}=...)" if what else f"{old}=...", f"{new}=...",
                            stacklevel + 1)
            kwargs[new] = kwargs.pop(old)
    return kwargs


def _old_attribute(cls_name: str, old: str, new: str) -> property:
    def get(self: Any) -> Any:
        warn_deprecated(f"{cls_name}.{old}", f"{cls_name}.{new}")
        return getattr(self, new)

    def set(self: Any, value: Any) -> None:  # a frozen class refuses it before this runs
        warn_deprecated(f"{cls_name}.{old}", f"{cls_name}.{new}")
        setattr(self, new, value)
    return property(get, set, doc=f"Deprecated spelling of :attr:`{new}`.")


def renamed_fields(**renamed: str) -> Callable[[T], T]:
    """Class decorator for a dataclass whose fields were renamed (``old=new``): its
    constructor still takes each old keyword (:func:`renamed_keywords`) and reading the old
    attribute reads the new one, both with a warning; a pickle whose state has an old name
    loads into the new one. ``dataclasses.replace``, equality and hashing see only the new
    fields.
    """
    def decorate(cls: T) -> T:
        init = cls.__init__
        name = cls.__name__

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **renamed_keywords(renamed, name, kwargs))

        def __setstate__(self: Any, state: Dict[str, Any]) -> None:
            # a pickle made before the rename: its values under the new names
            self.__dict__.update({renamed.get(key, key): value for key, value in state.items()})

        setattr(cls, "__init__", __init__)
        setattr(cls, "__setstate__", __setstate__)
        for old, new in renamed.items():
            setattr(cls, old, _old_attribute(name, old, new))
        return cls
    return decorate


def renamed_module_attributes(module: str, renamed: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module`` (its ``__name__``) under which each old name
    of ``renamed`` (old -> new) reads the new one, with a warning; any other missing name is
    the usual ``AttributeError``."""
    def __getattr__(attribute: str) -> Any:
        new = renamed.get(attribute)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {attribute!r}")
        warn_deprecated(f"{module}.{attribute}", f"{module}.{new}")
        return getattr(sys.modules[module], new)
    return __getattr__
