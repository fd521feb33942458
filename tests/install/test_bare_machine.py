"""The README's test command on a machine with none of the optional toolchains: the test
modules that use clang-19, ROCm's HIP runtime and hiprtc, the ROCm device libraries,
hip-python, NVRTC, headless Chromium or a GPU skip with one line per missing toolchain, and
the run is green; under GPUPERF_REQUIRE_TOOLCHAINS=1 (what .ci/run sets) the same run fails,
naming each.

The toolchains are hidden from a child pytest, not uninstalled: PATH is a folder of links to
every program on this PATH except clang*, chromium and chromedriver, ROCM_PATH is an empty
folder (the plugin then looks for libamdhip64.so there only), a sitecustomize makes `hip`
and `cuda.bindings` fail to import as they do where the [hip] and [cuda] extras are not
installed, and every GPU is made invisible. Only the toolchain-dependent modules run (a few
seconds each run): the rest of the suite needs none of these and runs in the outer session
anyway.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))  # tests/doc_samples.py
from doc_samples import check_sample  # noqa: E402

TOOLCHAIN_MODULES = (
    "tests/browser",
    "tests/compile",
    "tests/gpu",
    "tests/plugin/test_static_gate.py",
    "tests/unit/test_hip_unavailable.py",
)
HIDE_PACKAGES = """\
import sys


class HidePackages:
    \"\"\"Imports of these packages fail as where they are not installed.\"\"\"

    HIDDEN = ("hip", "cuda.bindings")

    def find_spec(self, name, path=None, target=None):
        if any(name == hidden or name.startswith(hidden + ".") for hidden in self.HIDDEN):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, HidePackages())
"""
# One line per missing toolchain in the summary (tests/conftest.py), each with its install.
EXPECTED_SKIPS = (
    r"needs clang-19 \(gfx942 assembly\): clang-19 is not on PATH; "
    r"install: apt-get install clang-19",
    r"needs ROCm 5\.2's HIP runtime with hiprtc: .*; "
    r"install: apt-get install libamdhip64-dev rocm-device-libs",
    r"needs NVRTC: .*; install: pip install -e '\.\[cuda\]'",
    r"needs hip-python: .*; install: pip install -e '\.\[hip\]'",
    r"needs a GPU through the cuda backend: ",
    r"needs headless Chromium driven by selenium \(the dashboard's browser tests\): "
    r"chromium is not on PATH; install: apt-get install chromium chromium-driver; "
    r"pip install -e '\.\[test\]'",
)


@pytest.fixture
def bare_environ(tmp_path: Path) -> dict[str, str]:
    programs = tmp_path / "bin"
    programs.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not directory or not Path(directory).is_dir():
            continue
        for program in Path(directory).iterdir():
            link = programs / program.name
            hidden = program.name.startswith(("clang", "chromium", "chromedriver"))
            if hidden or link.exists() or link.is_symlink():
                continue
            if program.is_file() and os.access(program, os.X_OK):
                link.symlink_to(program)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE_PACKAGES)
    (tmp_path / "rocm").mkdir()
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GPUPERF_"))}
    environ.update(
        PATH=str(programs),
        ROCM_PATH=str(tmp_path / "rocm"),
        PYTHONPATH=os.pathsep.join([str(site), str(REPO)]),
        GPUPERF_CACHE_DIR=str(tmp_path / "cache"),
        GPUPERF_LOCK_DIR=str(tmp_path / "locks"),
        CUDA_VISIBLE_DEVICES="-1",
        HIP_VISIBLE_DEVICES="-1",
        ROCR_VISIBLE_DEVICES="-1",
    )
    return environ


def _counts_and_reasons_elided(text: str) -> str:
    """The counts grow with the suite, and the GPU's reason holds a machine's driver words."""
    text = re.sub(r"^ +\d+ ", "    N ", text, flags=re.M)
    text = re.sub(r"(needs a GPU through the cuda backend: ).*", r"\1...", text)
    return "\n".join(sorted(line for line in text.splitlines() if line.strip()))  # by count


def run_pytest(environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *TOOLCHAIN_MODULES]
    return subprocess.run(
        command, cwd=REPO, env=environ, capture_output=True, text=True, timeout=600, check=False
    )


def summary_lines(stdout: str) -> list[str]:
    section = stdout.split("skipped, by reason", 1)[1]
    return [line.strip() for line in section.splitlines()[1:] if re.match(r"\s+\d+ ", line)]


@pytest.mark.slow  # end to end through child pytests: the slow tier (`-m slow`)
def test_the_toolchain_modules_skip_cleanly_and_fail_under_the_ci_variable(bare_environ):
    # sanity: the hiding works (the child cannot find clang-19 nor import hip-python)
    probe = subprocess.run(
        [sys.executable, "-c", "import shutil; print(shutil.which('clang-19')); import hip"],
        env=bare_environ, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert probe.stdout.startswith("None") and "No module named 'hip'" in probe.stderr

    bare = run_pytest(bare_environ)
    assert bare.returncode == 0, bare.stdout[-4000:] + bare.stderr[-2000:]
    last = bare.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"=+ (\d+ passed, )?\d+ skipped in .*", last), last
    lines = summary_lines(bare.stdout)
    for expected in EXPECTED_SKIPS:  # each missing toolchain is one line, whatever the files
        assert len([line for line in lines if re.match(r"\d+ " + expected, line)]) == 1, (
            expected,
            lines,
        )
    assert "CI sets GPUPERF_REQUIRE_TOOLCHAINS=1" in bare.stdout
    section = bare.stdout.split("skipped, by reason", 1)[0].rsplit("\n", 1)[1]
    section += "skipped, by reason" + bare.stdout.split("skipped, by reason", 1)[1]
    shown = "\n".join(line for line in section.split("\n=", 1)[0].splitlines() if line)
    check_sample("skip-summary", shown, _counts_and_reasons_elided)  # docs/ci.md

    required = run_pytest({**bare_environ, "GPUPERF_REQUIRE_TOOLCHAINS": "1"})
    assert required.returncode == 1, required.stdout[-4000:]
    out = required.stdout
    for expected in [*EXPECTED_SKIPS[:4], EXPECTED_SKIPS[5]]:
        assert re.search(expected + r".*\[GPUPERF_REQUIRE_TOOLCHAINS=1: required here\]", out)
    # a GPU is not a toolchain: CI has none, and its tests still skip there
    assert re.search(r"\d+ needs a GPU through the cuda backend: ", out)
    assert not re.search(r"FAILED tests/gpu/test_cuda_backend\.py", out)
