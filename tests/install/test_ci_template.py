"""docs/ci/gpuperf-user-repo.yml, the workflow users copy into their repository, run step by
step as GitHub Actions runs it, against a scratch repository made from docs/quickstart.md's
files, on the simulated device (this machine has no GPU), through the whole flow docs/ci.md
describes:

1. a push to main: the refresh job saves the baselines three times and opens the one pull
   request with them (a stand-in `gh` records the call); the maintainer merges it;
2. a feature branch adds a test and saves its baseline, and its pull request's gate job
   installs the plugin at the pinned release, gates head against base, writes the job
   summary and leaves the reports for the artifact;
3. another refresh on main, merged meanwhile, changed the same baseline file: the branch
   takes both with docs/ci.md's three-way `gpuperf merge`, and its tests still pass.

Each job runs in a fresh clone of the scratch repository's origin (what actions/checkout
gives); a step's `run:` is run by bash -e, word for word, with the workflow's, the job's and
the step's `env:`. The `uses:` steps other than the checkout (the caches, the artifact
upload) are GitHub's own and not run; the artifact's path is checked instead. The test
changes only two of the template's variables: GPUPERF_PACKAGE (its pinned tag, from a clone
of this checkout's HEAD) and GPUPERF_OPTIONS (--gpuperf-backend=sim for --gpuperf-require=hip).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fresh_env import GIT_IDENTITY, clean_environ, shell
from test_quickstart import page_files

yaml = pytest.importorskip("yaml", reason="needs PyYAML (the [test] extra)")

# End to end through fresh installs and separate processes: the slow tier (`-m slow`).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "docs" / "ci" / "gpuperf-user-repo.yml"
CI_PAGE = REPO / "docs" / "ci.md"
RESOLVE_SECTION = "### A feature pull request and the refresh changed one baseline file"
# What GitHub puts in the template's `${{ ... }}` of an `env:` value (never in a script).
EXPRESSIONS = {
    "github.event.pull_request.base.ref": "main",
    "github.token": "token-of-the-test",
}
FAKE_GH = """#!/bin/bash
# The GitHub CLI as the refresh step uses it: `pr list` prints the open pull request's number
# (none until `pr create`), and every call is logged with the token it was given.
echo "GH_TOKEN=$GH_TOKEN $*" >> "$GH_LOG"
case "$1 $2" in
  "pr list") [ -f "$GH_STATE" ] && cat "$GH_STATE"; exit 0 ;;
  "pr create") echo 7 > "$GH_STATE"; echo "https://github.example/user/my-kernels/pull/7" ;;
  *) echo "gh (test): unexpected call: $*" >&2; exit 1 ;;
esac
"""
NEW_TEST = """import numpy as np

N = 4 * 1024 * 1024


def test_scale_small(gpu_bench):
    kernel = gpu_bench.kernel("kernels/scale.hip", "scale")
    x = np.random.default_rng(1).random(N, dtype=np.float32)
    dx, dy = gpu_bench.to_device(x), gpu_bench.empty(N)
    gpu_bench(kernel, grid=N // 256, block=256, args=(dx, dy, 2.0, N), reads=(x,), writes=(x,))
    np.testing.assert_array_equal(gpu_bench.from_device(dy, np.float32, N), 2 * x)
"""


def workflow() -> dict[str, Any]:
    return yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))


def resolve_commands() -> str:
    """docs/ci.md's commands for a baseline file both sides changed (its section's block)."""
    section = CI_PAGE.read_text(encoding="utf-8").split(RESOLVE_SECTION, 1)[1]
    return section.split("```", 2)[1].split("\n", 1)[1]


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_IDENTITY}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def expand(value: Any) -> str:
    """An `env:` value with GitHub's expressions filled in (an unknown one fails the test)."""

    def known(match: re.Match[str]) -> str:
        assert match[1] in EXPRESSIONS, f"the test does not know ${{{{ {match[1]} }}}}"
        return EXPRESSIONS[match[1]]

    return re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", known, str(value))


class Runner:
    """A self-hosted runner with no GPU: each job in a fresh clone of `origin`."""

    def __init__(self, folder: Path, origin: Path, overrides: dict[str, str]) -> None:
        self.folder, self.origin, self.overrides, self.jobs = folder, origin, overrides, 0
        tools = folder / "tools"
        tools.mkdir()
        gh = tools / "gh"
        gh.write_text(FAKE_GH)
        gh.chmod(gh.stat().st_mode | stat.S_IXUSR)
        self.gh_log, self.gh_state = folder / "gh.log", folder / "gh.state"
        environ = clean_environ(folder)
        self.environ = {
            **environ,
            "PATH": f"{tools}{os.pathsep}{environ['PATH']}",
            "GH_LOG": str(self.gh_log),
            "GH_STATE": str(self.gh_state),
            "GPUPERF_SIM_SEED": "1",
            "CI": "true",
            "GITHUB_ACTIONS": "true",
        }

    def run(self, job: str, event: str, ref: str) -> Path:
        """Run `job` for `event` on `ref`; its workspace, with the job summary beside it."""
        self.jobs += 1
        flow = workflow()
        spec = flow["jobs"][job]
        assert set(self.overrides) <= set(flow["env"]), "the test overrides only the template's"
        workspace = self.folder / f"job-{self.jobs}-{job}"
        summary = self.folder / f"job-{self.jobs}-summary.md"
        summary.touch()
        environ = {
            **self.environ,
            **{key: expand(value) for key, value in flow["env"].items()},
            **self.overrides,
            **{key: expand(value) for key, value in spec.get("env", {}).items()},
            "GITHUB_EVENT_NAME": event,
            "GITHUB_REF_NAME": ref if event != "pull_request" else "7/merge",
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_RUN_ID": str(self.jobs),
            "GITHUB_WORKSPACE": str(workspace),
        }
        for step in spec["steps"]:
            uses = step.get("uses", "")
            if uses.startswith("actions/checkout@"):
                depth = step.get("with", {}).get("fetch-depth", 1)
                shallow = ["--depth", str(depth)] if depth else []
                url = self.origin.as_uri()
                git(self.folder, "clone", "--quiet", *shallow, "--branch", ref, url, workspace.name)
                environ["GITHUB_SHA"] = git(workspace, "rev-parse", "HEAD")
            elif uses.startswith("actions/upload-artifact@"):
                kept = workspace / step["with"]["path"]
                assert kept.is_dir() and any(kept.iterdir()), f"no artifact at {kept}"
            elif uses:
                assert uses.startswith("actions/cache@"), uses
            else:
                script = step["run"]
                assert "${{" not in script, "an expression in a script: GitHub pastes it raw"
                env = {**environ, **{k: expand(v) for k, v in step.get("env", {}).items()}}
                done = subprocess.run(
                    ["bash", "-e", "-c", script], cwd=workspace, env=env,
                    capture_output=True, text=True, timeout=1200,
                )  # fmt: skip
                assert done.returncode == 0, (
                    f"{job}: {step.get('name')}: exit {done.returncode}\n"
                    f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
                )
        return workspace


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> str:
    """The template's package line for a clone of this checkout's HEAD, tagged as the
    release the template pins."""
    from pytest_gpuperf.record.meta import VERSION

    line = workflow()["env"]["GPUPERF_PACKAGE"]
    pinned = re.fullmatch(r"pytest-gpuperf\[(hip|cuda)\] @ git\+https://\S+@(v[\w.]+)", line)
    assert pinned, line
    assert pinned[2] == f"v{VERSION}", "the template pins this release's tag"
    clone = tmp_path_factory.mktemp("release") / "pytest-gpuperf.git"
    git(clone.parent, "clone", "--quiet", "--bare", str(REPO), str(clone))
    git(clone, "tag", pinned[2], "HEAD")
    return f"pytest-gpuperf[{pinned[1]}] @ git+file://localhost{clone}@{pinned[2]}"


def test_the_template_runs_every_script_the_test_runs():
    """Every step either runs here or is one of GitHub's actions the test accounts for."""
    flow = workflow()
    assert set(flow["jobs"]) == {"gate", "refresh-baselines"}
    scripts = [step for job in flow["jobs"].values() for step in job["steps"] if "run" in step]
    assert len(scripts) == TEMPLATE.read_text().count("run: |") == 6
    assert flow["jobs"]["gate"]["if"] == (
        "github.event_name == 'pull_request' && "
        "github.event.pull_request.head.repo.full_name == github.repository"
    )
    assert flow["jobs"]["refresh-baselines"]["if"] == "github.event_name != 'pull_request'"
    assert flow["jobs"]["refresh-baselines"]["permissions"] == {
        "contents": "write",
        "pull-requests": "write",
    }
    assert "pip install -e" not in TEMPLATE.read_text()  # the plugin at a release, not a checkout


def test_the_gate_and_the_baseline_refresh_in_a_scratch_repository(release, tmp_path):
    dev = tmp_path / "my-kernels"
    for relative, body in page_files().items():
        (dev / relative).parent.mkdir(parents=True, exist_ok=True)
        (dev / relative).write_text(body)
    (dev / ".github" / "workflows").mkdir(parents=True)
    (dev / ".github" / "workflows" / "gpuperf.yml").write_text(TEMPLATE.read_text())
    git(dev, "init", "--quiet", "--initial-branch=main")
    git(dev, "add", "-A")
    git(dev, "commit", "--quiet", "-m", "scale kernel and the gpuperf workflow")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(dev), str(origin))
    git(dev, "remote", "add", "origin", str(origin))
    git(dev, "fetch", "--quiet", "origin")
    runner_folder = tmp_path / "runner"
    runner_folder.mkdir()
    overrides = {"GPUPERF_PACKAGE": release, "GPUPERF_OPTIONS": "--gpuperf-backend=sim"}
    runner = Runner(runner_folder, origin, overrides)
    baseline = Path("baselines") / "mi300x-sim.toml"

    # 1. A push to main: three saves, one pull request from the refresh branch.
    first = runner.run("refresh-baselines", "push", "main")
    assert [p.name for p in sorted((first / "out").glob("save-*.json"))] == [
        "save-1.json",
        "save-2.json",
        "save-3.json",
    ]
    assert "baselines/ changed" in (runner_folder / "job-1-summary.md").read_text()
    calls = runner.gh_log.read_text().splitlines()
    assert calls[0].startswith("GH_TOKEN=token-of-the-test pr list --head gpuperf/refresh")
    assert calls[1].startswith(
        "GH_TOKEN=token-of-the-test pr create --head gpuperf/refresh-baselines --base main"
    )
    refresh = "origin/gpuperf/refresh-baselines"
    git(dev, "fetch", "--quiet", "origin")
    assert git(dev, "diff", "--name-only", "origin/main", refresh) == str(baseline)
    # the maintainer reviews and merges it
    git(dev, "merge", "--quiet", "--ff-only", refresh)
    git(dev, "push", "--quiet", "origin", "main")
    runner.gh_state.unlink()  # merged: no open pull request
    saves_after_first = entry_saves(dev / baseline)
    assert saves_after_first == {"tests/perf/test_scale.py::test_scale": 3}

    # 2. A feature branch adds a test and saves its baseline; its pull request is gated.
    git(dev, "checkout", "--quiet", "-b", "small")
    (dev / "tests" / "perf" / "test_small.py").write_text(NEW_TEST)
    venv_bin = first / ".gpuperf-venv" / "bin"  # a developer's environment with the plugin
    developer = {**runner.environ, "PATH": f"{venv_bin}{os.pathsep}{runner.environ['PATH']}"}
    saved = shell(
        "pytest -p no:cacheprovider --gpuperf --gpuperf-save --gpuperf-backend=sim "
        "tests/perf -k small",
        dev,
        developer,
    )
    assert saved.returncode == 0, saved.stdout[-3000:] + saved.stderr[-2000:]
    git(dev, "add", "tests", "baselines")
    git(dev, "commit", "--quiet", "-m", "scale: a small case, with its baseline")
    git(dev, "push", "--quiet", "origin", "small")
    gated = runner.run("gate", "pull_request", "small")
    report = (gated / "out" / "gpuperf.json").read_text()
    assert '"simulated": true' in report and "test_scale_small" in report
    assert (gated / "out" / "junit.xml").is_file()
    assert (runner_folder / "job-2-summary.md").read_text().startswith("<!-- pytest-gpuperf -->")

    # 3. Another refresh on main is merged meanwhile: both changed the baseline file.
    runner.run("refresh-baselines", "workflow_dispatch", "main")
    git(dev, "fetch", "--quiet", "origin")
    # rebuilt from main's HEAD: the refresh branch never needs a merge of its own
    assert git(dev, "rev-parse", f"{refresh}~1") == git(dev, "rev-parse", "origin/main")
    git(dev, "checkout", "--quiet", "main")
    git(dev, "merge", "--quiet", "--ff-only", refresh)
    git(dev, "push", "--quiet", "origin", "main")
    git(dev, "checkout", "--quiet", "small")

    merging = subprocess.run(
        ["git", "merge", "--no-ff", "--no-commit", "origin/main"],
        cwd=dev, env={**os.environ, **GIT_IDENTITY}, capture_output=True, text=True,
    )  # fmt: skip
    # git merges the file's text (or stops on it); docs/ci.md's commands replace it with the
    # three-way merge of its entries either way
    assert merging.returncode in (0, 1), merging.stderr
    resolved = shell(resolve_commands(), dev, developer)
    assert resolved.returncode == 0, resolved.stdout + resolved.stderr
    git(dev, "add", "baselines")
    git(dev, "commit", "--quiet", "--no-edit")
    assert entry_saves(dev / baseline) == {
        "tests/perf/test_scale.py::test_scale": 6,  # main's refreshes
        "tests/perf/test_small.py::test_scale_small": 1,  # the branch's save
    }
    again = shell(
        "pytest -p no:cacheprovider --gpuperf --gpuperf-backend=sim tests/perf", dev, developer
    )
    assert again.returncode == 0, again.stdout[-3000:]
    assert "2 passed" in again.stdout, again.stdout[-3000:]


def entry_saves(path: Path) -> dict[str, int]:
    """Each entry's test id and how many saves its history holds."""
    from pytest_gpuperf.baseline import BaselineStore

    loaded = BaselineStore(path.parent).load(path.stem)
    return {entry.test_id: len(entry.saves) for entry in loaded.entries.values()}
