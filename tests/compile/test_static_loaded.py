"""The facts a save on a real AMD GPU records: read from the code object the HIP runtime
loaded, staged under the names a static run uses, and compared with the static gate's own
clang build as a toolchain change (no GPU here: a clang-19 code object stands in for the
loaded one, which carries the same metadata note)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_gpuperf.gate.static import compile_static, find_clang, kernel_facts
from pytest_gpuperf.gate.static.facts import loaded_kernel_facts
from pytest_gpuperf.gate.static.gate import CHANGED, UNCHANGED, judge_kernel
from pytest_gpuperf.gate.static.run import LaunchLog, StaticRun
from pytest_gpuperf.runtime.compile import KERNELS_DIR

pytestmark = pytest.mark.compile

VECTOR_ADD = KERNELS_DIR / "vector_add.hip"


@pytest.fixture(scope="module")
def build(clang19, tmp_path_factory):
    return compile_static(VECTOR_ADD, "gfx942", clang=find_clang(clang19, "gfx942"))


def test_loaded_facts_agree_with_the_static_build_of_the_same_code_object(build):
    static = kernel_facts(build, "vector_add_vec4", block_threads=128)
    loaded = loaded_kernel_facts(
        build.code_object,
        "vector_add_vec4",
        arch="gfx942:sramecc+:xnack-",
        compiler="hiprtc 6.2.41133",
        block_threads=128,
    )
    assert loaded.arch == "gfx942"
    assert (loaded.compiler, loaded.hip_runtime) == ("hiprtc 6.2.41133", "rocm")
    same = ("vgprs", "agprs", "sgprs", "lds_bytes", "scratch_bytes", "spills", "occupancy",
            "waves_per_simd", "occupancy_limiter", "fingerprint", "block_threads")  # fmt: skip
    assert {k: getattr(loaded, k) for k in same} == {k: getattr(static, k) for k in same}
    assert loaded.calls == ()  # no assembly to read calls from
    # The same bytes are the same code whoever compiled them; a hiprtc build with other
    # code is a change reported with the toolchain, never a failure on the fingerprint.
    check = judge_kernel("vector_add_vec4", static, loaded, source="kernels/vector_add.hip")
    assert check.status == UNCHANGED and check.toolchain_changed
    other = dataclasses.replace(loaded, fingerprint="sha256:other")
    check = judge_kernel("vector_add_vec4", static, other, source="kernels/vector_add.hip")
    assert check.status == CHANGED and not check.fails and check.toolchain_changed


def test_a_gpu_save_stages_the_loaded_code_objects_and_skips_what_is_not_one(build, tmp_path):
    def kernel(name: str, binary: bytes):
        module = SimpleNamespace(
            binary=binary, source_path=VECTOR_ADD, options=(), defines=(("N", "4"),)
        )
        return SimpleNamespace(name=name, module=module)

    amd = kernel("vector_add", build.code_object)
    cubin = kernel("vector_add_nt", b"\x7fELF" + b"\0" * 60)  # not an AMD code object
    log = LaunchLog()
    log.note(amd, 256, 0)
    log.note(cubin, 256, 0)
    session = StaticRun(
        archs=(), rootdir=Path(KERNELS_DIR).parent, baseline_dir=tmp_path, commit=lambda: "c0ffee"
    )
    staged = session.stage_loaded(
        "t.py::test", [(amd, {}), (cubin, {})], log, arch="gfx942", compiler="hiprtc 6.2"
    )
    assert staged == 1
    written, problems = session.flush_saves()
    assert problems == [] and len(written) == 1
    text = (tmp_path / "static" / "gfx942.toml").read_text()
    assert 'name = "vector_add"' in text and 'origin = "loaded"' in text
    assert 'compiler = "hiprtc 6.2"' in text and 'commit = "c0ffee"' in text
    assert 'source = "kernels/vector_add.hip"' in text
