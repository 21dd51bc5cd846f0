"""The house's rules, read from the source: the layout `docs/design.md` draws stays true.

- no import circle among replay's modules, counting imports inside functions and under
  `TYPE_CHECKING` (a circle that only works because an import is deferred is still a knot);
- at most about twenty entries at the top of `replay/`, one per stage of the flow;
- no module over 400 lines and no function over 60;
- every module says what it is for (a docstring);
- nothing imports the CLI or the pytest plugin, and the tests import public modules only
  (no name with a leading underscore in a `replay` import).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "replay"
MAX_TOP_ENTRIES = 21
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imported(path: Path, name: str) -> Iterator[str]:
    """Every replay module `path` imports, wherever the import statement is."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in _modules() else base


def _resolve(name: str) -> str | None:
    while name:
        if name in _modules():
            return name
        name = name.rpartition(".")[0]
    return None


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in _modules().items():
        targets = {_resolve(imported) for imported in _imported(path, name)}
        graph[name] = {target for target in targets if target and target != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_module_imports_another_that_imports_it_back() -> None:
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    # The positive control: a circle through a deferred import is found.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_the_top_of_the_package_is_one_entry_per_stage() -> None:
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    assert len(entries) <= MAX_TOP_ENTRIES, entries


def test_no_module_is_over_400_lines_and_no_function_over_60() -> None:
    long_modules = {
        name: lines
        for name, path in _modules().items()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    long_functions = {
        f"{name}:{node.lineno} {node.name}": lines
        for name, path in _modules().items()
        for node in ast.walk(_tree(path))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (lines := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert long_modules == {}
    assert long_functions == {}


def test_every_module_says_what_it_is_for() -> None:
    silent = [name for name, path in _modules().items() if not ast.get_docstring(_tree(path))]
    assert silent == []


def test_nothing_imports_the_cli_or_the_plugin() -> None:
    shells = ("replay.cli", "replay.plugin")
    offenders = {
        name: sorted(target for target in targets if target.startswith(shells))
        for name, targets in _graph().items()
        if not name.startswith(shells)
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_tests_import_public_modules_only() -> None:
    private: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("replay"):
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            for name in names:
                parts = name.split(".")
                hidden = any(part.startswith("_") for part in parts[1:])
                if parts[0] == "replay" and hidden and name != "replay.__version__":
                    private.setdefault(path.name, []).append(name)
    assert private == {}
