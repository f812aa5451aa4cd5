"""Shared pytest set-up: Hypothesis profiles.

SPECSIM_HYPOTHESIS=ci (default) keeps the suite fast; SPECSIM_HYPOTHESIS=deep runs many more
examples for a thorough local check.
"""
import os

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
