"""The `gpuperf` console script as a new user gets it: the README's install command, run as
printed in a fresh virtual environment, puts `gpuperf` on that environment's PATH; in a
repository made from docs/quickstart.md's files, two runs on the simulated device write two
real JSON reports and a baseline file, and `gpuperf --help`, `gpuperf compare`, `gpuperf
publish` and `gpuperf history` work on them; the old `python -m pytest_gpuperf.compare`
still runs the same command, with its one-line notice on stderr.

Nothing here imports the plugin from this checkout: every command is a child process of the
fresh environment, with no PYTHONPATH, run from a folder outside the repository.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from fresh_env import clean_environ, make_venv, shell
from test_quickstart import page_files

# End to end through a fresh install and separate processes: the slow tier (`-m slow`).
# One xdist worker runs the module (`--dist loadgroup`): its module fixture is built once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("gpuperf_script")]

REPO = Path(__file__).resolve().parents[2]


def readme_install_command() -> str:
    """The install half of the README's first command (the half before the test run)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    first = re.search(r"^```\w*\n(.*)$", text, re.M)
    assert first is not None
    install, _, _ = first[1].partition(" && ")
    assert install.startswith("python3 -m pip install -e '."), install
    return install


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A fresh environment with the plugin installed by the README's command, in the
    checkout, as a developer runs it."""
    folder = tmp_path_factory.mktemp("fresh")
    venv = make_venv(folder / "venv")
    environ = clean_environ(folder, venv)
    done = shell(readme_install_command(), REPO, environ, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return venv, environ


@pytest.fixture(scope="module")
def runs(venv, tmp_path_factory) -> Path:
    """The quickstart's repository after a save and a second run, each with its JSON report
    (the simulated MI300X: this machine has no GPU)."""
    _, environ = venv
    project = tmp_path_factory.mktemp("user") / "my-kernels"
    for relative, body in page_files().items():
        path = project / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    for command in (
        'git init -q && git add -A && git commit -qm "scale kernel"',
        "pytest -p no:cacheprovider --gpuperf --gpuperf-save tests/perf --gpuperf-json=out/a.json",
        "pytest -p no:cacheprovider --gpuperf tests/perf --gpuperf-json=out/b.json",
    ):
        done = shell(command, project, {**environ, "GPUPERF_SIM_SEED": "1"})
        assert done.returncode == 0, command + "\n" + done.stdout[-3000:] + done.stderr[-2000:]
    return project


def test_the_script_is_the_environments_and_lists_every_command(venv, tmp_path):
    path, environ = venv
    assert shutil.which("gpuperf", path=environ["PATH"]) == str(path / "bin" / "gpuperf")
    done = shell("gpuperf --help", tmp_path, environ)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    listed = re.findall(r"^  (\w+) {2,}\S", done.stdout, re.M)
    assert listed == ["compare", "history", "publish", "merge", "bisect"], done.stdout
    own = shell("gpuperf compare --help", tmp_path, environ)
    assert own.returncode == 0 and own.stdout.startswith("usage: gpuperf compare "), own.stdout
    typo = shell("gpuperf comapre a.json b.json", tmp_path, environ)
    assert typo.returncode == 2 and typo.stdout == "", typo
    assert typo.stderr == (
        "gpuperf: error: no command 'comapre'; did you mean 'compare'? "
        "(commands: compare, history, publish, merge, bisect)\n"
    )


def test_compare_publish_and_history_on_two_real_runs(venv, runs):
    _, environ = venv
    compared = shell("gpuperf compare out/a.json out/b.json", runs, environ)
    assert compared.returncode == 0, compared.stderr
    assert "SIMULATED" in compared.stdout and "1 measurement: " in compared.stdout, compared.stdout
    assert re.search(r"test_scale.*scale.*cold", compared.stdout), compared.stdout

    published = shell(
        "gpuperf publish baselines/mi300x-sim.toml out/a.json out/b.json -o out/page.html",
        runs,
        environ,
    )
    assert published.returncode == 0, published.stderr
    assert published.stdout.startswith("gpuperf: written: out/page.html ("), published.stdout
    page = (runs / "out" / "page.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "tests/perf/test_scale.py" in page

    history = shell("gpuperf history baselines/mi300x-sim.toml --reports out/b.json", runs, environ)
    assert history.returncode == 0, history.stderr
    assert "test_scale" in history.stdout

    merged = shell("gpuperf merge out/a.json", runs, environ)  # not a shard's report
    assert merged.returncode == 2 and merged.stderr.startswith("gpuperf merge: error: ")
    assert len(merged.stderr.splitlines()) == 1, merged.stderr


def test_the_old_module_path_runs_the_command_with_a_notice(venv, runs):
    _, environ = venv
    new = shell("gpuperf compare out/a.json out/b.json --markdown -", runs, environ)
    old = shell(
        "python -m pytest_gpuperf.compare out/a.json out/b.json --markdown -", runs, environ
    )
    assert old.returncode == new.returncode == 0, old.stderr
    assert old.stdout == new.stdout and "| measurement | cache |" in new.stdout
    assert (
        old.stderr
        == (
            "python -m pytest_gpuperf.compare is now `gpuperf compare`; the old path goes away in "
            "the next release\n"
        )
        + new.stderr
    )
    missing = shell("python -m pytest_gpuperf.compare out/a.json out/none.json", runs, environ)
    assert missing.returncode == 2 and missing.stdout == "", missing
    assert missing.stderr.splitlines()[1].startswith("gpuperf compare: error: out/none.json")
    report = json.loads((runs / "out" / "b.json").read_text())
    assert report["results"][0]["measurement"]["simulated"] is True
