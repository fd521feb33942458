"""Opening the device a session measures on: backends tried in order, the spec it is measured
against, and its GPU lock; and saying loudly what was passed over to reach it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_gpuperf.config.options import DEFAULT_SIM_DEVICE
from pytest_gpuperf.config.settings import Settings, gpu_index_for
from pytest_gpuperf.errors import Attempt, DeviceUnavailable, GpuPerfError
from pytest_gpuperf.runtime import backend_class, open_backend
from pytest_gpuperf.runtime.devices import DeviceMatch, match_device
from pytest_gpuperf.runtime.info import ReadsBackend
from pytest_gpuperf.session.gpu_lock import GpuLock

if TYPE_CHECKING:
    from pytest_gpuperf.runtime.base import Backend
    from pytest_gpuperf.session.gpu_probe import ProbeReport


TRIED_FIRST = "tried before"  # a -v line: the backends passed over to reach a real GPU


@dataclass(frozen=True)
class OpenDevice(ReadsBackend):
    """The session's device: the backend, the spec it is measured against, its GPU lock,
    and the backends that were passed over to reach it (a fallback to "sim" says why)."""

    backend: Backend
    match: DeviceMatch
    lock: GpuLock
    passed_over: tuple[Attempt, ...] = ()

    def describe(self, *, verbose: bool = False) -> list[str]:
        """Header lines: the device, and loudly, whether it is simulated and why (each
        backend passed over in a few words; `verbose`: its whole reason and way out). Backends
        passed over to reach a real GPU are the list doing its job: only `verbose` says them,
        quietly."""
        info, spec = self.info, self.match.spec
        where = f"GPU {info.index}" + (f" ({info.pci_bus_id})" if info.pci_bus_id else "")
        # The device table's name, as the summary and the baselines name it; the runtime's own
        # name is in the JSON report (devices[].runtime_name).
        line = (
            f"{spec.name} [{spec.key}] via {info.backend}, {where}, {info.arch}, "
            f"peak {spec.peak_bps / 1e12:.2f} TB/s ({self.match.how})"
        )
        lines = [f"gpuperf device: {line}"]
        if self.simulated:
            seed = self.backend.seed
            seeded = f" (GPUPERF_SIM_SEED={seed} reproduces it)" if seed else ""
            lines.append(
                f"gpuperf device: *** SIMULATED *** times come from a model, not a GPU{seeded}"
            )
        if self.passed_over and self.simulated:  # the alarm: a model instead of a GPU
            tried = "; ".join(
                f"{a.backend}: {a.reason if verbose else _gist(a.reason)}" for a in self.passed_over
            )
            why = "" if verbose else " (-v: why)"
            lines.append(f"gpuperf device: *** FELL BACK to {info.backend}: {tried}{why}")
        elif self.passed_over and verbose:
            # the next backend of the list is the normal path (hip-python installed on an
            # NVIDIA machine says hipErrorNoDevice): said under -v, never as an alarm
            tried = "; ".join(f"{a.backend}: {a.reason}" for a in self.passed_over)
            lines.append(f"gpuperf device: {TRIED_FIRST} {info.backend}: {tried}")
        if self.match.warning:
            lines.append(f"gpuperf device: warning: {self.match.warning}")
        return lines


def _gist(reason: str, limit: int = 40) -> str:
    """A backend's reason in a few words: up to its first colon, bracket or semicolon."""
    gist = re.split(r": |; | \(", reason, maxsplit=1)[0].strip()
    return gist if len(gist) <= limit else gist[: limit - 1].rstrip() + "…"


def open_device(
    settings: Settings,
    *,
    worker: int | None = None,
    opener: Callable[..., Backend] = open_backend,
    refused: Sequence[int] = (),
    notify: Callable[[str], None] | None = None,
) -> OpenDevice:
    """Open the first backend of the settings' list that has a device.

    `DeviceUnavailable` lists every attempt; any other error (a device key that does not fit,
    say) is a setup error. Under --gpuperf-require only real devices of the required kind are
    tried, and the error says what was required. `refused` GPUs (the degraded-GPU probe's,
    under --gpuperf-refuse-degraded) get no worker. `notify` says a wait for the GPU lock.
    """
    attempts: list[Attempt] = []
    backends = settings.allowed_backends
    for name in backends:
        options = backend_options(settings, name)
        try:
            index = gpu_index_for(settings, device_count(name, **options), worker, refused)
            backend = opener(name, index, **options)
        except DeviceUnavailable as unavailable:
            attempts.extend(unavailable.attempts or (Attempt(name, str(unavailable)),))
            continue
        except ImportError as missing:
            attempts.append(Attempt(name, f"backend module did not import ({missing})"))
            continue
        try:
            match = match_device(backend.info, key=settings.device_key)
            lock = GpuLock(backend.info, notify=notify)
        except GpuPerfError:
            backend.close()
            raise
        return OpenDevice(backend, match, lock, tuple(attempts))
    raise DeviceUnavailable(attempts, hint=_missing_hint(settings))


def _missing_hint(settings: Settings) -> str:
    if settings.require:
        wanted = "a real GPU" if settings.require == "gpu" else f"a {settings.require} GPU"
        return (
            f"--gpuperf-require={settings.require} needs {wanted}: this run fails rather than "
            "skipping or measuring the simulated device"
        )
    if "sim" not in settings.allowed_backends:
        return "Add sim to --gpuperf-backend (e.g. hip,cuda,sim) to run on the simulated device"
    return ""


def required_device_missing(settings: Settings) -> DeviceUnavailable | None:
    """What --gpuperf-require's check at the start of a run finds: None when some allowed
    backend shows a GPU, else the error a test would get. It counts devices without opening
    one (an xdist controller must not hold a GPU its workers measure on)."""
    attempts: list[Attempt] = []
    for name in settings.allowed_backends:
        try:
            if device_count(name, **backend_options(settings, name)) > 0:
                return None
            attempts.append(Attempt(name, "no device"))
        except DeviceUnavailable as unavailable:
            attempts.extend(unavailable.attempts or (Attempt(name, str(unavailable)),))
        except ImportError as missing:
            attempts.append(Attempt(name, f"backend module did not import ({missing})"))
    return DeviceUnavailable(attempts, hint=_missing_hint(settings))


def backend_options(settings: Settings, name: str) -> dict[str, Any]:
    """What open() and device_count() of backend `name` are given for these settings."""
    if name != "sim":
        return {}
    return {
        "device": settings.device_key or DEFAULT_SIM_DEVICE,
        "gpu_speeds": settings.sim_gpu_speeds,
    }


def device_count(backend_name: str, **options: Any) -> int:
    """How many GPUs backend `backend_name` shows this process (after its visible-device
    mask), without opening one: worker k of pytest-xdist measures on GPU k mod this count.
    The one place the plugin asks; DeviceUnavailable (or ImportError) when the runtime is
    not there, with the reason opening a device would give."""
    return backend_class(backend_name).device_count(**options)


def gpu_index_problem(settings: Settings) -> str:
    """Why --gpuperf-gpu=N cannot be honoured ("" when it can): the first backend of the
    list that shows a GPU (the one a test would open) shows fewer than N+1. Asked at the
    start: a GPU that does not exist would otherwise skip every test and pass the run."""
    index = settings.gpu_index
    if index is None:
        return ""
    for name in settings.allowed_backends:
        try:
            count = device_count(name, **backend_options(settings, name))
        except (DeviceUnavailable, ImportError):
            continue
        if count <= 0:
            continue
        if index < count:
            return ""
        shown = "GPU 0" if count == 1 else f"GPUs 0-{count - 1}"
        return (
            f"--gpuperf-gpu={index}: the {name} backend shows {count} "
            f"GPU{'s' if count != 1 else ''} to this process ({shown}); pick one of those "
            "(CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES renumber them)"
        )
    return ""


def probe_for_workers(
    settings: Settings,
    workers: int,
    *,
    opener: Callable[..., Backend] = open_backend,
    notify: Callable[[str], None] | None = None,
) -> ProbeReport | None:
    """The degraded-GPU probe of a run whose `workers` pytest-xdist workers spread over the
    GPUs of the first backend that has a device (the one they will open): None when they
    share one GPU, an explicit --gpuperf-gpu pins them, or --gpuperf-gpu-margin=0."""
    if not settings.measure or settings.gpu_index is not None or workers < 2:
        return None
    if settings.gpu_margin <= 0 and not settings.refuse_degraded:
        return None
    from pytest_gpuperf.session.gpu_probe import probe_gpus

    for name in settings.allowed_backends:
        options = backend_options(settings, name)
        try:
            count = device_count(name, **options)
        except (DeviceUnavailable, ImportError):
            continue
        indices = sorted({worker % count for worker in range(workers)})
        if len(indices) < 2:
            return None

        def cache_bytes_of(backend: Backend) -> int:
            spec = match_device(backend.info, key=settings.device_key).spec
            return max(int(spec.cache_bytes), int(backend.info.l2_bytes))

        return probe_gpus(
            name,
            indices,
            settings.gpu_margin,
            open_gpu=lambda index: opener(name, index, **options),  # noqa: B023 (used at once)
            cache_bytes_of=cache_bytes_of,
            hold=lambda backend: GpuLock(backend.info, notify=notify).held(
                "the degraded-GPU probe"
            ),
            refuse=settings.refuse_degraded,
        )
    return None
