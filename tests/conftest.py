"""Shared pytest set-up: Hypothesis profiles.

SPECSIM_HYPOTHESIS=ci (default) keeps the suite fast; SPECSIM_HYPOTHESIS=deep runs many more
examples for a thorough local check.
"""
import os

# Triton decides interpreter mode when triton.language is first imported; with no GPU here the
# interpreter is the only way its kernels run, so choose it before any test imports triton.
if not os.path.exists("/dev/nvidia0"):
    os.environ.setdefault("TRITON_INTERPRET", "1")
# OpenMP threads that spin while idle stall small torch ops for milliseconds when another thread
# pool (numpy's) shares the two cores; engine/__main__.py makes the same choice.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "deep", max_examples=2000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("SPECSIM_HYPOTHESIS", "ci"))


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny tensors: one intra-op thread is faster, and immune to a busy machine."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
