"""A callable's base gets base's fixtures: the values, at --gpuperf-compare's REF, of the
fixtures whose code changed.

The base revision's test body runs with head's fixture values (the same inputs), except where
a fixture's own code differs at REF: a conftest.py fixture that builds the callable's launch
count or buffer size, a module-scoped fixture two directories up. With head's value there the
pair would time head's slow fixture against itself and pass. So a fixture is made again at
REF when the file that defines it, or a repository module that file imports, differs there;
and so is every fixture of the test that asks for one made again (with head's unchanged
function, given base's values). Its function is found in the module loaded from REF's tree
under the loader of callable_base.py (the same name in the module, unwrapped as far as head's
own is from pytest's decorator: `__wrapped__`, which pytest 8.0-9.x set), called with its
arguments resolved the same way (`request`: head's; gpu_bench: the capturing bench). A yield
fixture is advanced once, and finished when the test ends (its callable may be called again by
the confirmation round), or at once when the base cannot be had.

What cannot be made at REF is a reason for no base, in one line: a parametrized fixture
(`request.param` belongs to head's test item), a fixture defined in a class, one that extends
a fixture of the same name, an async fixture, an argument head's test has no value for, or
a fixture that fails at REF.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_gpuperf.session.base_tree import BaseTree
from pytest_gpuperf.session.callable_code import is_user_file, user_modules


@dataclass(frozen=True)
class FixtureSpec:
    """One fixture the test uses, as the pytest layer describes it (no pytest types): the
    function pytest calls for it, the fixtures it asks for, whether its value comes from
    `request.param` for this test, whether it asks for a fixture of its own name (an
    override that extends another)."""

    name: str
    function: Callable[..., Any]
    argnames: tuple[str, ...] = ()
    scope: str = "function"
    parametrized: bool = False
    extends: bool = False

    @property
    def file(self) -> Path | None:
        """The file that defines the fixture's function (None: not a Python function)."""
        code = getattr(getattr(self.function, "__func__", self.function), "__code__", None)
        name = getattr(code, "co_filename", "")
        return Path(name).resolve() if name and not name.startswith("<") else None

    def stand_in(self) -> ModuleType | None:
        """A module with the name, file and package of the fixture's module, read from the
        function's globals: pytest keeps one `conftest` in sys.modules of several, so the
        module is not looked up by name."""
        globals_ = getattr(getattr(self.function, "__func__", self.function), "__globals__", {})
        file = globals_.get("__file__")
        if not isinstance(file, str):
            return None
        made = ModuleType(str(globals_.get("__name__", "")))
        made.__file__ = file
        made.__package__ = globals_.get("__package__")
        return made


class NoBaseFixture(Exception):
    """A fixture whose value at REF cannot be made (its words: why, one line)."""


def user_fixtures(specs: Sequence[FixtureSpec], toplevel: Path) -> list[FixtureSpec]:
    """The fixtures the repository defines (not pytest's, not an installed plugin's)."""
    return [s for s in specs if s.file is not None and is_user_file(s.file, toplevel)]


def to_remake(
    specs: Sequence[FixtureSpec], changed: frozenset[Path], toplevel: Path
) -> dict[str, bool]:
    """{name: whether its code changed} of the fixtures made again at REF: those whose file,
    or a repository module it imports, differs (True: base's function), and those that ask
    for one of them (False: head's own function, with base's values)."""
    remade: dict[str, bool] = {}
    for spec in user_fixtures(specs, toplevel):
        module = spec.stand_in()
        reach = set(user_modules(module, toplevel).values()) if module is not None else set()
        if spec.file is not None and (reach | {spec.file}) & changed:
            remade[spec.name] = True
    grew = True
    while grew:
        grew = False
        for spec in specs:
            asks = (a for a in spec.argnames if a != spec.name)
            if spec.name not in remade and any(a in remade for a in asks):
                remade[spec.name] = False
                grew = True
    return remade


class BaseFixtures:
    """The fixtures of one base load made at REF, and how to finish the yield ones."""

    def __init__(
        self,
        specs: Sequence[FixtureSpec],
        remade: Mapping[str, bool],
        head_values: Mapping[str, Any],
        *,
        tree: BaseTree,
        request: Any,
        swap: Callable[[Any], Any],
    ) -> None:
        self._specs = {s.name: s for s in specs}
        self._remade = remade
        self._head = head_values
        self._tree = tree
        self._request = request
        self._swap = swap  # head's gpu_bench becomes the capturing bench
        self.values: dict[str, Any] = {}
        self._open: list[tuple[str, Any]] = []  # (name, generator) of yield fixtures

    def make(self) -> dict[str, Any]:
        """Every fixture made again, by name (under callable_base.py's loader)."""
        for name in self._remade:
            self._value(name, ())
        return dict(self.values)

    def finish(self) -> str:
        """Finish the yield fixtures, last made first; "" or the first failure in one line."""
        problems = []
        while self._open:
            name, generator = self._open.pop()
            try:
                next(generator)
            except StopIteration:
                continue
            except KeyboardInterrupt:
                raise
            except BaseException as failure:  # the user's teardown at REF
                problems.append(
                    f"fixture {name!r} at {self._tree.ref}, tearing down: {one_line(failure)}"
                )
                continue
            generator.close()
            problems.append(f"fixture {name!r} at {self._tree.ref} yields more than once")
        return problems[0] if problems else ""

    def _value(self, name: str, chain: tuple[str, ...]) -> Any:
        if name in self.values:
            return self.values[name]
        if name == "request":
            return self._request
        if name not in self._remade:
            if name not in self._head:
                asker = chain[-1] if chain else "the test"
                raise NoBaseFixture(
                    f"fixture {asker!r} at {self._tree.ref} asks for {name!r}, which head's "
                    "test does not use"
                )
            return self._swap(self._head[name])
        if name in chain:
            raise NoBaseFixture(f"fixture {name!r} at {self._tree.ref} asks for itself")
        spec = self._specs[name]
        if spec.parametrized:
            raise NoBaseFixture(
                f"fixture {name!r} changed, and its value comes from request.param, which "
                "belongs to head's test: it cannot be made again at the base"
            )
        if spec.extends:
            raise NoBaseFixture(
                f"fixture {name!r} changed, and it extends a fixture of the same name: it "
                "cannot be made again at the base"
            )
        function = self._definition(spec) if self._remade[name] else spec.function
        if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
            raise NoBaseFixture(f"fixture {name!r} changed and is async: not made at the base")
        arguments = {p: self._value(p, (*chain, name)) for p in _asked(function)}
        try:
            if inspect.isgeneratorfunction(function):
                generator = function(**arguments)
                value = next(generator)
                self._open.append((name, generator))
            else:
                value = function(**arguments)
        except (KeyboardInterrupt, NoBaseFixture):
            raise
        except BaseException as failure:  # the user's fixture at REF: a reason, one line
            raise NoBaseFixture(
                f"fixture {name!r} at {self._tree.ref}: {one_line(failure)}"
            ) from None
        self.values[name] = value
        return value

    def _definition(self, spec: FixtureSpec) -> Callable[..., Any]:
        """The fixture's function at REF: the same name in its module at REF, unwrapped as
        head's is from the object its module holds."""
        function = spec.function
        where = f"fixture {spec.name!r}"
        if inspect.ismethod(function) or "." in function.__qualname__:
            raise NoBaseFixture(
                f"{where} changed and is defined in a class or a function: "
                "not made again at the base"
            )
        name = function.__qualname__
        steps = _unwrap_steps(function.__globals__.get(name), function)
        file = spec.file
        base_path = self._tree.source_for(file)[0] if file is not None else None
        if steps is None or file is None or base_path is None:
            raise NoBaseFixture(f"{where}: its function is not found in its module")
        module = load_module_file(str(function.__globals__.get("__name__")), base_path)
        found: Any = getattr(module, name, None)
        for _ in range(steps):
            found = getattr(found, "__wrapped__", None)
        if not callable(found):
            relative = file.relative_to(self._tree.toplevel or file.parent).as_posix()
            raise NoBaseFixture(
                f"{where} ({name}) is not defined in {relative} at {self._tree.ref}"
            )
        return found


def _unwrap_steps(held: Any, function: Any, most: int = 4) -> int | None:
    """How many `__wrapped__` links lead from what the module holds to the function pytest
    calls (1 for pytest's own decorator, 8.0-9.x); None when none does."""
    for steps in range(most + 1):
        if held is function:
            return steps
        held = getattr(held, "__wrapped__", None)
        if held is None:
            return None
    return None


def _asked(function: Callable[..., Any]) -> list[str]:
    """The parameters a fixture or test asks values for, as pytest reads them: those without
    a default, not *args or **kwargs."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.kind in kinds and p.default is inspect.Parameter.empty
    ]


def load_module_file(name: str, path: Path) -> ModuleType:
    """The module of file `path` (REF's tree) under `name` in sys.modules (head's is set
    aside by the loader meanwhile), loaded once per base load: whatever import mode pytest
    used for head's."""
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path.name} at the base")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def one_line(failure: BaseException) -> str:
    text = " ".join(str(failure).split())
    return f"{type(failure).__name__}: {text}" if text else type(failure).__name__


__all__ = [
    "BaseFixtures",
    "FixtureSpec",
    "NoBaseFixture",
    "load_module_file",
    "one_line",
    "to_remake",
    "user_fixtures",
]
