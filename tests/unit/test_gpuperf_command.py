"""The `gpuperf` console script (commands/gpuperf.py): its list of commands, one line a
command; each command's own parser behind it; a missing or unknown command as one line and
exit 2; and the old `python -m pytest_gpuperf.<command>` paths, which still run the same
command with a notice on stderr. tests/install/test_gpuperf_script.py runs the installed
script from a fresh environment."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.commands.gpuperf import SUBCOMMANDS, main, usage
from pytest_gpuperf.commands.old_paths import notice
from pytest_gpuperf.record.meta import VERSION

REPO = Path(__file__).resolve().parents[2]
NAMES = [command.name for command in SUBCOMMANDS]


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_help_lists_every_command_in_one_line(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: gpuperf COMMAND [ARGS...]\n") and out == usage() + "\n"
    for command in SUBCOMMANDS:
        (line,) = [line for line in out.splitlines() if line.startswith(f"  {command.name} ")]
        assert line.endswith(command.summary) and len(line) <= 100, line
    assert NAMES == ["compare", "history", "publish", "merge", "bisect"]


def test_each_command_is_its_modules_main_with_its_own_parser(capsys):
    for command in SUBCOMMANDS:
        module = importlib.import_module(command.module)
        assert callable(module.main), command
        with pytest.raises(SystemExit) as done:
            main([command.name, "--help"])
        assert done.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: gpuperf {command.name} "), out


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"gpuperf (pytest-gpuperf) {VERSION}\n"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        ([], "gpuperf: error: name a command: compare, history, publish, merge, bisect"),
        (["comapre", "a.json"], "gpuperf: error: no command 'comapre'; did you mean 'compare'?"),
        (["--bogus"], "gpuperf: error: no option '--bogus' (commands: compare, history,"),
        (["\x1b[2Jx"], "gpuperf: error: no command '\\x1b[2Jx' (commands:"),
    ],
)
def test_a_missing_or_unknown_command_is_one_line_and_exit_2(
    argv, words, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.splitlines()) == 1 and out.err.startswith(words), out
    assert list(tmp_path.iterdir()) == []


def test_a_commands_bad_input_keeps_its_line_and_exit_status(tmp_path, capsys):
    assert main(["compare", str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuperf compare: error: ") and len(err.splitlines()) == 1, err
    with pytest.raises(SystemExit) as done:
        main(["merge", "--nope"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuperf merge: error: unrecognized arguments: --nope"), err
    assert list(tmp_path.iterdir()) == []


def test_the_old_paths_are_shims_of_the_commands_and_no_layer():
    """One shim per command under commands/old_paths/, found as pytest_gpuperf.<command>."""
    shims = REPO / "pytest_gpuperf" / "commands" / "old_paths"
    names = {p.stem if p.suffix == ".py" else p.name for p in shims.iterdir()}
    assert names - {"__init__", "__pycache__"} == set(NAMES)
    for name in NAMES:
        old = importlib.import_module(f"pytest_gpuperf.{name}")
        assert Path(old.__file__).is_relative_to(shims), old.__file__
        assert not (REPO / "pytest_gpuperf" / name).exists()
        assert not (REPO / "pytest_gpuperf" / f"{name}.py").exists()
    assert importlib.import_module("pytest_gpuperf.publish.__main__").publish is (
        importlib.import_module("pytest_gpuperf.commands.publish.__main__").publish
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "old.json", "new.json"],  # a missing file: one line, exit 2
        ["merge", "shard-1.json", "--nope"],  # argparse's own refusal, exit 2
        ["history", "baselines/none.toml"],
        ["bisect", "HEAD", "HEAD~1", "--rounds", "0"],
        ["publish", "none.toml", "-o", "page.html"],
    ],
)
def test_an_old_path_says_where_it_went_and_behaves_as_the_command(argv, tmp_path):
    name, rest = argv[0], argv[1:]
    new = run("-m", "pytest_gpuperf.commands", *argv, cwd=tmp_path)
    old = run("-m", f"pytest_gpuperf.{name}", *rest, cwd=tmp_path)

    assert new.returncode == old.returncode == 2, (new, old)
    assert old.stdout == new.stdout
    assert old.stderr == f"{notice(name)}\n{new.stderr}"
    assert new.stderr.startswith(f"gpuperf {name}: error: "), new.stderr
    assert "Traceback" not in old.stderr + new.stderr
    assert list(tmp_path.iterdir()) == []
