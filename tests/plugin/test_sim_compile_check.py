"""A kernel that does not compile fails on the simulated device too, where a clang is at hand
(issue 45 item 10: it passed under --gpuperf with a "no model" warning, since the simulator
reads only a kernel's structure and signature). Without a clang the source is not compiled,
and the module's log says so.
"""

from __future__ import annotations

import pytest

from pytest_gpuperf.gate.static import syntax
from tests import toolchains

ONE_TEST = """
def test_add(gpu_bench):
    add(gpu_bench)
"""


@pytest.fixture
def broken(gp):
    path = gp.write_kernel()
    path.write_text(path.read_text().replace("a[i] + b[i]", "a[i] + flaot(b[i])"))
    gp.test_file(ONE_TEST)
    return gp


def test_a_kernel_that_does_not_compile_fails_with_the_compilers_first_error(
    broken, monkeypatch, tmp_path
):
    toolchains.need("clang-19")
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path / "kernel-cache"))
    for args in (("--gpuperf",), ()):  # measured, and the smoke run without --gpuperf
        result = broken.run(*args)
        result.assert_outcomes(failed=1)
        text = result.stdout.str()
        assert "error: use of undeclared identifier 'flaot'" in text, text
        assert "does not compile (clang 19" in text
        assert "vadd.hip:4: does not compile (clang 19" in text  # file:line, then the error
        assert "--- compiler log ---" in text  # the whole log in the longrepr
        assert "Traceback" not in text


def test_a_kernel_that_compiles_is_checked_once_and_passes(gp, monkeypatch, tmp_path):
    toolchains.need("clang-19")
    cache = tmp_path / "kernel-cache"
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(cache))
    gp.test_file(ONE_TEST)
    gp.run("--gpuperf").assert_outcomes(passed=1)
    assert len(list((cache / "syntax").iterdir())) == 1  # remembered: not checked again


def test_without_a_clang_the_source_is_not_compiled_and_says_so(broken, monkeypatch, tmp_path):
    monkeypatch.setattr(syntax, "syntax_clang", lambda arch=syntax.SYNTAX_ARCH: None)
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path / "kernel-cache"))
    result = broken.run("--gpuperf")
    result.assert_outcomes(passed=1)  # today's behaviour: nothing compiles on the simulator


def test_the_first_error_line_drops_the_location():
    log = "k.hip:4:37: error: use of undeclared identifier 'flaot'\n    4 | ...\n1 error generated"
    assert syntax.first_error(log) == "error: use of undeclared identifier 'flaot'"
    assert syntax.first_error("warning: nothing") == ""


def test_a_header_the_check_does_not_have_is_left_unchecked(gp, monkeypatch, tmp_path):
    """A kernel that includes a toolkit's header (hip/hip_fp16.h) may compile on a GPU: the
    check does not judge it, rather than fail a kernel that is fine."""
    toolchains.need("clang-19")
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path / "kernel-cache"))
    path = gp.write_kernel()
    path.write_text('#include "no_such_toolkit_header.h"\n' + path.read_text())
    assert syntax.check_syntax(path) is None
