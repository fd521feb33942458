"""The child-process compile and its on-disk cache, with a fake compiler that can misbehave.

The fake is a real module registered in COMPILERS (monkeypatched) and imported by the real
child process, so crashes (os.abort) and hangs happen where a real compiler's would.
"""

from __future__ import annotations

import textwrap
import time

import pytest

from pytest_gpuperf.errors import CompileError
from pytest_gpuperf.runtime import compile as compiling
from pytest_gpuperf.runtime.compile import (
    CompileRequest,
    compile_source,
    error_location,
    local_headers,
    read_source,
)

FAKE_COMPILER = '''
"""A compiler for tests: returns the request as its binary and logs every call."""
import os
import time

from pytest_gpuperf.runtime.compile import CompilerFailed


def version():
    return "fake " + os.environ.get("FAKE_COMPILER_VERSION", "1.0")


def compile(request):
    with open(os.environ["FAKE_COMPILER_CALLS"], "a") as calls:
        calls.write(request.source_name + "\\n")
    if "CRASH" in request.source:
        os.abort()
    if "HANG" in request.source:
        time.sleep(120)
    for number, line in enumerate(request.source.splitlines(), 1):
        if "SYNTAX" in line:
            log = f"{request.source_name}:{number}:9: error: expected ';' after expression\\n"
            raise CompilerFailed("fake compile failed", log)
    binary = "|".join((request.arch, *request.options, request.source)).encode()
    return binary, "fake log: 0 warnings"
'''

GOOD = "GPUPERF_KERNEL void k(float* x) { x[0] = 1.0f; }\n"


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """Registers the fake compiler as "fake"; returns a function counting its calls."""
    (tmp_path / "fake_gpuperf_compiler.py").write_text(FAKE_COMPILER)
    calls = tmp_path / "calls.log"
    calls.touch()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the child imports it too
    monkeypatch.setenv("FAKE_COMPILER_CALLS", str(calls))
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(compiling.COMPILERS, "fake", "fake_gpuperf_compiler")
    return lambda: len(calls.read_text().splitlines())


def request(source: str = GOOD, **changes) -> CompileRequest:
    fields = {"compiler": "fake", "source": source, "source_name": "kernel.hip", "arch": "sm_90"}
    return CompileRequest(**{**fields, **changes})


def test_second_compile_is_a_cache_hit(fake):
    first = compile_source(request())
    second = compile_source(request())
    assert (first.from_cache, second.from_cache) == (False, True)
    assert second.binary == first.binary == b"sm_90|" + GOOD.encode()
    assert second.log == first.log == "fake log: 0 warnings"
    assert first.compiler_version == "fake 1.0"
    assert fake() == 1


@pytest.mark.parametrize(
    "change",
    [
        {"source": GOOD + "// edited\n"},
        {"options": ("-DBLOCK=128",)},
        {"arch": "sm_80"},
        {"headers": (("gpuperf.h", "#define X 2\n"),)},
        {"compiler": "fake", "source_name": "elsewhere.hip"},
    ],
    ids=["source", "options", "arch", "headers", "name"],
)
def test_cache_is_keyed_on_everything_that_changes_the_binary(fake, change):
    compile_source(request())
    again = compile_source(request(**change))
    expected_hit = set(change) == {"compiler", "source_name"}  # the name is only a label
    assert again.from_cache is expected_hit
    assert fake() == (1 if expected_hit else 2)


def test_a_new_compiler_version_recompiles(fake, monkeypatch):
    compile_source(request())
    monkeypatch.setenv("FAKE_COMPILER_VERSION", "2.0")
    assert compile_source(request()).from_cache is False
    assert fake() == 2


def test_use_cache_false_always_compiles(fake):
    compile_source(request(), use_cache=False)
    assert compile_source(request(), use_cache=False).from_cache is False
    assert compile_source(request()).from_cache is False  # nothing was stored either
    assert fake() == 3


def test_syntax_error_gives_the_log_and_the_source_line(fake):
    source = '#include "gpuperf.h"\n\nGPUPERF_KERNEL void k(float* x) {\n  x[0] = 1 SYNTAX\n}\n'
    with pytest.raises(CompileError) as failure:
        compile_source(request(source))
    error = failure.value
    assert (error.source_path, error.line) == ("kernel.hip", 4)
    assert "expected ';' after expression" in error.log
    assert str(error).startswith("kernel.hip:4: fake compile failed")
    assert "--- compiler log ---" in str(error)
    with pytest.raises(CompileError):  # failures are not cached: it compiles again
        compile_source(request(source))
    assert fake() == 2


def test_a_crashing_compiler_fails_one_compile_and_the_session_goes_on(fake):
    with pytest.raises(CompileError) as failure:
        compile_source(request("// CRASH\n" + GOOD))
    message = str(failure.value)
    assert message.startswith("kernel.hip: the fake compiler crashed")
    assert "killed by signal 6" in message and "sm_90" in message
    assert compile_source(request()).binary.startswith(b"sm_90|")


def test_a_hanging_compiler_is_stopped_at_the_time_limit(fake):
    began = time.monotonic()
    with pytest.raises(CompileError, match=r"did not finish within 1 s \(arch sm_90\)"):
        compile_source(request("// HANG\n" + GOOD), timeout_s=1)
    assert time.monotonic() - began < 30
    assert compile_source(request()).from_cache is False


def test_unknown_compiler_is_a_compile_error():
    with pytest.raises(CompileError, match="unknown compiler 'nope'"):
        compile_source(request(compiler="nope"))


@pytest.mark.parametrize(
    "log, where",
    [
        ('kernels/a.hip(12): error: identifier "q" is undefined', ("kernels/a.hip", 12)),
        ("gpuperf.h:7:3: error: unknown type name 'uint5'", ("gpuperf.h", 7)),
        ("x.hip:3:1: warning: unused\nx.hip:9:2: fatal error: 'y.h' file not found", ("x.hip", 9)),
        ("linker says no", (None, None)),
    ],
)
def test_error_location_reads_nvrtc_and_clang_logs(log, where):
    assert error_location(log) == where


# -- sources and their local headers ------------------------------------------------------


def test_read_source_tells_files_from_source_text(tmp_path):
    path = tmp_path / "k.hip"
    path.write_text(GOOD)
    assert read_source(path) == (GOOD, str(path), tmp_path)
    assert read_source(str(path)) == (GOOD, str(path), tmp_path)
    assert read_source(GOOD) == (GOOD, "<string>", None)
    assert read_source(GOOD, "mine.hip")[1] == "mine.hip"
    with pytest.raises(CompileError, match="cannot read the kernel source"):
        read_source(str(tmp_path / "missing.hip"))


def test_local_headers_are_read_recursively_and_shipped_ones_skipped(tmp_path):
    (tmp_path / "a.h").write_text('#include "b.h"\n#define A 1\n')
    (tmp_path / "b.h").write_text("#define B 2\n")
    source = textwrap.dedent("""\
        #include "gpuperf.h"
        #include "a.h"
        #include <hip/hip_runtime.h>
        #include "not_here.h"
    """)
    headers = local_headers(source, tmp_path, {"gpuperf.h"})
    assert headers == (("a.h", '#include "b.h"\n#define A 1\n'), ("b.h", "#define B 2\n"))
    assert local_headers(source, None) == ()


def test_program_output_reads_what_the_compiler_hands_out_in_two_calls():
    """NVRTC's and hiprtc's code and log come through one reader: the size, then a buffer
    to fill; nothing when either call fails or there is nothing (a status, not a crash)."""
    from pytest_gpuperf.runtime.compile import program_log, program_output

    def size_of(status):
        return lambda program: (status, len(program))

    def read(status):
        def fill(program, buffer):
            buffer[:] = program
            return (status,)

        return fill

    assert program_output(b"ELF\0", size_of("ok"), read("ok"), "ok") == ("ok", b"ELF\0")
    assert program_output(b"ELF", size_of("bad"), read("ok"), "ok") == ("bad", b"")
    assert program_output(b"ELF", size_of("ok"), read("bad"), "ok") == ("bad", b"")
    assert program_output(b"", size_of("ok"), read("ok"), "ok") == ("ok", b"")
    assert program_log(b"warning: x\n\0", size_of("ok"), read("ok"), "ok") == "warning: x\n"
    assert program_log(b"\0", size_of("ok"), read("ok"), "ok") == ""
