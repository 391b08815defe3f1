"""Shared fixtures and the numpy float64 attention the bindings are checked against."""

import numpy as np
import pytest

import amla


def f64(x):
    x = np.asarray(x)
    if x.dtype == np.uint16:
        x = x.view(amla.BF16)
    return x.astype(np.float64)


def numpy_attention(q, kv, block_table, seqlens, d_v, *, v=None, causal=False, scale=None):
    """Softmax attention in float64 with numpy, straight from problem/shape.hpp's definitions."""
    q, kv = f64(q), f64(kv)
    v = None if v is None else f64(v)
    batch, s_q, h_q, d_qk = q.shape
    page_size, h_kv = kv.shape[1], kv.shape[2]
    # DecodeOptions holds the scale as a float (problem/options.hpp): 1 / sqrt(d_qk) rounded once
    scale = float(np.float32(1.0 / np.sqrt(d_qk) if scale is None else scale))
    hpg = h_q // h_kv
    out = np.zeros((batch, s_q, h_q, d_v))
    lse = np.full((batch, h_q, s_q), -np.inf)
    for b in range(batch):
        n = int(seqlens[b])
        pages = [block_table[b, s // page_size] for s in range(n)]
        slots = [s % page_size for s in range(n)]
        keys = kv[pages, slots] if n else np.zeros((0, h_kv, d_qk))
        vals = (v[pages, slots] if v is not None else keys[..., :d_v]) if n else np.zeros((0, h_kv, d_v))
        for t in range(s_q):
            vis = n if not causal else min(max(n - s_q + t + 1, 0), n)
            if vis == 0:
                continue
            for h in range(h_q):
                g = h // hpg
                x = scale * (keys[:vis, g] @ q[b, t, h])
                m = x.max()
                p = np.exp(x - m)
                lse[b, h, t] = m + np.log(p.sum())
                out[b, t, h] = (p @ vals[:vis, g]) / p.sum()
    return out, lse


@pytest.fixture(scope="session")
def small_case():
    """A small MLA-shaped case: varlen with a zero length, shuffled and poisoned pages."""
    return amla.cases.build(batch=3, s_q=2, h_q=8, h_kv=1, d_qk=96, d_v=64, page_size=16,
                            seqlens=[70, 0, 33], seed=11)


@pytest.fixture(scope="session")
def gqa_case():
    """GQA with a separate V cache, float32 values."""
    return amla.cases.build(batch=2, s_q=1, h_q=8, h_kv=2, d_qk=64, d_v=32, page_size=8,
                            seqlens=[41, 17], separate_v=True, dtype="float32", seed=3)
