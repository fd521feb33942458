"""The multi-GPU checks on a real machine, in one command (about 3-5 minutes on one H100):

    PYTHONPATH=. python3 bench/multi_gpu.py [--backend cuda] [--out DIR] [--before REF]

1. device_count through the real cuda module, and through hip-python on the HIP-over-CUDA
   shim (built by tests/hipshim/build.sh when missing); CUDA_VISIBLE_DEVICES="" must say no GPU.
2. tests/perf serial and with -n 2 (--gpuperf-json each): every worker's GPU (bus id) from the
   JSON, whether two measurements of one GPU overlap in time (from started_s/ended_s), the
   wall time and the GPU-lock time.
3. With >= 2 GPUs: -n 4 too, nvidia-smi sampled every 0.2 s during -n 2 and -n 4 (utilisation
   per GPU), the degraded-GPU probe's ratios, and a baseline saved on GPU 0 judged on GPU 1
   (every entry kept, the GPU-to-GPU time ratios).

Writes its JSON reports and a summary (multi_gpu.json) under $OUT (or --out, default
./multi-gpu-out); prints everything it checks. Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COUNT = (
    "import sys\n"
    "from pytest_gpuperf.session import device as session_device\n"
    "try:\n"
    "    print(session_device.device_count(sys.argv[1]))\n"
    "except Exception as problem:\n"
    "    print(f'unavailable: {problem}')\n"
)


def run(
    command: list[str], env: dict[str, str] | None = None, timeout: float = 300, cwd: Path = ROOT
) -> tuple:
    began = time.monotonic()
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - began


def environment(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"
    env.update(extra)
    return env


def count(backend: str, **extra: str) -> str:
    code, text, _ = run([sys.executable, "-c", COUNT, backend], environment(**extra), 120)
    return text.strip().splitlines()[-1] if text.strip() else f"exit {code}"


def shim_root() -> Path | None:
    root = Path(os.environ.get("GPUPERF_HIPSHIM_ROOT") or ROOT / "tests/hipshim/build/rocm")
    if not (root / "lib/libamdhip64.so").exists():
        code, text, _ = run(["bash", "tests/hipshim/build.sh"], environment(), 300)
        if code != 0:
            print(f"  hip shim did not build:\n{text[-2000:]}")
            return None
    return root


def pytest_run(name: str, out: Path, args: list[str], root: Path = ROOT, **extra: str) -> dict:
    report = out / f"{name}.json"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--gpuperf"]
    command += [f"--gpuperf-json={report}", *args, "tests/perf"]
    env = environment(**extra)
    env["PYTHONPATH"] = f"{root}{os.pathsep}{env['PYTHONPATH']}"
    code, text, wall_s = run(command, env, 420, cwd=root)
    (out / f"{name}.log").write_text(text)
    tail = text.strip().splitlines()[-1] if text.strip() else ""
    print(f"  {name}: exit {code}, wall {wall_s:.1f} s: {tail}")
    document = json.loads(report.read_text()) if report.exists() else {}
    return {"name": name, "exit": code, "wall_s": wall_s, "report": document}


def analyse(result: dict) -> dict:
    """Per GPU: its workers, measurements, overlaps of their GPU work, lock time."""
    document = result["report"]
    per_gpu: dict[str, list[tuple[float, float, str]]] = {}
    for item in document.get("results", ()):
        m = item["measurement"]
        gpu = m.get("gpu") or {}
        key = gpu.get("pci_bus_id") or f"index {gpu.get('index')}"
        if m.get("started_s") is not None:
            per_gpu.setdefault(key, []).append((m["started_s"], m["ended_s"], item["test_id"]))
    overlaps = []
    for key, spans in per_gpu.items():
        spans.sort()
        for (_, end, first), (start, _, second) in itertools.pairwise(spans):
            if start < end:
                overlaps.append(f"{key}: {first} and {second} overlap by {end - start:.4f} s")
    devices = [
        {
            "index": d.get("index"),
            "pci_bus_id": d.get("pci_bus_id"),
            "workers": d.get("workers"),
            "lock_held_s": d.get("lock_held_s"),
            "probe": d.get("probe"),
        }
        for d in document.get("devices", ())
    ]
    timing = document.get("timing") or {}
    summary = {
        "run": result["name"],
        "exit": result["exit"],
        "wall_s": round(result["wall_s"], 2),
        "session_wall_s": timing.get("wall_s"),
        "gpu_lock_held_s": timing.get("gpu_lock_held_s"),
        "measurements_per_gpu": {k: len(v) for k, v in per_gpu.items()},
        "overlaps": overlaps,
        "devices": devices,
    }
    print(f"  {result['name']}: " + json.dumps({k: summary[k] for k in list(summary)[:6]}))
    for device in devices:
        print(
            f"    GPU {device['index']} {device['pci_bus_id']}: workers {device['workers']}, "
            f"lock held {device['lock_held_s']}, probe {device['probe']}"
        )
    print(f"    overlapping measurements on one GPU: {len(overlaps)} {overlaps[:3]}")
    return summary


HOST_WORK_FILES = ("pytest_gpuperf/session/catalog.py", "tests/perf/conftest.py")


def before_tree(ref: str, into: Path) -> Path | None:
    """A copy of this tree with the suite's host-work files (input generation, output checks)
    as they were at `ref`: the serial run there is the 'before' of the host-work change.
    None where git or the ref is not at hand (the GPU machine may get no .git)."""
    texts = {}
    for name in HOST_WORK_FILES:
        done = subprocess.run(
            ["git", "show", f"{ref}:{name}"], cwd=ROOT, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            print(f"  no 'before' run: git show {ref}:{name} failed ({done.stderr.strip()[:200]})")
            return None
        texts[name] = done.stdout
    shutil.copytree(ROOT, into, ignore=shutil.ignore_patterns(".git", "*-out", "build"))
    for name, text in texts.items():
        (into / name).write_text(text)
    return into


def sample_smi(path: Path) -> subprocess.Popen | None:
    if shutil.which("nvidia-smi") is None:
        return None
    handle = path.open("w")
    return subprocess.Popen(
        [
            "nvidia-smi",
            "--query-gpu=timestamp,index,pci.bus_id,utilization.gpu,clocks.sm",
            "--format=csv,noheader",
            "-lms",
            "200",
        ],
        stdout=handle,
        stderr=subprocess.DEVNULL,
    )


def busy(path: Path) -> dict[str, float]:
    """The share of samples with utilisation > 0, per bus id."""
    seen: dict[str, list[int]] = {}
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4 and parts[3].endswith("%"):
            seen.setdefault(parts[2], []).append(int(parts[3].rstrip(" %")) > 0)
    return {bus: round(sum(v) / len(v), 3) for bus, v in seen.items() if v}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--out", default=os.environ.get("OUT") or "multi-gpu-out")
    parser.add_argument(
        "--before",
        default="",
        metavar="REF",
        help="also run tests/perf serially with catalog.py and tests/perf/conftest.py as at "
        "git REF (e.g. main before the host-work change): wall and GPU-lock time before/after",
    )
    options = parser.parse_args()
    out = Path(options.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    backend = f"--gpuperf-backend={options.backend}"
    findings: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    failed = []

    print("1. device_count")
    findings["count_cuda"] = count("cuda")
    findings["count_cuda_masked"] = count("cuda", CUDA_VISIBLE_DEVICES="")
    root = shim_root()
    findings["count_hip_shim"] = count("hip", ROCM_PATH=str(root)) if root else "shim not built"
    for key in ("count_cuda", "count_cuda_masked", "count_hip_shim"):
        print(f"  {key}: {findings[key]}")
    gpus = int(findings["count_cuda"]) if findings["count_cuda"].isdigit() else 0
    if gpus < 1 or "unavailable" not in findings["count_cuda_masked"]:
        failed.append("device_count through cuda")
    if root and findings["count_hip_shim"] != str(gpus):
        failed.append("device_count through the hip shim")

    print("2. tests/perf serial and -n 2")
    runs = [analyse(pytest_run("serial", out, [backend]))]
    if options.before:
        with tempfile.TemporaryDirectory() as scratch:
            tree = before_tree(options.before, Path(scratch) / "tree")
            if tree is not None:
                runs.append(analyse(pytest_run("serial_before", out, [backend], root=tree)))

    def sampled(name: str, workers: str) -> None:
        """A run under -n `workers` with nvidia-smi sampling each GPU's utilisation."""
        smi = out / f"nvidia-smi-{name}.csv"
        sampler = sample_smi(smi)
        runs.append(analyse(pytest_run(name, out, [backend, "-n", workers])))
        if sampler:
            sampler.terminate()
            findings[f"busy_{name}"] = busy(smi)
            print(f"  nvidia-smi, share of samples busy per GPU during {name}: {busy(smi)}")

    sampled("n2", "2")
    if gpus >= 2:
        print("3. -n 4, and a baseline saved on GPU 0 judged on GPU 1")
        sampled("n4", "4")
        with tempfile.TemporaryDirectory() as baselines:
            where = f"--gpuperf-baseline-dir={baselines}"
            save = pytest_run(
                "save_gpu0", out, [backend, "--gpuperf-save", where], CUDA_VISIBLE_DEVICES="0"
            )
            judge = pytest_run("judge_gpu1", out, [backend, where], CUDA_VISIBLE_DEVICES="1")
        times = {
            r["test_id"] + r["measurement"]["name"]: r["measurement"]["time_s"]
            for r in save["report"].get("results", ())
        }
        ratios = [
            r["measurement"]["time_s"] / times[key]
            for r in judge["report"].get("results", ())
            if (key := r["test_id"] + r["measurement"]["name"]) in times
        ]
        if ratios:
            findings["gpu1_over_gpu0"] = {
                "entries": len(ratios),
                "median": statistics.median(ratios),
                "min": min(ratios),
                "max": max(ratios),
            }
            print(f"  GPU 1 / GPU 0 time ratios: {findings['gpu1_over_gpu0']}")
        findings["judged_on_gpu1"] = judge["report"].get("summary")
        print(f"  judged on GPU 1: {findings['judged_on_gpu1']}")
    findings["runs"] = runs
    for summary in runs:
        if summary["overlaps"] or summary["exit"] != 0:
            failed.append(
                f"{summary['run']}: exit {summary['exit']}, overlaps {summary['overlaps'][:2]}"
            )
    n2 = next(s for s in runs if s["run"] == "n2")
    buses = {d["pci_bus_id"] for d in n2["devices"]}
    workers = sorted(w for d in n2["devices"] for w in d["workers"] or ())
    print(f"  -n 2: workers {workers} on bus ids {sorted(buses)} ({gpus} GPU(s) visible)")
    if gpus == 1 and len(buses) != 1:
        failed.append("-n 2 on one GPU used more than one bus id")
    if gpus >= 2 and len(buses) < 2:
        failed.append("-n 2 on several GPUs used only one")
    findings["failed"] = failed
    (out / "multi_gpu.json").write_text(json.dumps(findings, indent=2, default=str) + "\n")
    print(f"written: {out / 'multi_gpu.json'}")
    print("FAILED: " + "; ".join(failed) if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
