"""Tests of engine/sampling.py: temperature / top-k / top-p warping."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

from engine.sampling import warp


@st.composite
def logit_rows(draw, max_V=12):
    V = draw(st.integers(1, max_V))
    vals = draw(st.lists(st.one_of(st.integers(-4, 4).map(float),
                                   st.floats(-20, 20, allow_nan=False)),
                         min_size=V, max_size=V))
    return torch.tensor(vals, dtype=torch.float64)


def _ref_warp(x: np.ndarray, T: float, k, p):
    """Plain numpy reference, one row."""
    V = len(x)
    if T == 0:
        out = np.zeros(V)
        out[int(np.argmax(x))] = 1.0
        return out
    z = x / T
    keep = np.ones(V, dtype=bool)
    if k is not None and k < V:
        kth = np.sort(z)[::-1][k - 1]
        keep &= z >= kth
    if p is not None and p < 1:
        w = np.where(keep, np.exp(z - z[keep].max()), 0.0)
        w /= w.sum()
        order = sorted(range(V), key=lambda i: (-w[i], i))
        mass = 0.0
        keep2 = np.zeros(V, dtype=bool)
        for i in order:
            if mass >= p and keep2.any():
                break
            keep2[i] = True
            mass += w[i]
        keep &= keep2
    w = np.where(keep, np.exp(z - z[keep].max()), 0.0)
    return w / w.sum()


@given(logit_rows(), st.sampled_from([0.0, 0.3, 1.0, 2.5]),
       st.one_of(st.none(), st.integers(1, 14)),
       st.one_of(st.none(), st.sampled_from([0.05, 0.5, 0.9, 0.999, 1.0])))
def test_warp_matches_numpy_reference(x, T, k, p):
    got = warp(x[None], T, top_k=k, top_p=p)[0].numpy()
    want = _ref_warp(x.numpy(), T, k, p)
    # the kept set must agree exactly; the values to rounding
    assert ((got > 0) == (want > 0)).all(), (got, want)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert math.isclose(got.sum(), 1.0, rel_tol=1e-12)


def test_warp_greedy_and_shapes():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [0.0, 0.0, 0.0, 5.0]])
    assert warp(x, 0).tolist() == [[0, 1, 0, 0], [0, 0, 0, 1]]
    y = torch.randn(2, 3, 7)
    assert warp(y, 0.7, top_k=3, top_p=0.8).shape == (2, 3, 7)
    assert warp(y.half(), 1.0).dtype == torch.float32
    # top_k keeps ties at the boundary
    z = torch.tensor([2.0, 1.0, 1.0, 0.0])
    assert (warp(z, 1.0, top_k=2) > 0).tolist() == [True, True, True, False]
    # top_p keeps the smallest prefix reaching p
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64).log()
    assert (warp(probs, 1.0, top_p=0.79) > 0).tolist() == [True, True, False, False]
    assert (warp(probs, 1.0, top_p=0.81) > 0).tolist() == [True, True, True, False]


def test_warp_rejects_bad_arguments():
    x = torch.zeros(3)
    for kwargs in ({"temperature": -1}, {"temperature": 1, "top_k": 0},
                   {"temperature": 1, "top_p": 0.0}, {"temperature": 1, "top_p": 1.5}):
        with pytest.raises(ValueError):
            warp(x, **kwargs)
    with pytest.raises(TypeError):
        warp(torch.zeros(3, dtype=torch.int64), 1.0)
