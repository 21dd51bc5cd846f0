"""`Frozen`: the base of replay's few plain immutable value classes.

Made as plain classes, not attrs classes or dataclasses, where making the class would cost
every run's first cassette about 0.5 ms for a value a replay may never make.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["Frozen"]


class Frozen:
    """An immutable value whose fields are named, in order, by `FIELDS`: equal, hashed,
    shown, pickled and copied by them. A subclass declares them as its `__slots__` and sets
    them in its `__init__` with `object.__setattr__`."""

    __slots__ = ()

    FIELDS: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: {type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: {type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{type(self).__name__}({fields})"

    def __reduce__(self) -> tuple[type[Frozen], tuple[Any, ...]]:
        return (type(self), self._values())  # (pickle and copy: no setattr)
