"""The names users reach keep working wherever the modules behind them live.

Users reach the package through a few doors: the `pytest11` entry point and `-p` target
(`pytest_gpuperf.plugin`), the library (`import pytest_gpuperf as gp`), the simulated device's
models (`pytest_gpuperf.simulate`), the `gpuperf` commands, and whatever the docs show them
importing. Moving a module between the layer folders must keep every one of them: this file
finds the doors in pyproject.toml and in the docs' own code, not in a list of its own.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_gpuperf
from pytest_gpuperf.commands.gpuperf import SUBCOMMANDS
from pytest_gpuperf.commands.gpuperf import main as gpuperf_main
from pytest_gpuperf.commands.old_paths import notice

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "kernels" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
COMMANDS = [command.name for command in SUBCOMMANDS]


IMPORT_LINE = (
    r"^\s*(from pytest_gpuperf[\w.]* import (?:\([^)]*\)|[^\n]*)|import pytest_gpuperf[\w.]*)"
)


def code_blocks(text: str) -> list[str]:
    """The fenced code blocks of a Markdown text."""
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)


def imports_shown(text: str) -> set[tuple[str, str]]:
    """(module, name) for every `from pytest_gpuperf... import name` a doc's Python shows;
    name is "" for a plain `import pytest_gpuperf...`."""
    found: set[tuple[str, str]] = set()
    for block in code_blocks(text):
        for statement in re.findall(IMPORT_LINE, block, flags=re.M):
            tree = ast.parse(statement.strip())
            node = tree.body[0]
            if isinstance(node, ast.ImportFrom):
                found |= {(node.module or "", alias.name) for alias in node.names}
            elif isinstance(node, ast.Import):
                found |= {(alias.name, "") for alias in node.names}
    return found


def dotted_names_shown(text: str) -> set[str]:
    """Every `pytest_gpuperf.x.y` a doc names in backticks or code (a module or an attribute)."""
    return set(re.findall(r"\bpytest_gpuperf(?:\.[A-Za-z_]\w*)+", text))


def resolve(dotted: str) -> object:
    """The module or attribute `dotted` names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(dotted)


def test_the_entry_point_names_the_plugin_module_and_it_has_the_hooks():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    entry = project["project"]["entry-points"]["pytest11"]["gpuperf"]
    assert entry == "pytest_gpuperf.plugin"
    plugin = importlib.import_module(entry)
    for hook in ("pytest_addoption", "pytest_configure"):
        assert callable(getattr(plugin, hook)), hook


def test_p_loads_the_plugin_by_its_public_name():
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_gpuperf.plugin", "--help"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO / "docs",  # no conftest.py registers the plugin there
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "--gpuperf-save" in done.stdout


def test_the_library_names_resolve_from_the_package():
    for name in pytest_gpuperf.__all__:
        assert getattr(pytest_gpuperf, name) is not None, name


def test_simulate_keeps_its_functions_after_every_module_of_the_device_is_loaded():
    # a submodule named like a public function would replace it on the package once imported
    simulate = importlib.import_module("pytest_gpuperf.simulate")
    for module in sorted((Path(simulate.__file__).parent).glob("*.py")):
        importlib.import_module(f"pytest_gpuperf.simulate.{module.stem}".removesuffix(".__init__"))
    for name in simulate.__all__:
        assert not isinstance(getattr(simulate, name), type(sys)), name
    assert callable(simulate.model) and callable(simulate.register)


def test_the_console_script_is_the_dispatcher():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    module, _, function = project["project"]["scripts"]["gpuperf"].partition(":")
    assert getattr(importlib.import_module(module), function) is gpuperf_main


@pytest.mark.parametrize("command", COMMANDS)
def test_each_gpuperf_command_runs(command):
    done = subprocess.run(
        [sys.executable, "-m", "pytest_gpuperf.commands", command, "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: gpuperf {command} "), done.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_each_old_python_m_path_still_runs_with_its_notice(command):
    """`python -m pytest_gpuperf.<command>` until the next release: the command's help, and
    one line on stderr that says where it went."""
    done = subprocess.run(
        [sys.executable, "-m", f"pytest_gpuperf.{command}", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [notice(command)]
    assert done.stdout.startswith(f"usage: gpuperf {command} "), done.stdout


def test_every_command_the_docs_show_is_one_of_them():
    """The docs show `gpuperf <command>`, never an old `python -m` path (their one mention,
    `python -m pytest_gpuperf.<command>`, names none). A command is a line of a code block,
    or an inline code span, that starts with `gpuperf WORD`; the plugin's own output lines
    (`gpuperf device: ...`, `gpuperf static gate: ...`) are no command."""
    shown, old = set(), set()
    command = r"(?:^\$? ?|`)gpuperf ([a-z]+)\b(?![a-z ]*:)"
    for doc in DOCS:
        text = doc.read_text("utf-8")
        shown |= set(re.findall(command, text, flags=re.M))
        old |= set(re.findall(r"python3? -m (pytest_gpuperf(?:\.\w+)*)", text))
    assert set(COMMANDS) <= shown, set(COMMANDS) - shown
    assert shown <= set(COMMANDS), shown - set(COMMANDS)
    assert old <= {"pytest_gpuperf", "pytest_gpuperf.commands"}, old  # `pytest_gpuperf.<command>`


def test_every_import_the_docs_show_works():
    shown = set()
    for doc in DOCS:
        shown |= {(doc.name, *pair) for pair in imports_shown(doc.read_text("utf-8"))}
    assert len(shown) >= 5  # the README's library example, the simulate and static APIs, ...
    broken = []
    for doc, module, name in sorted(shown):
        try:
            imported = importlib.import_module(module)
            if name:
                getattr(imported, name)
        except (ImportError, AttributeError) as error:
            broken.append(f"{doc}: from {module} import {name}: {error}")
    assert not broken, "\n".join(broken)


def test_every_dotted_name_the_docs_show_resolves():
    shown = set()
    for doc in DOCS:
        shown |= {(doc.name, dotted) for dotted in dotted_names_shown(doc.read_text("utf-8"))}
    assert len(shown) >= 10
    broken = []
    for doc, dotted in sorted(shown):
        try:
            resolve(dotted)
        except (ImportError, AttributeError) as error:
            broken.append(f"{doc}: {dotted}: {error}")
    assert not broken, "\n".join(broken)


def test_a_moved_module_is_caught(tmp_path):
    doc = "```python\nfrom pytest_gpuperf.plugin_state import STATE\n```\n"
    assert imports_shown(doc) == {("pytest_gpuperf.plugin_state", "STATE")}
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("pytest_gpuperf.plugin_state")
    with pytest.raises(AttributeError):
        resolve("pytest_gpuperf.errors.NoSuchError")
