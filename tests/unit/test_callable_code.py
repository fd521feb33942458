"""session/callable_code.py's pure parts: which modules a test's Python is made of, which
files are the user's, and the fingerprint that says "same code"."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

import pytest_gpuperf
from pytest_gpuperf.session.callable_code import (
    fingerprint,
    imported_names,
    is_user_file,
    user_modules,
)


def module(name: str, package: str = "") -> types.ModuleType:
    made = types.ModuleType(name)
    made.__package__ = package
    return made


def test_imports_name_every_module_they_may_bind():
    source = """
import a.b.c
from pkg import x, y
from . import sibling
from .sub import thing

def lazy():
    import later
"""
    names = set(imported_names(module("pkg.test_x", "pkg"), source))
    assert {"a", "a.b", "a.b.c", "pkg", "pkg.x", "pkg.y", "later"} <= names
    assert {"pkg.sibling", "pkg.sub", "pkg.sub.thing"} <= names


def test_a_file_that_does_not_parse_names_nothing():
    assert list(imported_names(module("m"), "def (:\n")) == []


def test_user_files_are_the_repositorys_own(tmp_path):
    (tmp_path / "mykern.py").write_text("")
    venv = tmp_path / ".venv" / "lib" / "python3" / "site-packages"
    venv.mkdir(parents=True)
    (venv / "torch.py").write_text("")
    assert is_user_file(tmp_path / "mykern.py", tmp_path)
    assert not is_user_file(venv / "torch.py", tmp_path)
    assert not is_user_file(Path(pytest_gpuperf.__file__), Path(pytest_gpuperf.__file__).parents[1])
    assert not is_user_file(Path(pytest.__file__), tmp_path)


def test_user_modules_follow_imports_through_the_repository_only(tmp_path, monkeypatch):
    """test -> helper -> deep are the user's; numpy is imported but installed; unrelated.py
    is in the repository and imported by nobody."""
    files = {
        "test_x.py": "import helper\nimport numpy\n",
        "helper.py": "from deep import f\n",
        "deep.py": "def f():\n    return 1\n",
        "unrelated.py": "VALUE = 1\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    made = {}
    for name in ("test_x", "helper", "deep", "unrelated"):
        made[name] = module(name)
        made[name].__file__ = str(tmp_path / f"{name}.py")
        monkeypatch.setitem(sys.modules, name, made[name])
    found = user_modules(made["test_x"], tmp_path.resolve())
    assert set(found) == {"test_x", "helper", "deep"}


def test_the_fingerprint_is_of_names_and_bytes_in_any_order():
    one = fingerprint([("a.py", b"x"), ("b.py", b"y")])
    assert one == fingerprint([("b.py", b"y"), ("a.py", b"x")])
    assert one != fingerprint([("a.py", b"x"), ("b.py", b"z")])
    assert one != fingerprint([("a.py", b"x"), ("c.py", b"y")])
    assert one.startswith("py:")


def test_a_module_imported_by_a_literal_name_is_an_import():
    """`importlib.import_module("consts")` in a test body: a module of constants runs once,
    at its first import (maybe in an earlier test), so only its name in the source says the
    test uses it."""
    source = """
import importlib

def test_x():
    consts = importlib.import_module("consts")
    deep = import_module("pkg.deep")
    other = __import__("other")
    dynamic = importlib.import_module(name_from_somewhere)
"""
    names = set(imported_names(module("test_x"), source))
    assert {"consts", "pkg", "pkg.deep", "other"} <= names
