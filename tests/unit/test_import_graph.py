"""No module of pytest_gpuperf imports itself back, not even from inside a function.

A circle of imports is a layering mistake that a function-level import only hides: the two
modules are one unit split across two files, and each can only be read with the other open.
The walk is static (`ast`), so it sees the imports a run never reaches; imports made only for
the type checker (`if TYPE_CHECKING:`) do not count, as nothing runs them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest_gpuperf

Graph = dict[str, set[str]]


def modules_of(package_dir: Path) -> dict[str, Path]:
    """Every module of the package in `package_dir`, by dotted name (a package by its own)."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _run_time_imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under `node`, at any depth (functions and methods too), except
    those of an `if TYPE_CHECKING:` body (its `else:` runs, so it counts)."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
        return
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        for child in node.orelse:
            yield from _run_time_imports(child)
        return
    for child in ast.iter_child_nodes(node):
        yield from _run_time_imports(child)


def _owning_module(name: str, modules: dict[str, Path]) -> str | None:
    """The module of the package that `name` lives in (None: outside the package)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(
    current: str, statement: ast.Import | ast.ImportFrom, modules: dict[str, Path]
) -> set[str]:
    """The modules of the package that one import statement in `current` loads."""
    if isinstance(statement, ast.Import):
        names = [alias.name for alias in statement.names]
    else:
        base = statement.module or ""
        if statement.level:
            package = current.split(".")
            if modules[current].name != "__init__.py":
                package = package[:-1]
            package = package[: len(package) - statement.level + 1]
            base = ".".join([*package, base] if base else package)
        # `from pkg import name`: the submodule when `name` is one, else pkg itself
        names = [
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
            for alias in statement.names
        ]
    owners = {_owning_module(name, modules) for name in names}
    return {owner for owner in owners if owner is not None and owner != current}


def import_graph(package_dir: Path) -> Graph:
    """Which modules of the package each of its modules imports at run time."""
    modules = modules_of(package_dir)
    graph: Graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[name] = set()
        for statement in _run_time_imports(tree):
            graph[name] |= _imported(name, statement, modules)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted:
    every module of one is reachable from every other, so each is one import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def test_pytest_gpuperf_has_no_import_cycle():
    package_dir = Path(pytest_gpuperf.__file__).parent
    found = cycles(import_graph(package_dir))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_walk_finds_a_cycle_of_function_level_imports(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    # a -> sub.b (relative, inside a method) -> c (`from pkg import c`, inside a function)
    # -> a (absolute, in the else of a TYPE_CHECKING guard); d's import is for the checker only
    (package / "a.py").write_text(
        "class A:\n    def f(self):\n        from .sub import b\n        return b\n"
    )
    (package / "sub" / "b.py").write_text("def g():\n    from pkg import c\n    return c\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import pkg.d\nelse:\n"
        "    def h():\n        import pkg.a\n        return pkg.a\n"
    )
    (package / "d.py").write_text("from . import c\n")
    (package / "e.py").write_text(
        "import typing\nif typing.TYPE_CHECKING:\n    from pkg import a\n"
    )

    graph = import_graph(package)

    assert graph["pkg.a"] == {"pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.c"}
    assert graph["pkg.c"] == {"pkg.a"}
    assert graph["pkg.d"] == {"pkg.c"}
    assert graph["pkg.e"] == set()
    assert cycles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
