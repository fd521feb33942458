"""`pytest_gpuperf.simulate` is the public module users import in conftest files: every name
it offered before the simulated device became one package (simulate/) still imports from it, and
is the object the package provides, so a model registered through either is the same model."""

from __future__ import annotations

import importlib

import pytest

from pytest_gpuperf.simulate import kernel_models

# The public names of pytest_gpuperf.simulate when it held the registry itself: its __all__,
# then the other names it defined (not the modules and helpers it imported).
ALL = (
    "KernelModel",
    "LaunchShape",
    "SimulationWarning",
    "lookup",
    "model",
    "models",
    "register",
    "scoped",
    "unregister",
)
ALSO_PUBLIC = ("Compute", "TrafficBytes", "check_traffic", "missing_model_message")


def test_the_public_list_is_unchanged():
    simulate = importlib.import_module("pytest_gpuperf.simulate")
    assert tuple(simulate.__all__) == ALL


@pytest.mark.parametrize("name", ALL + ALSO_PUBLIC)
def test_every_public_name_is_the_package_object(name):
    simulate = importlib.import_module("pytest_gpuperf.simulate")
    assert getattr(simulate, name) is getattr(kernel_models, name)


def test_the_documented_imports_work():
    from pytest_gpuperf import simulate
    from pytest_gpuperf.simulate import SimulationWarning, model, register, scoped

    assert simulate.model is model and simulate.register is register
    assert simulate.scoped is scoped and issubclass(SimulationWarning, UserWarning)


def test_a_model_registered_through_simulate_is_the_one_the_device_finds(tmp_path):
    from pytest_gpuperf import simulate

    source = tmp_path / "k.hip"
    source.write_text("__global__ void k(float* x) {}\n")
    with simulate.scoped():
        entry = simulate.register(source, "k", efficiency=0.5)
        assert kernel_models.lookup(source, "k") is entry
    assert kernel_models.lookup(source, "k") is None
