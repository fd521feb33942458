"""What the simulated device's time of a kernel comes from (SimBackend.speed_model): two code
objects with equal speed models run at the same modelled speed, so an A/B comparison of them
is 'modelled'; a directive, an option or a slowdown keyed by fingerprint makes them differ."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_gpuperf import simulate
from pytest_gpuperf.runtime import open_backend

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
BODY = """\
#include "gpuperf.h"
{directive}GPUPERF_KERNEL void vector_add(const float* a, const float* b, float* c, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = {expression};
}}
"""


def kernel(backend, tmp_path, name, *, directive="", expression="a[i] + b[i]"):
    path = tmp_path / f"{name}.hip"
    path.write_text(BODY.format(directive=directive, expression=expression))
    return backend.compile(path).kernel("vector_add")


@pytest.fixture
def backend():
    opened = open_backend("sim", seed=1)
    yield opened
    opened.close()


def test_an_edited_body_keeps_the_speed_model_and_changes_the_fingerprint(backend, tmp_path):
    base = kernel(backend, tmp_path, "base")
    head = kernel(backend, tmp_path, "head", expression="a[i] + b[i] + a[(i + 7) % n]")
    assert backend.kernel_fingerprint(base) != backend.kernel_fingerprint(head)
    assert backend.speed_model(base) == backend.speed_model(head)
    assert backend.speed_model(head).efficiency_from == "default"


def test_a_directive_an_option_or_a_fingerprint_slowdown_changes_it(tmp_path):
    with open_backend("sim", seed=1) as plain:
        base = kernel(plain, tmp_path, "base")
        directive = kernel(plain, tmp_path, "slow", directive="// gpuperf-sim: efficiency=0.5\n")
        assert plain.speed_model(directive).efficiency == 0.5
        assert plain.speed_model(directive).efficiency_from == "directive"
        assert plain.speed_model(base) != plain.speed_model(directive)
        head = kernel(plain, tmp_path, "head", expression="a[i] - b[i]")
        slowed = {plain.kernel_fingerprint(head): 1.03}
    with open_backend("sim", seed=1, kernel_slowdown=slowed) as backend:
        base = kernel(backend, tmp_path, "base")
        head = kernel(backend, tmp_path, "head", expression="a[i] - b[i]")
        assert backend.speed_model(head).slowdown == 1.03
        assert backend.speed_model(base) != backend.speed_model(head)


def test_the_same_efficiency_from_two_places_is_the_same_speed(backend, tmp_path):
    with simulate.scoped():
        base = kernel(backend, tmp_path, "base")
        simulate.register(tmp_path / "base.hip", "vector_add", efficiency=0.7)
        head = kernel(backend, tmp_path, "head", directive="// gpuperf-sim: efficiency=0.7\n")
        assert backend.speed_model(base).efficiency_from == "model"
        assert backend.speed_model(base) == backend.speed_model(head)


def test_outputs_computed_says_whether_a_launch_computed_them(backend, tmp_path):
    unmodelled = kernel(backend, tmp_path, "mine")
    buffers = [backend.to_device(np.zeros(16, np.float32)) for _ in range(3)]
    assert backend.outputs_computed(unmodelled)  # not launched yet
    with pytest.warns(simulate.SimulationWarning):
        backend.launch(unmodelled, 1, 16, (*buffers, 16))
    assert not backend.outputs_computed(unmodelled)
    plugin = backend.compile(KERNELS / "vector_add.hip").kernel("vector_add")
    backend.launch(plugin, 1, 16, (*buffers, 16))
    assert backend.outputs_computed(plugin)
