"""The hip backend, unchanged, on an NVIDIA GPU through the HIP-over-CUDA shim (tests/hipshim).

hip-python loads libamdhip64.so and libhiprtc.so by name, symbol by symbol; the shim
implements the HIP and hiprtc calls the backend makes on top of the CUDA driver and NVRTC.
So `open_backend("hip")` compiles, allocates, copies, launches and times real kernels, and
these tests check that it does so correctly: every kernel in kernels/ compiles through
hiprtc, every catalog kernel gives NumPy's answer, errors arrive as the right exceptions,
device matching says the device is not an MI300X, and the hip backend measures the same
efficiency as the cuda backend (docs/hip-on-cuda.md says what this does and does not prove).

The hip backend points hip-python at $ROCM_PATH/lib once per process and cannot switch
afterwards (runtime/hip_compiler.py), so the hip side runs in a child process: this file run
as a script (`python tests/gpu/test_hip_shim.py TASK`) with ROCM_PATH set to the shim's
folder. The child prints one JSON line; the tests judge it here.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.toolchains import GPU, need, skip_or_fail

REPO = Path(__file__).resolve().parents[2]
SHIM_DIR = REPO / "tests" / "hipshim"
DEFAULT_SHIM_ROOT = SHIM_DIR / "build" / "rocm"
SHIM_ROOT_ENV = "GPUPERF_HIPSHIM_ROOT"  # a shim built elsewhere (a ROCM_PATH-shaped folder)
BACKEND_SOURCES = ("pytest_gpuperf/runtime/hip.py", "pytest_gpuperf/runtime/hip_compiler.py")

# Catalog sizes: a small odd one (tails, one odd-length row) and a mid-sized one.
CASE_SIZES = (1001, 2**20 + 3)
SEED_N = 32 * 2**20  # the MI300X blog post's 32M-element vector add
AGREEMENT = 0.02  # the hip and cuda backends' efficiencies must agree within 2%
COMPARE_ROUNDS = 3
GRAPH_N = 2**16  # 768 KB moved: about 1 us hot on an H100, where the launch gap shows
CHILD_TIMEOUT_S = 400

# hip-python's name -> the symbol it loads, where HIP 6 versioned the ABI.
VERSIONED_SYMBOLS = {
    "hipGetDeviceProperties": "hipGetDevicePropertiesR0600",
    "hipChooseDevice": "hipChooseDeviceR0600",
}
# Calls the backend makes only for AMD devices, which the shim never is (it would have to
# claim an AMD name): hip.py reads hipDeviceProp_t.gcnArchName only when the device's name
# is an AMD one, and takes "sm_XY" from the compute capability otherwise.
AMD_ONLY_CALLS = {"hipGetDeviceProperties"}

# hipDeviceAttribute_t name -> CU_DEVICE_ATTRIBUTE_ name: the shim must answer these as the
# CUDA driver does (it maps hip-python's numbers to CUDA's).
ATTRIBUTE_PAIRS = {
    "hipDeviceAttributeMultiprocessorCount": "MULTIPROCESSOR_COUNT",
    "hipDeviceAttributeL2CacheSize": "L2_CACHE_SIZE",
    "hipDeviceAttributeWarpSize": "WARP_SIZE",
    "hipDeviceAttributeMaxThreadsPerBlock": "MAX_THREADS_PER_BLOCK",
    "hipDeviceAttributeMaxSharedMemoryPerBlock": "MAX_SHARED_MEMORY_PER_BLOCK",
    "hipDeviceAttributeComputeCapabilityMajor": "COMPUTE_CAPABILITY_MAJOR",
    "hipDeviceAttributeComputeCapabilityMinor": "COMPUTE_CAPABILITY_MINOR",
    "hipDeviceAttributeClockRate": "CLOCK_RATE",
    "hipDeviceAttributeMemoryClockRate": "MEMORY_CLOCK_RATE",
    "hipDeviceAttributeMemoryBusWidth": "GLOBAL_MEMORY_BUS_WIDTH",
    "hipDeviceAttributeMaxThreadsPerMultiProcessor": "MAX_THREADS_PER_MULTIPROCESSOR",
    "hipDeviceAttributeMaxRegistersPerMultiprocessor": "MAX_REGISTERS_PER_MULTIPROCESSOR",
    "hipDeviceAttributeMaxBlocksPerMultiProcessor": "MAX_BLOCKS_PER_MULTIPROCESSOR",
    "hipDeviceAttributeSharedMemPerMultiprocessor": "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    "hipDeviceAttributeMaxSharedMemoryPerMultiprocessor": "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    "hipDeviceAttributePciBusId": "PCI_BUS_ID",
    "hipDeviceAttributeMaxBlockDimX": "MAX_BLOCK_DIM_X",
    "hipDeviceAttributeMaxGridDimX": "MAX_GRID_DIM_X",
}
# hip.hipError_t values the shim's table (tests/hipshim/hipshim.h) relies on.
HIP_ERROR_VALUES = {
    "hipErrorInvalidValue": 1,
    "hipErrorOutOfMemory": 2,
    "hipErrorNotInitialized": 3,
    "hipErrorNoDevice": 100,
    "hipErrorInvalidImage": 200,
    "hipErrorInvalidHandle": 400,
    "hipErrorNotFound": 500,
    "hipErrorNotReady": 600,
    "hipErrorLaunchFailure": 719,
    "hipErrorUnknown": 999,
}


# =========================================================================================
# The child: runs with the shim on its library path, prints one JSON line.
# =========================================================================================


def _child_device() -> dict[str, Any]:
    """Device facts through the hip backend, the cuda backend and hip-python directly."""
    from cuda.bindings import driver
    from hip import hip

    from pytest_gpuperf.runtime import open_backend
    from pytest_gpuperf.runtime.devices import match_device
    from pytest_gpuperf.session.device import device_count

    hip_backend = open_backend("hip")  # first: it binds hip-python to $ROCM_PATH/lib
    cuda_backend = open_backend("cuda")
    counts = {"hip": device_count("hip"), "cuda": device_count("cuda")}
    hip_match, cuda_match = match_device(hip_backend.info), match_device(cuda_backend.info)
    attributes = {}
    for hip_name, cu_name in ATTRIBUTE_PAIRS.items():
        status, via_hip = hip.hipDeviceGetAttribute(getattr(hip.hipDeviceAttribute_t, hip_name), 0)
        err, via_cuda = driver.cuDeviceGetAttribute(
            getattr(driver.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{cu_name}"), 0
        )
        attributes[hip_name] = {
            "hip": int(via_hip) if status == hip.hipError_t.hipSuccess else f"{status.name}",
            "cuda": int(via_cuda) if err == driver.CUresult.CUDA_SUCCESS else f"{err.name}",
        }
    return {
        "hip_info": _info_dict(hip_backend.info),
        "cuda_info": _info_dict(cuda_backend.info),
        "hip_match": {"key": hip_match.spec.key, "how": hip_match.how,
                      "warning": hip_match.warning, "peak_bps": hip_match.spec.peak_bps},
        "cuda_match": {"key": cuda_match.spec.key, "peak_bps": cuda_match.spec.peak_bps},
        "attributes": attributes,
        "error_values": {name: int(getattr(hip.hipError_t, name)) for name in HIP_ERROR_VALUES},
        "counts": counts,
    }  # fmt: skip


def _info_dict(info: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(info)


def _child_kernels() -> dict[str, Any]:
    """Compile every kernels/*.hip, look up every kernel, run every catalog case."""
    import numpy as np

    from pytest_gpuperf.runtime import open_backend
    from pytest_gpuperf.runtime.compile import KERNELS_DIR
    from pytest_gpuperf.session.catalog import KERNELS, bind

    backend = open_backend("hip")
    compiled: dict[str, Any] = {}
    modules = {}
    for path in sorted(KERNELS_DIR.glob("*.hip")):
        try:
            module = backend.compile(path)
            modules[path.name] = module
            compiled[path.name] = {
                name: module.kernel(name).resources.summary() for name in sorted(module.signatures)
            }
        except Exception as failure:  # reported per file, judged by the test
            compiled[path.name] = f"{type(failure).__name__}: {failure}"

    cases: dict[str, str] = {}
    for name, entry in KERNELS.items():
        for size in CASE_SIZES:
            label = f"{name}[{size}]"
            try:
                module = modules[entry.file]
                case = entry.make_case(size, np.random.default_rng(size))
                launches = [(module.kernel(name), case, None)]
                launches += [
                    (module.kernel(follow.name), follow.case, follow.case.args)
                    for follow in case.follow_ups
                ]
                first_args = _to_device(backend, case.args)
                for kernel, part, raw_args in launches:
                    args = (
                        first_args
                        if raw_args is None
                        else _to_device(backend, bind(raw_args, first_args))
                    )
                    backend.launch(kernel, part.grid, part.block, args)
                    backend.synchronize()
                    for index in part.outputs:
                        host = part.args[index]
                        got = args[index].download(host.dtype)[: host.size]
                        np.testing.assert_allclose(
                            got, part.expected[index], rtol=part.rtol, atol=part.atol,
                            err_msg=f"{label}: output {index} of {kernel.name}",
                        )  # fmt: skip
                cases[label] = "ok"
            except Exception as failure:
                cases[label] = f"{type(failure).__name__}: {failure}"[:2000]
    return {"compiled": compiled, "cases": cases}


def _to_device(backend: Any, args: Any) -> list:
    import numpy as np

    return [backend.to_device(a) if isinstance(a, np.ndarray) else a for a in args]


def _child_errors() -> dict[str, Any]:
    """Failures the shim must map to HIP codes the backend turns into the right exceptions."""
    from pytest_gpuperf.runtime import open_backend
    from pytest_gpuperf.runtime.compile import KERNELS_DIR

    backend = open_backend("hip")
    outcomes: dict[str, str] = {}

    def attempt(label: str, action: Any) -> None:
        try:
            action()
            outcomes[label] = "no error"
        except Exception as failure:
            outcomes[label] = f"{type(failure).__name__}: {failure}"[:1500]

    # hipMalloc -> cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY -> hipErrorOutOfMemory (2)
    attempt("out_of_memory", lambda: backend.alloc(1 << 50))
    # hiprtc -> NVRTC: a compile error with NVRTC's log and the line
    broken = '#include "gpuperf.h"\nGPUPERF_KERNEL void broken(float* x) {\n  x[0] = y;\n}\n'
    attempt("compile_error", lambda: backend.compile(broken, name="broken.hip"))
    # hipModuleLaunchKernel -> cuLaunchKernel: 1 MiB of dynamic shared memory is refused
    # (CUDA_ERROR_INVALID_VALUE -> hipErrorInvalidValue)
    module = backend.compile(KERNELS_DIR / "vector_add.hip")
    kernel = module.kernel("vector_add")
    buffer = backend.alloc(4096)
    attempt(
        "launch_error",
        lambda: (
            backend.launch(kernel, 1, 256, [buffer, buffer, buffer, 16], shared_bytes=1 << 20),
            backend.synchronize(),
        ),
    )
    return outcomes


def _child_compare() -> dict[str, Any]:
    """The MI300X blog post's 32M vector add, cold, measured alternately through both backends."""
    import numpy as np

    from pytest_gpuperf.engine.measure import MeasureSettings, measure_kernel
    from pytest_gpuperf.runtime import open_backend
    from pytest_gpuperf.runtime.compile import KERNELS_DIR
    from pytest_gpuperf.runtime.devices import match_device
    from pytest_gpuperf.session.catalog import KERNELS

    entry = KERNELS["vector_add"]
    case = entry.make_case(SEED_N, np.random.default_rng(2026))
    settings = MeasureSettings(cache="cold")
    sides = {}
    for name in ("hip", "cuda"):
        backend = open_backend(name)
        kernel = backend.compile(KERNELS_DIR / entry.file).kernel(entry.name)
        spec = match_device(backend.info).spec
        sides[name] = (backend, kernel, spec, _to_device(backend, case.args))
    runs: dict[str, list[dict[str, Any]]] = {"hip": [], "cuda": []}
    for round_index in range(COMPARE_ROUNDS):
        order = ("hip", "cuda") if round_index % 2 == 0 else ("cuda", "hip")
        for name in order:
            backend, kernel, spec, args = sides[name]
            measurement = measure_kernel(
                backend, kernel, grid=case.grid, block=case.block, args=args,
                bytes_moved=case.bytes_moved, device=spec, settings=settings,
            )  # fmt: skip
            runs[name].append({
                "efficiency": measurement.efficiency,
                "time_s": measurement.time_s,
                "relative_ci": measurement.relative_ci,
                "samples": len(measurement.samples_s),
                "stopped_by": measurement.stopped_by,
                "queue_method": measurement.queue_method,
                "device_key": measurement.device_key,
                "backend": measurement.backend,
            })  # fmt: skip
    outputs_ok = {}
    for name, (_backend, _kernel, _spec, args) in sides.items():
        got = args[2].download(np.float32)[:SEED_N]
        outputs_ok[name] = bool(np.allclose(got, case.expected[2], rtol=case.rtol, atol=case.atol))
    return {"runs": runs, "outputs_ok": outputs_ok, "bytes_moved": case.bytes_moved}


def _child_graphs() -> dict[str, Any]:
    """A small vector add, hot, through both backends, with and without graph replay."""
    import numpy as np

    from pytest_gpuperf.engine.measure import MeasureSettings, measure_kernel
    from pytest_gpuperf.runtime import open_backend
    from pytest_gpuperf.runtime.compile import KERNELS_DIR
    from pytest_gpuperf.runtime.devices import match_device
    from pytest_gpuperf.session.catalog import KERNELS

    entry = KERNELS["vector_add"]
    case = entry.make_case(GRAPH_N, np.random.default_rng(7))
    report: dict[str, Any] = {}
    for name in ("hip", "cuda"):
        backend = open_backend(name)
        kernel = backend.compile(KERNELS_DIR / entry.file).kernel(entry.name)
        spec = match_device(backend.info).spec
        args = _to_device(backend, case.args)
        for graphs in (True, False):
            measurement = measure_kernel(
                backend, kernel, grid=case.grid, block=case.block, args=args,
                bytes_moved=case.bytes_moved, device=spec,
                settings=MeasureSettings(cache="hot", graphs=graphs),
            )  # fmt: skip
            report[f"{name} {'graph' if graphs else 'stream'}"] = {
                "time_s": measurement.time_s,
                "queue_method": measurement.queue_method,
            }
        got = args[2].download(np.float32)[:GRAPH_N]
        report[f"{name} output ok"] = bool(np.allclose(got, case.expected[2], rtol=case.rtol))
        backend.close()
    return report


def _child_modules() -> dict[str, Any]:
    """Both backends' module bookkeeping (runtime/base.py) on the real drivers: compile, load
    twice more, launch each load, unload one twice, close; the loads and the driver's unload
    calls after each step, handles numbered in load order."""
    import numpy as np

    from pytest_gpuperf.runtime import open_backend

    source = '#include "gpuperf.h"\nGPUPERF_KERNEL void put(float* x, float v) { x[0] = v; }\n'
    report: dict[str, Any] = {}
    for name, runtime_of, unload_name in (
        ("hip", lambda b: b._hip, "hipModuleUnload"),
        ("cuda", lambda b: b._d, "cuModuleUnload"),
    ):
        backend = open_backend(name)
        runtime = runtime_of(backend)
        real_unload = getattr(runtime, unload_name)
        numbers: dict[int, int] = {}
        unloaded: list[int] = []

        def unload(
            handle: Any, _real: Any = real_unload, _seen: list = unloaded, _of: dict = numbers
        ) -> Any:
            _seen.append(_of.get(id(handle), -1))
            return _real(handle)

        setattr(runtime, unload_name, unload)
        steps = []
        try:
            module = backend.compile(source, name="put.hip")
            loads = [module, backend.load_again(module), backend.load_again(module)]
            for number, load in enumerate(loads, 1):
                numbers[id(load.handle)] = number
            out = backend.alloc(4)
            values = []
            for number, load in enumerate(loads, 1):
                backend.launch(load.kernel("put"), 1, 1, (out, np.float32(number)))
                backend.synchronize()
                values.append(float(out.download(np.float32)[0]))
            steps.append(["loaded", len(backend._module_handles), list(unloaded), values])
            backend.unload(loads[1])
            backend.unload(loads[1])
            steps.append(["unloaded twice", len(backend._module_handles), list(unloaded)])
            backend.launch(loads[2].kernel("put"), 1, 1, (out, np.float32(7)))
            backend.synchronize()
            steps.append(["still runs", float(out.download(np.float32)[0])])
            out.free()
            backend.close()
            steps.append(["closed", len(backend._module_handles), list(unloaded)])
        finally:
            setattr(runtime, unload_name, real_unload)
        report[name] = steps
    return report


CHILD_TASKS = {
    "modules": _child_modules,
    "device": _child_device,
    "kernels": _child_kernels,
    "errors": _child_errors,
    "compare": _child_compare,
    "graphs": _child_graphs,
}


def _child_main(task: str) -> None:
    result = CHILD_TASKS[task]()
    sys.stdout.write("\n" + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()


# =========================================================================================
# The tests: build or find the shim, run the child tasks, judge what they report.
# =========================================================================================

pytestmark = pytest.mark.gpu


def _nvidia_gpu() -> str | None:
    """None when an NVIDIA GPU answers, else why not (no context is created here)."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return "cuda-bindings is not installed (pip install 'pytest-gpuperf[cuda]')"
    try:
        (err,) = driver.cuInit(0)
    except RuntimeError as failure:
        return f"no NVIDIA driver ({failure})"
    if err != driver.CUresult.CUDA_SUCCESS:
        return f"cuInit failed: {err.name}"
    err, count = driver.cuDeviceGetCount()
    return None if err == driver.CUresult.CUDA_SUCCESS and count > 0 else "no NVIDIA GPU"


SHIM_LIBRARIES = ("libamdhip64.so", "libhiprtc.so")


def _shim_built(root: Path) -> bool:
    return all((root / "lib" / name).is_file() for name in SHIM_LIBRARIES)


def _shim_current(root: Path) -> bool:
    """Built, and from the sources as they are now: a shim built before a new call was
    added would fail that call's test with "symbol not found" for no reason."""
    if not _shim_built(root):
        return False
    built = min((root / "lib" / name).stat().st_mtime for name in SHIM_LIBRARIES)
    sources = [*SHIM_DIR.glob("*.c"), *SHIM_DIR.glob("*.h"), SHIM_DIR / "build.sh"]
    return all(source.stat().st_mtime <= built for source in sources)


@pytest.fixture(scope="module")
def shim_root() -> Path:
    """The shim's ROCM_PATH-shaped folder: $GPUPERF_HIPSHIM_ROOT, the default build folder,
    or a fresh build with tests/hipshim/build.sh where a CUDA toolkit and gcc are present."""
    need("hip-python")
    reason = _nvidia_gpu()
    if reason:
        skip_or_fail(GPU, f"the HIP-over-CUDA shim needs an NVIDIA GPU: {reason}")
    given = os.environ.get(SHIM_ROOT_ENV)
    if given:
        if not _shim_built(Path(given)):
            pytest.fail(f"{SHIM_ROOT_ENV}={given} holds no lib/libamdhip64.so + lib/libhiprtc.so")
        return Path(given)
    if _shim_current(DEFAULT_SHIM_ROOT):
        return DEFAULT_SHIM_ROOT
    cuda_home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    if not (cuda_home / "include" / "cuda.h").is_file() or shutil.which("gcc") is None:
        pytest.skip(
            f"the shim is not built ({DEFAULT_SHIM_ROOT}) and there is no CUDA toolkit "
            f"({cuda_home}/include/cuda.h) and gcc to build it: run tests/hipshim/build.sh"
        )
    build = subprocess.run(
        ["bash", str(SHIM_DIR / "build.sh"), str(DEFAULT_SHIM_ROOT)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if build.returncode != 0:
        pytest.fail(f"tests/hipshim/build.sh failed:\n{build.stdout}\n{build.stderr}")
    return DEFAULT_SHIM_ROOT


@pytest.fixture(scope="module")
def shim_env(shim_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a process whose hip-python loads the shim."""
    env = dict(os.environ)
    env["ROCM_PATH"] = str(shim_root)  # the backend loads $ROCM_PATH/lib/*.so, nothing else
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), env.get("PYTHONPATH"))))
    # A compile cache of its own: the shim's "hiprtc" must not meet a real one's binaries.
    env["GPUPERF_CACHE_DIR"] = str(tmp_path_factory.mktemp("hipshim-cache"))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _missing_symbol(output: str) -> str | None:
    """The symbol in hip-python's "failed to dlsym 'b'hipXxx''" (RuntimeError), if any."""
    found = re.search(r"failed to dlsym '(?:b')?(\w+)", output)
    return found.group(1) if found else None


def run_child(task: str, env: dict[str, str]) -> dict[str, Any]:
    """Run one child task; a HIP call the shim lacks fails with its name."""
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", __file__, task],
        env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False,
    )  # fmt: skip
    missing = _missing_symbol(proc.stdout + proc.stderr)
    if missing:
        pytest.fail(
            f"the hip backend called {missing}, which the shim does not implement: add it to "
            f"tests/hipshim (child task {task!r}); stderr:\n{proc.stderr[-3000:]}"
        )
    if proc.returncode != 0:
        pytest.fail(
            f"child task {task!r} exited with {proc.returncode}:\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def device_report(shim_env: dict[str, str]) -> dict[str, Any]:
    return run_child("device", shim_env)


def test_shim_exports_every_call_the_backend_makes(shim_root: Path) -> None:
    """A HIP call new in the backend must fail here by name, not half-work on a GPU."""
    from hip import hip, hiprtc

    sources = {path: (REPO / path).read_text() for path in BACKEND_SOURCES}
    missing = []
    for module, library, prefix in (
        (hip, "libamdhip64.so", "hip"),
        (hiprtc, "libhiprtc.so", "hiprtc"),
    ):
        shim = ctypes.CDLL(str(shim_root / "lib" / library))
        pattern = re.compile(rf"\b{module.__name__.split('.')[-1]}\.({prefix}[A-Z]\w*)")
        names = {name for text in sources.values() for name in pattern.findall(text)}
        for name in sorted(names):
            if isinstance(getattr(module, name, None), type) or name in AMD_ONLY_CALLS:
                continue  # an enum or a struct, not a call; or a call for AMD devices only
            if not hasattr(shim, VERSIONED_SYMBOLS.get(name, name)):
                missing.append(name)
    assert not missing, f"calls in {BACKEND_SOURCES} the shim lacks: {missing}"


def test_shim_uses_hip_pythons_numbers(device_report: dict[str, Any]) -> None:
    """The error codes and device attributes the shim maps are hip-python's own numbers."""
    assert device_report["error_values"] == HIP_ERROR_VALUES
    wrong = {
        name: pair for name, pair in device_report["attributes"].items()
        if pair["hip"] != pair["cuda"]
    }  # fmt: skip
    assert not wrong, f"attributes the shim answers differently from the CUDA driver: {wrong}"


def test_hip_counts_and_names_the_gpu_as_cuda_does(device_report: dict[str, Any]) -> None:
    """hip.py's hipGetDeviceCount and GPU identity, through hip-python on the shim, agree
    with the cuda backend on the same GPU (the shim answers with the CUDA driver's own)."""
    counts = device_report["counts"]
    assert counts["hip"] == counts["cuda"] >= 1, counts
    hip_info, cuda_info = device_report["hip_info"], device_report["cuda_info"]
    assert hip_info["pci_bus_id"] == cuda_info["pci_bus_id"]
    assert hip_info["uuid"] == cuda_info["uuid"] and cuda_info["uuid"].startswith("GPU-")


def test_device_matching_says_this_is_not_an_mi300x(device_report: dict[str, Any]) -> None:
    hip_match, cuda_match = device_report["hip_match"], device_report["cuda_match"]
    info = device_report["hip_info"]
    assert info["backend"] == "hip"
    assert hip_match["key"] != "mi300x", device_report
    assert hip_match["key"] == cuda_match["key"], (hip_match, cuda_match)
    assert hip_match["how"] == "table", hip_match
    assert hip_match["peak_bps"] == cuda_match["peak_bps"]
    for field in ("name", "compute_units", "l2_bytes", "memory_bytes", "warp_size"):
        assert info[field] == device_report["cuda_info"][field], field


def test_every_kernel_compiles_and_every_catalog_case_is_right(shim_env: dict[str, str]) -> None:
    report = run_child("kernels", shim_env)
    failed_files = {f: r for f, r in report["compiled"].items() if isinstance(r, str)}
    assert not failed_files, failed_files
    assert report["compiled"], "no kernels/*.hip found"
    wrong = {label: result for label, result in report["cases"].items() if result != "ok"}
    assert not wrong, "\n".join(f"{label}: {result}" for label, result in wrong.items())
    from pytest_gpuperf.session.catalog import KERNELS

    assert len(report["cases"]) == len(KERNELS) * len(CASE_SIZES)


def test_errors_arrive_as_the_backends_exceptions(shim_env: dict[str, str]) -> None:
    outcomes = run_child("errors", shim_env)
    assert outcomes["out_of_memory"].startswith("OutOfDeviceMemory"), outcomes
    assert outcomes["compile_error"].startswith("CompileError"), outcomes
    assert "broken.hip" in outcomes["compile_error"] and ":3" in outcomes["compile_error"]
    assert outcomes["launch_error"].startswith("LaunchError"), outcomes


def test_hip_and_cuda_backends_measure_the_same_efficiency(shim_env: dict[str, str]) -> None:
    """Same kernel source, same device, same engine and settings, alternating: the two
    runtimes' efficiencies of the blog post's 32M vector add (cold) agree within 2%."""
    report = run_child("compare", shim_env)
    assert report["outputs_ok"] == {"hip": True, "cuda": True}, report
    hip_runs, cuda_runs = report["runs"]["hip"], report["runs"]["cuda"]
    assert {r["backend"] for r in hip_runs} == {"hip"}
    assert {r["device_key"] for r in hip_runs} == {r["device_key"] for r in cuda_runs}
    hip_eff = statistics.median(r["efficiency"] for r in hip_runs)
    cuda_eff = statistics.median(r["efficiency"] for r in cuda_runs)
    print(f"32M vector add, cold: hip {hip_eff:.4f}, cuda {cuda_eff:.4f}; runs: {report['runs']}")
    assert abs(hip_eff / cuda_eff - 1) <= AGREEMENT, (hip_eff, cuda_eff, report["runs"])


def test_both_backends_unload_every_module_once(shim_env: dict[str, str]) -> None:
    """One module bookkeeping (runtime/base.py) on both real runtimes: each load runs its
    own kernel, a second unload never reaches the driver, close unloads the rest once, and
    the hip backend (through the shim) leaves the trace the cuda backend leaves."""
    report = run_child("modules", shim_env)
    expected = [
        ["loaded", 3, [], [1.0, 2.0, 3.0]],
        ["unloaded twice", 2, [2]],
        ["still runs", 7.0],
        ["closed", 0, [2, 1, 3]],
    ]
    assert report["hip"] == expected, report
    assert report["cuda"] == expected, report


def test_hot_mode_replays_graphs_through_the_hip_backend(shim_env: dict[str, str]) -> None:
    """hipStreamBeginCapture .. hipGraphLaunch through hip-python and the shim: hot mode's
    graph replay works on the hip backend as on the cuda one, and removes the same gap."""
    report = run_child("graphs", shim_env)
    print(f"hot vector add, {12 * GRAPH_N} bytes: {report}")
    assert report["hip output ok"] and report["cuda output ok"], report
    assert report["hip graph"]["queue_method"].startswith("graph-replay"), report
    assert report["hip stream"]["queue_method"].startswith("spin-ahead"), report
    hip_graph, cuda_graph = report["hip graph"]["time_s"], report["cuda graph"]["time_s"]
    assert report["hip stream"]["time_s"] - hip_graph > 0.3e-6, "a replay removes the gap"
    assert abs(hip_graph / cuda_graph - 1) <= 0.05, (hip_graph, cuda_graph)


def test_perf_suite_runs_on_the_hip_backend(shim_env: dict[str, str]) -> None:
    """The plugin end to end on the hip backend: one vector add case of tests/perf, measured."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--gpuperf", "--gpuperf-backend=hip",
         "tests/perf/test_vector_add.py", "-k", "plain-cold", "-p", "no:cacheprovider",
         "-q", "-rA"],
        cwd=REPO, env=shim_env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
        check=False,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    missing = _missing_symbol(output)
    assert not missing, f"the plugin's hip path called {missing}, which the shim lacks"
    assert proc.returncode == 0, output[-6000:]
    assert re.search(r"gpuperf device: .* via hip,", output), output[-6000:]
    assert "[mi300x]" not in output
    assert re.search(r"\b1 passed\b", output), output[-6000:]


if __name__ == "__main__":
    _child_main(sys.argv[1])
