"""Fast constructors for frozen, slotted dataclasses on hot paths.

A frozen dataclass's generated ``__init__`` stores each field with ``object.__setattr__``, which
costs more than a direct slot store. The renderer builds one :class:`Segment` per new
block of every request, and the planner a few records per request; for those classes
:func:`slot_constructor` builds a function that stores the fields through the slots' own
descriptors and returns the same frozen object (equal, same repr, still immutable). Like
:mod:`dataclasses` itself, it generates the function's source once, at import time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["slot_constructor"]

T = TypeVar("T")


def slot_constructor(cls: type[T]) -> Callable[..., T]:
    """A function ``f(*required_fields) -> cls`` that skips the dataclass ``__init__``.

    Args:
        cls: a ``@dataclass(frozen=True, slots=True)`` class without ``__post_init__``.

    Returns:
        ``f`` taking the fields positionally, in declaration order, as the ``__init__`` does;
        an omitted field gets its default (a ``default_factory`` is called per object).

    Raises:
        TypeError: ``cls`` is not a slotted dataclass, or has a ``__post_init__`` (which the
            constructor would skip).
    """
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a slotted dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__")
    fields = dataclasses.fields(cls)
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_MISSING": dataclasses.MISSING}
    params: list[str] = []
    body: list[str] = ["    obj = _new(_cls)"]
    for i, f in enumerate(fields):
        env[f"_set{i}"] = cls.__dict__[f.name].__set__
        if f.default_factory is not dataclasses.MISSING:
            env[f"_factory{i}"] = f.default_factory
            params.append(f"p{i}=_MISSING")
            body.append(f"    _set{i}(obj, _factory{i}() if p{i} is _MISSING else p{i})")
            continue
        if f.default is dataclasses.MISSING:
            params.append(f"p{i}")
        else:
            env[f"_default{i}"] = f.default
            params.append(f"p{i}=_default{i}")
        body.append(f"    _set{i}(obj, p{i})")
    source = f"def new({', '.join(params)}):\n" + "\n".join(body) + "\n    return obj\n"
    exec(source, env)  # source built from the class's own field list, as dataclasses does
    new: Callable[..., T] = env["new"]
    new.__qualname__ = new.__name__ = f"new_{cls.__name__}"
    new.__doc__ = f"``{cls.__name__}(...)`` without the frozen ``__init__`` (see promptcache._slots)."
    return new
