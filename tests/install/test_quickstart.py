"""docs/quickstart.md as a new user follows it: the page's install line run as printed in a
fresh virtual environment (the repository URL is this checkout's), the page's files written
into a fresh repository and every one of its "Run it" commands run there exactly as
printed (this machine has no GPU: the page's pytest.ini falls back to the simulated device),
and the page's kernel compiled by NVRTC.

Nothing here imports the plugin from this checkout: the suite runs from an installed copy, in
a directory outside the repository, as someone else's project would. The fresh environment
downloads the plugin's dependencies (CI has the package index; so does a developer's machine).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# End to end through separate processes: the slow tier (`-m slow`; CI runs it).
# One xdist worker runs the module (`--dist loadgroup`): its module fixture is built once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("quickstart")]

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "quickstart.md"

# "`path` (words...):" then a blank line and a fenced block: a file of the example repository.
FILE_BLOCK = re.compile(
    r"^`(?P<path>[\w./-]+)`(?:[^\n]*\n)*?[^\n]*:\n\n```[\w+]*\n(?P<body>.*?)^```$", re.M | re.S
)


def page_files() -> dict[str, str]:
    return {m["path"]: m["body"] for m in FILE_BLOCK.finditer(PAGE.read_text())}


def page_install_lines() -> list[str]:
    section = PAGE.read_text().split("## Install", 1)[1]
    block = section.split("```", 2)[1]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


# The clone on this machine the page's install line names: the test puts this checkout there.
CLONE_PATH = "/path/to/pytest-gpuperf"


def clone_install_line() -> str:
    """The page's install line for a clone on this machine (git+file://localhost/...)."""
    (line,) = [line for line in page_install_lines() if "git+file://" in line]
    return line


def page_commands() -> list[str]:
    section = PAGE.read_text().split("## Run it", 1)[1]
    block = section.split("```", 2)[1]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_page_lists_the_files_and_commands_this_test_runs():
    assert set(page_files()) == {
        "pytest.ini",
        "kernels/scale.hip",
        "kernels/common.h",
        "tests/perf/conftest.py",
        "tests/perf/test_scale.py",
    }
    # every command the page shows; test_the_quickstart_runs_on_the_simulated_device runs
    # each of them in this order, so a command added to the page must be added there
    assert page_commands() == [
        'git init && git add -A && git commit -m "scale kernel"',
        "pytest tests/perf",
        "pytest --gpuperf tests/perf",
        "pytest --gpuperf --gpuperf-save tests/perf",
        'git add baselines && git commit -m "scale baseline"',
        "pytest --gpuperf tests/perf",
        "pytest --gpuperf --gpuperf-compare=HEAD tests/perf",
    ]
    assert page_install_lines()[0] == "pip install 'pytest-gpuperf[hip] @ git+<repository URL>'"
    assert CLONE_PATH in clone_install_line()
    assert "not on the package index" in PAGE.read_text()
    # the fallback that makes the page's commands do something on a machine with no GPU
    assert "gpuperf_backend = hip,cuda,sim" in page_files()["pytest.ini"]
    assert "addopts = --strict-markers" in page_files()["pytest.ini"]  # a misspelt min_bw


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The plugin's wheel, built from this checkout and installed (without its dependencies,
    which this environment has) into a folder of its own."""
    wheels = tmp_path_factory.mktemp("wheels")
    target = tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", str(wheels), str(REPO)], check=True, timeout=600
    )
    (wheel,) = wheels.glob("pytest_gpuperf-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True)
    return target


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "my-kernels"
    for relative, body in page_files().items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    return root


def run(installed: Path, project: Path, command: str) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "GPUPERF_")) and key != "PYTHONPATH"
    }
    env.update(
        PYTHONPATH=str(installed),
        GPUPERF_CACHE_DIR=str(project.parent / "cache"),
        GPUPERF_LOCK_DIR=str(project.parent / "locks"),
        GPUPERF_SIM_SEED="1",
        COLUMNS="100",
    )
    if not command.startswith("pytest "):  # git, as a shell runs the page's line
        env.update(
            GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
            GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com",
        )  # fmt: skip
        return subprocess.run(
            ["bash", "-c", command], cwd=project, env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *command.split()[1:]]
    return subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=600)


def test_the_wheel_is_what_runs(installed, project):
    done = run(installed, project, "pytest --version -VV")
    assert done.returncode == 0, done.stderr
    probe = subprocess.run(
        [sys.executable, "-c", "import pytest_gpuperf.plugin as p; print(p.__file__)"],
        cwd=project,
        env={"PYTHONPATH": str(installed), "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(probe.stdout.strip()).is_relative_to(installed)
    assert (installed / "pytest_gpuperf" / "kernels" / "gpuperf.h").is_file()


def test_the_quickstart_runs_on_the_simulated_device(installed, project):
    """Every command of "Run it", in order, exactly as printed (issue 45 item 14: the page's
    fifth command failed in a fresh repository, and only four were run)."""
    (init, smoke_cmd, gated_cmd, save_cmd, commit_cmd, again_cmd, compare_cmd) = page_commands()

    def on_sim(command: str) -> subprocess.CompletedProcess[str]:
        return run(installed, project, command)  # exactly as printed

    made = on_sim(init)
    assert made.returncode == 0, made.stdout + made.stderr
    smoke = on_sim(smoke_cmd)
    # no GPU here: the page's pytest.ini falls back to the simulated device, loudly
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    assert "1 passed" in smoke.stdout and "SIMULATED" in smoke.stdout, smoke.stdout
    gated = on_sim(gated_cmd)
    assert gated.returncode == 0, gated.stdout + gated.stderr
    assert "SIMULATED" in gated.stdout and "1 passed" in gated.stdout
    saved = on_sim(save_cmd)
    assert saved.returncode == 0, saved.stdout + saved.stderr
    assert "NOTE: saved" not in saved.stdout  # the kernel was committed first
    baseline = project / "baselines" / "mi300x-sim.toml"
    assert "tests/perf/test_scale.py::test_scale" in baseline.read_text()
    committed = on_sim(commit_cmd)
    assert committed.returncode == 0, committed.stdout + committed.stderr
    again = on_sim(again_cmd)
    assert again.returncode == 0 and "1 passed" in again.stdout, again.stdout + again.stderr
    # The user's own kernel got the user's model (80% of peak), not one of the plugin's
    # kernels that happen to share the name `scale`.
    assert re.search(r"scale\s+cold\s.*\s7\d\.\d%", again.stdout), again.stdout
    compared = on_sim(compare_cmd)
    assert compared.returncode == 0 and "1 passed" in compared.stdout, (
        compared.stdout + compared.stderr
    )

    # A slowdown: the model now streams at 60% of peak, as a slower kernel would on a GPU.
    conftest = project / "tests" / "perf" / "conftest.py"
    conftest.write_text(conftest.read_text().replace("efficiency=0.8", "efficiency=0.6"))
    slower = on_sim(again_cmd)
    assert slower.returncode == 1, slower.stdout
    assert "regressed" in slower.stdout and "baselines/mi300x-sim.toml" in slower.stdout

    # On a GPU runner a missing GPU fails instead of skipping to green.
    required = run(installed, project, "pytest --gpuperf --gpuperf-require=gpu tests/perf")
    assert required.returncode == 1 and "no test ran" in required.stdout, required.stdout
    assert "--gpuperf-require=gpu needs a real GPU" in required.stdout


def test_the_install_line_works_as_printed_in_a_fresh_environment(project, tmp_path):
    """The page's install line for a clone on this machine, word for word but for the
    clone's path (this checkout's committed HEAD, through git as pip fetches any repository),
    with the pip a new virtual environment starts with (23.2 with Python 3.11 refused the
    `git+file:///...` a user writes for a local clone: the page says why it is
    file://localhost/); then the page's first two pytest commands with that environment's pytest,
    which finds the plugin by its entry point."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    line = clone_install_line().replace(CLONE_PATH, REPO.as_posix())
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "GPUPERF_", "VIRTUAL_ENV")) and key != "PYTHONPATH"
    }
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(venv),
        GPUPERF_CACHE_DIR=str(tmp_path / "cache"),
        GPUPERF_LOCK_DIR=str(tmp_path / "locks"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        # A CI container's checkout belongs to another user: git (run by pip) would refuse
        # to read it ("dubious ownership") without this, as for any repository URL one trusts
        GIT_CONFIG_COUNT="1",
        GIT_CONFIG_KEY_0="safe.directory",
        GIT_CONFIG_VALUE_0="*",
    )
    installed = subprocess.run(
        ["bash", "-c", line], env=env, capture_output=True, text=True, timeout=1200
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import hip, pytest_gpuperf; print('ok')"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert probe.stdout.strip() == "ok", probe.stderr  # the [hip] extra came with it
    for command in [c for c in page_commands() if c.startswith("pytest ")][:2]:
        done = subprocess.run(
            ["bash", "-c", command], cwd=project, env=env, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 passed" in done.stdout and "SIMULATED" in done.stdout, done.stdout


@pytest.mark.compile
def test_the_quickstart_kernel_compiles_with_nvrtc(project, tmp_path, monkeypatch):
    """The page's kernel, with its relative header, through a real compiler (the wheel's
    NVRTC): plain HIP source, no plugin header, extern "C"."""
    from pytest_gpuperf.errors import CompileError
    from pytest_gpuperf.runtime import cuda_compiler
    from pytest_gpuperf.runtime.compile import (
        CompileRequest,
        compile_source,
        local_headers,
        portability_headers,
        read_source,
    )

    try:
        cuda_compiler.version()
    except CompileError as missing:
        pytest.fail(f"NVRTC is part of the test install ([cuda] extra): {missing}")
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path / "cache"))
    text, name, directory = read_source(project / "kernels" / "scale.hip")
    shipped = portability_headers()
    local = local_headers(text, directory, {n for n, _ in shipped})
    assert [n for n, _ in local] == ["common.h"]
    request = CompileRequest("nvrtc", text, name, "sm_90", (), (*shipped, *local))
    assert b"scale\0" in compile_source(request, use_cache=False).binary
