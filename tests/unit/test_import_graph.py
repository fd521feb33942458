"""No module of pytest_gpuperf imports itself back; each folder imports only the layers below.

A circle of imports is a layering mistake that a function-level import only hides: the two
modules are one unit split across two files, and each can only be read with the other open.
An import made for the type checker alone (`if TYPE_CHECKING:`) is no different to the reader
(and to mypy), so it counts too, and so does one made through importlib: a call of
`importlib.import_module` (or `import_module` imported from importlib) or `__import__` with a
literal module name hides the same dependency from the reader; where the name is computed
(`import_module(BACKENDS[name])`), every string constant of the module that names a module of
the package counts as imported for the layers (runtime/__init__.py once reached up into
simulate/ that way). The walk is static (`ast`), so it sees the imports a run never reaches.

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


_IMPORT_FUNCTIONS = ("import_module", "__import__")


def _import_calls(node: ast.AST) -> Iterator[str | None]:
    """For every `importlib.import_module(...)`, `import_module(...)` or `__import__(...)`
    under `node`: the module name when it is a literal string, else None."""
    for child in ast.walk(node):
        if not isinstance(child, ast.Call) or not child.args:
            continue
        function = child.func
        called = function.attr if isinstance(function, ast.Attribute) else None
        if isinstance(function, ast.Name):
            called = function.id
        if called in _IMPORT_FUNCTIONS:
            first = child.args[0]
            literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
            yield str(first.value) if literal else None  # type: ignore[attr-defined]


def _dynamic_imports(node: ast.AST) -> Iterator[tuple[str, int]]:
    """(name, level) of every import call under `node` whose module name is a literal string;
    a relative name ("..session.catalog", resolved against the calling module's package) has
    its dots as the level."""
    for name in _import_calls(node):
        if name is not None:
            yield name.lstrip("."), len(name) - len(name.lstrip("."))


def _named_modules(node: ast.AST, modules: dict[str, Path]) -> Iterator[str]:
    """Every string constant under `node` that is the dotted name of a module of the package
    (a registry such as `{"sim": "pkg.simulate.device"}` that an `import_module(name)` reads)."""
    for child in ast.walk(node):
        if (
            isinstance(child, ast.Constant)
            and isinstance(child.value, str)
            and child.value in modules
        ):
            yield child.value


def _imports_by_computed_name(node: ast.AST) -> bool:
    """Whether `node` calls `import_module` or `__import__` with a name that is not a literal:
    the modules it may load are then the ones its string constants name."""
    return any(name is None for name in _import_calls(node))


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


def _dynamically_imported(
    current: str, name: str, level: int, modules: dict[str, Path]
) -> set[str]:
    """The module of the package that `import_module(name)` in `current` loads (a relative
    name as `from <dots>name import ...` would resolve it)."""
    statement = ast.ImportFrom(module=None, names=[ast.alias(name=name)], level=level)
    if not level:
        statement = ast.Import(names=[ast.alias(name=name)])
    return _imported(current, statement, modules)


def import_graph(package_dir: Path) -> Graph:
    """Which modules of the package each of its modules imports (for the run or the checker)."""
    modules = modules_of(package_dir)
    graph: Graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[name] = set()
        for statement in _imports(tree):
            graph[name] |= _imported(name, statement, modules)
        for target, level in _dynamic_imports(tree):
            graph[name] |= _dynamically_imported(name, target, level, modules)
    return graph


def computed_imports(package_dir: Path) -> Graph:
    """The modules each module may load by a computed name (`import_module(REGISTRY[name])`):
    the modules of the package its string constants name. An over-approximation (a `python -m`
    target named for a child process counts too), so it is held to the layers, not to the
    circle check: inside one layer a registry that loads its entries by name is a dispatch."""
    modules = modules_of(package_dir)
    graph: Graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[name] = set()
        if _imports_by_computed_name(tree):
            graph[name] = set(_named_modules(tree, modules)) - {name}
    return graph


def every_import(package_dir: Path) -> Graph:
    """`import_graph` with the computed-name imports added."""
    graph = import_graph(package_dir)
    for name, targets in computed_imports(package_dir).items():
        graph[name] |= targets
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
    {"commands"},  # the `gpuperf` commands (their old `python -m` paths are shims in it)
    {"plugin"},  # the only layer that knows pytest
    {"explain"},  # why a failure happened: code facts of head and base (reads the session's)
    {"session"},  # one process's view of the device: the fixture, the library's front door
    {"config"},  # options, parsing, the frozen settings
    {"report"},  # renderers of a run's results
    {"gate"},  # what a measurement (or, gate/static/, a code object) means for its test
    {"record"},  # what a run is, once: the verdicts, the JSON report, its one reader
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


def test_the_top_level_shows_the_layers_in_14_names():
    # the checkout's folder: an installed wheel adds kernels/ (the shipped .hip sources).
    # The thirteen layers of LAYERS (the five commands are one folder, commands/, since the
    # `gpuperf` script; their old `python -m` paths are shims inside it, found through the
    # package's __path__) and __init__.py
    package_dir = Path(__file__).resolve().parents[2] / "pytest_gpuperf"
    entries = [path.name for path in package_dir.iterdir() if path.name != "__pycache__"]
    assert len(entries) <= 14, sorted(entries)


def test_imports_point_down_the_layers():
    package_dir = Path(pytest_gpuperf.__file__).parent
    found = upward_imports(every_import(package_dir), LAYERS)
    assert not found, "imports of a layer above:\n" + "\n".join(found)


def test_no_layer_imports_the_package_root():
    """The root (`pytest_gpuperf/__init__.py`, the library's front door) stands above every
    layer and imports some of them: a layer that reads a name from it (`__version__`, now
    record/meta.py's VERSION, which the root re-exports) points up past every layer."""
    package_dir = Path(pytest_gpuperf.__file__).parent
    graph = every_import(package_dir)
    found = [
        m for m, targets in sorted(graph.items()) if layer_of(m) and "pytest_gpuperf" in targets
    ]
    assert not found, f"modules that import the package's root: {found}"


def test_the_two_families_of_explain_never_import_each_other():
    """explain/code/ (what the compiler made of head and base) and explain/counters/ (what the
    profiler counted) are two capabilities that share only explain/__init__.py."""
    package_dir = Path(pytest_gpuperf.__file__).parent
    graph = every_import(package_dir)
    families = ("pytest_gpuperf.explain.code", "pytest_gpuperf.explain.counters")

    def family(module: str) -> str | None:
        return next((f for f in families if module == f or module.startswith(f + ".")), None)

    crossing = [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if family(module) and family(target) and family(module) != family(target)
    ]
    assert all(any(m.startswith(f) for m in graph) for f in families)
    assert crossing == []


def two_layers(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package `pkg` with the layers top/ and bottom/ and `files` (path: text) in them."""
    package = tmp_path / "pkg"
    for folder in ("top", "bottom"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    for relative, text in files.items():
        (package / relative).write_text(text)
    return package


def test_an_upward_import_is_found(tmp_path):
    package = two_layers(
        tmp_path,
        {
            "top/a.py": "from pkg.bottom import b\n",
            "bottom/b.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.top.a import A\n"
            ),
        },
    )

    found = upward_imports(import_graph(package), [{"top"}, {"bottom"}])

    assert found == ["pkg.bottom.b -> pkg.top.a"]


def test_an_upward_import_through_importlib_is_found(tmp_path):
    """simulate/execute.py once reached up into session/catalog.py with
    importlib.import_module("pytest_gpuperf.session.catalog"), which the walk did not see."""
    package = two_layers(
        tmp_path,
        {
            "top/a.py": "A = 1\n",
            "top/c.py": "C = 1\n",
            "top/d.py": "D = 1\n",
            "bottom/b.py": (
                "import importlib\ndef f():\n    return importlib.import_module('pkg.top.a')\n"
            ),
            "bottom/e.py": (
                "from importlib import import_module\n"
                "def g():\n"
                "    return import_module('..top.c', __package__), __import__('pkg.top.d')\n"
            ),
        },
    )

    found = upward_imports(import_graph(package), [{"top"}, {"bottom"}])

    assert found == [
        "pkg.bottom.b -> pkg.top.a",
        "pkg.bottom.e -> pkg.top.c",
        "pkg.bottom.e -> pkg.top.d",
    ]


def test_an_upward_import_through_a_computed_name_is_found(tmp_path):
    """runtime/__init__.py once opened the simulated device with
    importlib.import_module(BACKENDS[name]), BACKENDS naming "pytest_gpuperf.simulate.device":
    a layer above it, hidden behind a name the walk did not follow."""
    package = two_layers(
        tmp_path,
        {
            "top/a.py": "A = 1\n",
            "bottom/c.py": "C = 1\n",
            "bottom/b.py": (
                "import importlib\n"
                "REGISTRY = {'a': 'pkg.top.a', 'c': 'pkg.bottom.c', 'x': 'not.ours'}\n"
                "def f(name):\n    return importlib.import_module(REGISTRY[name])\n"
            ),
            # the same strings without a computed import are only words
            "bottom/d.py": "WORDS = ('pkg.top.a',)\n",
        },
    )

    graph = every_import(package)

    assert graph["pkg.bottom.b"] == {"pkg.top.a", "pkg.bottom.c"}
    assert graph["pkg.bottom.d"] == set()
    assert import_graph(package)["pkg.bottom.b"] == set()  # the literal walk alone misses it
    assert upward_imports(graph, [{"top"}, {"bottom"}]) == ["pkg.bottom.b -> pkg.top.a"]
