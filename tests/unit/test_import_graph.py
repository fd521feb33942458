"""No module of pytest_gpuperf imports itself back; each folder imports only the layers below.

A circle of imports is a layering mistake that a function-level import only hides: the two
modules are one unit split across two files, and each can only be read with the other open.
An import made for the type checker alone (`if TYPE_CHECKING:`) is no different to the reader
(and to mypy), so it counts too. The walk is static (`ast`), so it sees the imports a run never
reaches.

The folders of the package are its layers (docs/architecture.md); LAYERS orders them from the
top (the commands, then the pytest layer) to the bottom (the runtimes, then errors.py), and an
import may only point down. The package's own `__init__` (the library's front door: lazy names
for users, and `__version__`) stands outside the order; the circle check still covers it.
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


def _imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under `node`, at any depth: functions, methods and
    `if TYPE_CHECKING:` bodies too."""
    for child in ast.walk(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child


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
    """Which modules of the package each of its modules imports (for the run or the checker)."""
    modules = modules_of(package_dir)
    graph: Graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[name] = set()
        for statement in _imports(tree):
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
    # -> a (absolute, in the else of a TYPE_CHECKING guard); c -> d and e -> a are imports for
    # the type checker alone, and count as much
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
    assert graph["pkg.c"] == {"pkg.a", "pkg.d"}
    assert graph["pkg.d"] == {"pkg.c"}
    assert graph["pkg.e"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.c", "pkg.d", "pkg.sub.b"]]


# The layers, top to bottom: a module may import its own layer and those below it, never one
# above. A name at the top level of the package is a layer of its own (a folder, or a module).
LAYERS: list[set[str]] = [
    {"bisect", "history", "merge"},  # the `python -m` commands
    {"plugin"},  # the only layer that knows pytest
    {"session"},  # one process's view of the device: the fixture, the library's front door
    {"static"},  # the static gate (compiled code objects, no GPU)
    {"config"},  # options, parsing, the frozen settings
    {"report"},  # renderers of a run's results
    {"explain"},  # why a measurement is what it is: code facts, the profiler's counters
    {"gate"},  # what a measurement means for its test
    {"baseline"},  # stored baselines: the model, the files
    {"engine"},  # the measurement: sampling, timing, statistics, result values
    {"simulate"},  # the simulated device (a runtime backend) and users' kernel models
    {"runtime"},  # the vendor-neutral device interface and its backends
    {"errors"},  # the exceptions and the stop a SIGTERM raises
]


def layer_of(module: str) -> str | None:
    """The top-level name of the package `module` lives under (None for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def upward_imports(graph: Graph, layers: list[set[str]]) -> list[str]:
    """Every import that points to a layer above its module's, as 'module -> target'."""
    rank = {name: position for position, names in enumerate(layers) for name in names}
    found = []
    for module, targets in sorted(graph.items()):
        source = layer_of(module)
        if source is None:
            continue
        for target in sorted(targets):
            layer = layer_of(target)
            if layer is None or layer == source:
                continue
            if rank[layer] <= rank[source]:
                found.append(f"{module} -> {target}")
    return found


def test_every_top_level_name_is_placed_in_one_layer():
    package_dir = Path(pytest_gpuperf.__file__).parent
    names = {
        path.stem if path.suffix == ".py" else path.name
        for path in package_dir.iterdir()
        if path.name != "__init__.py" and (path.suffix == ".py" or (path / "__init__.py").is_file())
    }
    placed = [name for names in LAYERS for name in names]
    assert len(placed) == len(set(placed))
    assert names == set(placed)


def test_the_top_level_shows_the_layers_in_at_most_16_names():
    # the checkout's folder: an installed wheel adds kernels/ (the shipped .hip sources);
    # explain/ (a capability with a layer of its own) made it 16
    package_dir = Path(__file__).resolve().parents[2] / "pytest_gpuperf"
    entries = [path.name for path in package_dir.iterdir() if path.name != "__pycache__"]
    assert len(entries) <= 16, sorted(entries)


def test_imports_point_down_the_layers():
    package_dir = Path(pytest_gpuperf.__file__).parent
    found = upward_imports(import_graph(package_dir), LAYERS)
    assert not found, "imports of a layer above:\n" + "\n".join(found)


def test_an_upward_import_is_found(tmp_path):
    package = tmp_path / "pkg"
    for folder in ("top", "bottom"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "top" / "a.py").write_text("from pkg.bottom import b\n")
    (package / "bottom" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.top.a import A\n"
    )

    found = upward_imports(import_graph(package), [{"top"}, {"bottom"}])

    assert found == ["pkg.bottom.b -> pkg.top.a"]
