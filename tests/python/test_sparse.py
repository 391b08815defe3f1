"""Sparse top-k decode (indices=, topk_length=) and attention sinks (sink=) through the bindings:
golden against a numpy float64 computation written here, the emulations against golden, the
defined results (empty rows, duplicates, topk past the sequence, sinks of +-inf and NaN) and the
errors."""

import numpy as np
import pytest

import amla
from conftest import f64

EMULATIONS = ["base", "amla", "seesaw", "transposed", "split_kv"]


def numpy_sparse(case, indices, topk_length=None, sink=None):
    """out and lse in float64: each row attends its counted entries that are not -1 (a duplicate
    twice); the sink joins the denominator; lse is the keys' alone."""
    q, kv = f64(case.q), f64(case.kv)
    batch, s_q, h_q, d_qk = q.shape
    page_size, h_kv = kv.shape[1], kv.shape[2]
    d_v = case.d_v
    vals_cache = f64(case.v) if case.v is not None else kv[..., :d_v]
    scale = float(np.float32(1.0 / np.sqrt(d_qk)))
    hpg = h_q // h_kv
    out = np.zeros((batch, s_q, h_q, d_v))
    lse = np.full((batch, h_q, s_q), -np.inf)
    topk = indices.shape[2]
    for b in range(batch):
        for t in range(s_q):
            n = topk if topk_length is None else int(topk_length[b, t])
            keys = [int(k) for k in indices[b, t, :n] if k != -1]
            if not keys:
                continue
            pages = [case.block_table[b, k // page_size] for k in keys]
            slots = [k % page_size for k in keys]
            for h in range(h_q):
                g = h // hpg
                x = scale * (kv[pages, slots, g] @ q[b, t, h])
                m = x.max()
                p = np.exp(x - m)
                lse[b, h, t] = m + np.log(p.sum())
                den = p.sum() + (0.0 if sink is None else np.exp(np.float64(sink[h]) - m))
                out[b, t, h] = (p @ vals_cache[pages, slots, g]) / den
    return out, lse


def random_indices(case, topk, seed, causal=False):
    rng = np.random.default_rng(seed)
    batch, s_q = case.q.shape[:2]
    idx = np.full((batch, s_q, topk), -1, dtype=np.int32)
    for b in range(batch):
        for t in range(s_q):
            n = int(case.seqlens[b])
            seen = min(max(n - s_q + t + 1, 0), n) if causal else n
            if seen:
                picks = rng.integers(0, seen, topk)
                keep = rng.random(topk) > 0.25
                idx[b, t] = np.where(keep, picks, -1)
    return idx


@pytest.fixture(scope="module")
def odd_case():
    """Page size 53 (not a power of two), GQA with a separate V, a zero-length sequence."""
    return amla.cases.build(batch=3, s_q=2, h_q=4, h_kv=2, d_qk=32, d_v=16, page_size=53,
                            seqlens=[300, 0, 60], separate_v=True, seed=21)


@pytest.mark.parametrize("causal", [False, True])
def test_sparse_golden_matches_numpy(odd_case, causal):
    c = odd_case
    idx = random_indices(c, 48, 1, causal)
    lengths = np.array([[48, 30], [0, 48], [5, 48]], dtype=np.int32)
    out, lse = amla.golden(**{**c.inputs(), "causal": causal}, indices=idx, topk_length=lengths)
    ref_out, ref_lse = numpy_sparse(c, idx, lengths)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(ref_lse))
    fin = np.isfinite(ref_lse)
    np.testing.assert_allclose(lse[fin], ref_lse[fin], rtol=1e-12)


@pytest.mark.parametrize("name", EMULATIONS)
def test_sparse_emulations_agree_with_golden(odd_case, name):
    c = odd_case
    idx = random_indices(c, 64, 2)
    sink = np.array([-1.0, 3.0, 0.5, -np.inf], dtype=np.float32)
    g = amla.golden(**c.inputs(), indices=idx, sink=sink)
    f = getattr(amla, name)(**c.inputs(), indices=idx, sink=sink, precision="float32",
                            block_size=16)
    np.testing.assert_allclose(f.out, g.out, rtol=0, atol=2e-6)
    e = getattr(amla, name)(**c.inputs(), indices=idx, sink=sink, block_size=16)
    np.testing.assert_allclose(e.out, g.out, rtol=0, atol=2e-2)


def test_topk_length_per_sequence_is_broadcast(odd_case):
    c = odd_case
    idx = random_indices(c, 16, 3)
    per_seq = np.array([10, 0, 16], dtype=np.int32)
    a = amla.golden(**c.inputs(), indices=idx, topk_length=per_seq)
    b = amla.golden(**c.inputs(), indices=idx, topk_length=np.repeat(per_seq[:, None], 2, axis=1))
    np.testing.assert_array_equal(a.out, b.out)
    np.testing.assert_array_equal(a.lse, b.lse)


def test_empty_rows_duplicates_and_topk_past_the_sequence():
    c = amla.cases.build(batch=1, s_q=2, h_q=2, d_qk=16, d_v=8, page_size=2, seqlens=[3], seed=4)
    # token 0: every key once, then key 1 again, topk 8 > seqlen 3; token 1: all invalid
    idx = np.array([[[0, 1, 2, 1, -1, -1, -1, -1], [-1] * 8]], dtype=np.int32)
    out, lse = amla.golden(**c.inputs(), indices=idx, empty_lse="+inf")
    ref_out, ref_lse = numpy_sparse(c, idx)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-13)
    assert np.all(out[0, 1] == 0) and np.all(lse[0, :, 1] == np.inf)  # FlashMLA's empty marker
    once = amla.golden(**c.inputs(), indices=np.where(np.arange(8) == 3, -1, idx).astype(np.int32))
    dense = amla.golden(**c.inputs())
    np.testing.assert_allclose(once.out[0, 0], dense.out[0, 0], rtol=1e-12)
    assert np.abs(out[0, 0] - once.out[0, 0]).max() > 1e-3  # the duplicate counts twice


def test_sinks_of_infinity_and_nan(small_case):
    c = small_case
    h_q = c.q.shape[2]
    plain = amla.base(**c.inputs())
    sink = np.zeros(h_q, dtype=np.float32)
    sink[0], sink[1], sink[2] = -np.inf, np.inf, np.nan
    r = amla.base(**c.inputs(), sink=sink)
    np.testing.assert_array_equal(r.lse, plain.lse)  # lse never includes the sink
    np.testing.assert_array_equal(r.out[:, :, 0], plain.out[:, :, 0])
    np.testing.assert_array_equal(r.out[:, :, 1], 0.0)
    seen = np.isfinite(plain.lse[:, 2, :]).T  # [s_q, batch] -> rows that see keys
    assert np.all(np.isnan(r.out[:, :, 2][seen.T]))
    assert np.all(r.out[:, :, 2][~seen.T] == 0)  # an empty row stays empty
    g = amla.golden(**c.inputs(), sink=np.full(h_q, 0.7, dtype=np.float32))
    ref = amla.golden(**c.inputs())
    fin = np.isfinite(ref.lse)
    factor = 1.0 / (1.0 + np.exp(np.float64(np.float32(0.7)) - ref.lse))  # [batch, h_q, s_q]
    want = ref.out * np.where(fin, factor, 1.0).transpose(0, 2, 1)[..., None]
    np.testing.assert_allclose(g.out, want, rtol=1e-13, atol=1e-15)


def test_sparse_and_sink_errors(odd_case):
    c = odd_case
    idx = random_indices(c, 8, 5)
    bad = idx.copy()
    bad[0, 1, 3] = 300  # sequence 0 has 300 keys
    with pytest.raises(ValueError, match=r"'sparse.indices'.*indices\[0\]\[1\]\[3\] = 300"):
        amla.base(**c.inputs(), indices=bad)
    with pytest.raises(ValueError, match="'indices'.*must be \\[batch, s_q, topk\\]"):
        amla.golden(**c.inputs(), indices=idx[:, :1])
    with pytest.raises(ValueError, match=r"'sparse.topk_length'.*topk_length\[0\]\[0\] = 9"):
        amla.golden(**c.inputs(), indices=idx, topk_length=np.full((3, 2), 9, dtype=np.int32))
    with pytest.raises(ValueError, match="'topk_length'.*needs indices"):
        amla.golden(**c.inputs(), topk_length=np.zeros(3, dtype=np.int32))
    with pytest.raises(ValueError, match="'sink'.*must be \\[h_q\\]"):
        amla.golden(**c.inputs(), sink=np.zeros(3, dtype=np.float32))
    with pytest.raises(ValueError, match="'sink'.*floating"):
        amla.golden(**c.inputs(), sink=np.zeros(4, dtype=np.int32))
