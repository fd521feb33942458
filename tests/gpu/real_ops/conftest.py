"""What the real-ops corpus shares: the tests of tests/gpu/real_ops/ measure kernel libraries'
ops (Liger-Kernel, FlagGems, PyTorch's own) as their maintainers would test them, inputs made
with torch on the GPU in the shapes of a Llama-style model.

bench/real_ops.py copies this file beside one test file into a scratch repository that vendors
a library's release under vendor/, so it imports nothing of this repository, and torch only
inside the fixtures: a machine without torch skips each module with its own one reason.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def seeded_and_freed():
    """Every test draws its inputs from seed 0 and gives its memory back afterwards: the
    corpus's inputs are hundreds of MB each, and under --gpuperf-compare each side captures
    its callable several times, every capture on tensors of its own."""
    import torch

    torch.manual_seed(0)
    yield
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def pytest_configure(config):
    """The marker the repository's own pyproject declares, declared here too for the scratch
    repositories (which have only this conftest and a pytest.ini)."""
    config.addinivalue_line("markers", "gpu: needs a real GPU (skipped without one)")
