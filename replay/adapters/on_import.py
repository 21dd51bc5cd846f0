"""Patching a library as its import ends (`replay.adapters.patch`'s patches of the other clients).

A session patches httpx2, aiohttp and requests only once they are imported: importing them
to patch them would cost some 120 ms in a program that uses none of them. One not imported
yet cannot have been used; if it is imported while the patches are on, a meta path finder
catches its import and patches it as the import ends. It finds the library's spec with the
other finders and wraps the loader for that one import: the module gets its own loader back
before it runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

__all__ = ["PatchOnImport"]


class PatchOnImport:
    """A meta path finder: each library of `pending` (its name: what patches it) imported
    while it is in `sys.meta_path` is patched by `patch(what)`, under `lock`, as its import
    ends."""

    def __init__(self, patch: Callable[[str], None], lock: AbstractContextManager[Any]) -> None:
        self.pending: dict[str, str] = {}
        self._patch = patch
        self._lock = lock

    def start(self) -> None:
        """Watch the imports of the pending libraries (if any)."""
        if self.pending and self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def stop(self) -> None:
        """Forget the pending libraries and stop watching."""
        self.pending.clear()
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.pending:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = None if finder is self or find is None else find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if hasattr(spec.loader, "exec_module"):
            spec.loader = _PatchingLoader(spec.loader, name, self)
        return spec

    def imported(self, name: str) -> None:
        """`name` has just been imported: patch it, if it is still pending (the patches
        may have come off meanwhile)."""
        if name not in self.pending:  # not waiting for the lock then: whoever holds it may
            return  # be waiting for this very import to end (a session patching it)
        with self._lock:
            what = self.pending.pop(name, None)
            if what is not None:
                self._patch(what)


class _PatchingLoader:
    """A library's loader that has it patched once it has run."""

    def __init__(self, loader: Any, name: str, finder: PatchOnImport) -> None:
        self.loader, self.name, self.finder = loader, name, finder

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__spec__.loader = module.__loader__ = self.loader
        self.loader.exec_module(module)
        self.finder.imported(self.name)
