"""What the simulated device does instead of compiling (simulate/source.py): structure
checks with file:line, the gpuperf-sim directive, and the kernel fingerprint."""

from __future__ import annotations

import pytest

from pytest_gpuperf.errors import CompileError, KernelNotFound
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.simulate import device as sim_module
from pytest_gpuperf.simulate.source import check_source, normalise

SOURCE = """#include "gpuperf.h"

GPUPERF_KERNEL void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { c[i] = a[i] + b[i]; }
}

// gpuperf-sim: efficiency=0.55
GPUPERF_KERNEL void slow_copy(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { b[i] = a[i]; }
}
"""
VECTOR_ADD = KERNELS_DIR / "vector_add.hip"


@pytest.fixture
def sim():
    backend = sim_module.open(0, seed=1)
    yield backend
    backend.close()


# -- compile ---------------------------------------------------------------------------------


def test_compile_reads_kernels_and_the_efficiency_directive(sim, tmp_path):
    path = tmp_path / "kernels.hip"
    path.write_text(SOURCE)
    module = sim.compile(path)
    assert module.source_name == str(path)
    assert list(module.signatures) == ["vector_add", "slow_copy"]
    assert [p.name for p in module.kernel("vector_add").params] == ["a", "b", "c", "n"]
    assert sim.efficiency_of(module.kernel("slow_copy")) == 0.55
    # The seed's 0.7185 is for the plugin's own vector_add, not one of the same name.
    assert sim.efficiency_of(module.kernel("vector_add")) == 0.80
    assert sim.efficiency_of(sim.compile(VECTOR_ADD).kernel("vector_add")) == 0.7185
    with pytest.raises(KernelNotFound, match="slow_copy, vector_add"):
        module.kernel("vector_ad")


BROKEN = {
    "unclosed brace": (
        "#include <hip/hip_runtime.h>\n"
        '#include "gpuperf.h"\n'
        "GPUPERF_KERNEL void k(float* x) {\n"
        "    if (x) { x[0] = 1.0f;\n"
        "}\n",
        3,
    ),
    "stray paren": (
        'extern "C" __global__ void k(float* x) {\n    x[0] = (1.0f));\n}\n',
        2,
    ),
    "no kernel": (
        '#include "gpuperf.h"\n// a comment\nextern "C" void k(float* x) {\n    x[0] = 1;\n}\n',
        3,
    ),
    "kernel not void": ('#include "gpuperf.h"\n\nGPUPERF_KERNEL int k(int* x) { return 0; }\n', 3),
    "missing header": ('#include "gpuperf.h"\n#include "nowhere.h"\n__global__ void k() {}\n', 2),
    "unterminated comment": ("__global__ void k() {}\n/* oops\n", 2),
    "bad directive": ("// gpuperf-sim: efficiency=1.5\n__global__ void k() {}\n", 1),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_sources_fail_with_file_and_line(sim, tmp_path, case):
    text, line = BROKEN[case]
    path = tmp_path / "broken.hip"
    path.write_text(text)
    with pytest.raises(CompileError) as error:
        sim.compile(path)
    assert (error.value.source_path, error.value.line) == (str(path), line)
    assert f"{path}:{line}: " in str(error.value)


def test_braces_in_comments_strings_and_macros_are_not_counted(sim):
    text = (
        '#define OPEN {\n// }}} ((\n/* ) */\nconst char* s = "{(";\n'
        "GPUPERF_KERNEL void k(int n) { char c = '}'; }\n"
    )
    assert list(sim.compile(text).signatures) == ["k"]


def test_a_source_string_is_named_in_errors(sim):
    with pytest.raises(CompileError, match=r"^my_kernel\.hip:1: "):
        sim.compile("__global__ void k( {}", name="my_kernel.hip")


def test_check_source_is_importable_where_it_always_was():
    assert list(check_source(SOURCE, "x.hip")) == ["vector_add", "slow_copy"]


def test_a_source_that_is_not_utf8_is_a_compile_error_naming_the_file(sim, tmp_path):
    path = tmp_path / "latin1.hip"
    path.write_bytes(
        SOURCE.replace("// gpuperf-sim", "// caf\xe9\n// gpuperf-sim").encode("latin-1")
    )
    with pytest.raises(CompileError) as error:
        sim.compile(path)
    assert error.value.source_path == str(path) and error.value.line == 8
    assert "not UTF-8" in str(error.value) and "save the file as UTF-8" in str(error.value)


def test_a_header_that_is_not_utf8_is_named_too(sim, tmp_path):
    (tmp_path / "mine.h").write_bytes(b"// \xff\n#define SCALE 2\n")
    path = tmp_path / "k.hip"
    path.write_text('#include "mine.h"\n__global__ void k(float* x) { x[0] = SCALE; }\n')
    with pytest.raises(CompileError, match=r"mine\.h:1: the source is not UTF-8"):
        sim.compile(path)


def test_an_unreadable_path_is_a_compile_error(sim, tmp_path):
    with pytest.raises(CompileError, match="cannot read the kernel source"):
        sim.compile(tmp_path / "missing.hip")


# -- fingerprints ------------------------------------------------------------------------------


def _fingerprint(sim, text: str, kernel: str = "vector_add", **options) -> str:
    return sim.kernel_fingerprint(sim.compile(text, name="k.hip", **options).kernel(kernel))


def test_normalising_drops_comments_and_layout_but_keeps_tokens_and_strings():
    assert normalise("int  x = 1; // one\n/* two */\tint y;") == "int x=1;int y;"
    assert normalise("c[i] = a[i] + b[i];") == normalise("c[ i ]=a[i]+b[ i ] ;")
    assert normalise("x - -y") != normalise("x--y")
    assert '"a  // b"' in normalise('const char* s = "a  // b";')
    assert normalise("#define N 4\nint x;") != normalise("#define N 4 int x;")


def test_a_comment_or_layout_change_keeps_the_fingerprint(sim):
    reformatted = SOURCE.replace(
        "if (i < n) { c[i] = a[i] + b[i]; }", "if (i < n)\n  {\n c[i] = a[i] + b[i];  // sum\n }"
    )
    commented = "/* licence header */\n" + SOURCE
    base = _fingerprint(sim, SOURCE)
    assert base.startswith("sha256:") and len(base) == len("sha256:") + 64
    assert _fingerprint(sim, reformatted) == _fingerprint(sim, commented) == base


def test_a_body_change_gives_another_fingerprint(sim):
    changed = SOURCE.replace("c[i] = a[i] + b[i];", "c[i] = a[i] - b[i];")
    assert _fingerprint(sim, changed) != _fingerprint(sim, SOURCE)


def test_the_fingerprint_names_the_kernel(sim):
    assert _fingerprint(sim, SOURCE, "vector_add") != _fingerprint(sim, SOURCE, "slow_copy")


def test_options_defines_and_directives_are_part_of_the_code_object(sim):
    base = _fingerprint(sim, SOURCE, "slow_copy")
    assert _fingerprint(sim, SOURCE, "slow_copy", options=("-O2",)) != base
    assert _fingerprint(sim, SOURCE, "slow_copy", defines={"N": 4}) != base
    faster = SOURCE.replace("efficiency=0.55", "efficiency=0.75")
    assert _fingerprint(sim, faster, "slow_copy") != base  # the directive stands for code


def test_the_fingerprint_covers_headers_beside_the_source(sim, tmp_path):
    header, path = tmp_path / "scale.h", tmp_path / "k.hip"
    path.write_text('#include "scale.h"\n__global__ void k(float* x) { x[0] = SCALE; }\n')
    prints = []
    for text in ("#define SCALE 2\n", "// two\n#define SCALE 2\n", "#define SCALE 3\n"):
        header.write_text(text)
        prints.append(sim.kernel_fingerprint(sim.compile(path).kernel("k")))
    assert prints[0] == prints[1] != prints[2]


def test_the_fingerprint_does_not_depend_on_where_the_file_is(sim, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for directory in (one, two):
        directory.mkdir()
        (directory / "k.hip").write_text(SOURCE)
    first, second = (sim.compile(d / "k.hip").kernel("vector_add") for d in (one, two))
    assert sim.kernel_fingerprint(first) == sim.kernel_fingerprint(second)
    other_device = sim_module.open(0, seed=2, device="h100-sxm")
    assert other_device.kernel_fingerprint(
        other_device.compile(one / "k.hip").kernel("vector_add")
    ) == (sim.kernel_fingerprint(first))


def test_plugin_kernels_include_the_portability_header_in_their_code_object(sim):
    module = sim.compile(VECTOR_ADD)
    assert b"#header gpuperf.h" in module.binary
