"""amla.testing: every criterion passes on a good kernel and fails on crafted bad ones."""

import numpy as np
import pytest

import amla
from amla import testing


@pytest.fixture(scope="module")
def outs():
    c = amla.cases.build(batch=2, h_q=8, d_qk=64, d_v=32, page_size=16, seqlens=[200, 90], seed=9)
    g = amla.golden(**c.inputs())
    e = amla.base(**c.inputs())
    k = amla.seesaw(**c.inputs())  # a kernel of the same precision, another schedule
    return g.out, e.out, k.out


def test_good_kernel_passes_everything(outs):
    g, e, k = outs
    testing.assert_close(k, g, emulated=e)
    for c in testing.compare(k, g, emulated=e,
                             criteria=["default", "flashmla", "catlass", "atb", "frobenius"]):
        assert c.passed, str(c)


def test_default_fails_on_one_bad_element_and_names_it(outs):
    g, e, k = outs
    bad = k.copy()
    bad[1, 0, 5, 7] += 0.05
    with pytest.raises(AssertionError) as err:
        testing.assert_close(bad, g, emulated=e)
    msg = str(err.value)
    assert "1 of" in msg and "[1, 0, 5, 7]" in msg and "worst rows" in msg


def test_default_fails_on_a_biased_kernel(outs):
    g, e, k = outs
    with pytest.raises(AssertionError, match="rel Frobenius"):
        testing.assert_close(k * (1 + 2e-3), g, emulated=e)


def test_default_without_emulated_uses_atol_rtol(outs):
    g, _, k = outs
    testing.assert_close(k, g)
    with pytest.raises(AssertionError):
        testing.assert_close(k, g, atol=1e-6, rtol=0)


def test_nonfinite_positions_must_match(outs):
    g, e, k = outs
    bad = k.copy()
    bad[0, 0, 0, 0] = np.nan
    for crit in ["default", "flashmla", "atb"]:
        with pytest.raises(AssertionError):
            testing.assert_close(bad, g, emulated=e, criteria=[crit])
    lse = np.array([1.0, -np.inf])
    assert not testing.flashmla(np.array([1.0, np.inf]), lse).passed
    assert testing.flashmla(lse.copy(), lse).passed


def test_flashmla_cos_diff_and_elements(outs):
    g, _, k = outs
    assert testing.flashmla(k, g).passed
    noisy = g + np.random.default_rng(0).normal(0, 5e-3, g.shape) * (np.abs(g) + 1e-3)
    r = testing.flashmla(noisy, g, abs_tol=1.0, rel_tol=1.0, cos_diff_tol=1e-7)
    assert not r.passed and "cos_diff" in r.detail
    off = k.copy()
    off[0, 0, 0, 0] += 0.1
    r = testing.flashmla(off, g)
    assert not r.passed and "[0, 0, 0, 0]" in r.detail


def test_catlass_ratios(outs):
    g, e, k = outs
    assert testing.catlass(k, g, e).passed
    worse = g + 8 * (e - g)
    r = testing.catlass(worse, g, e)
    assert not r.passed and "mean rel" in r.detail
    assert testing.catlass(worse, g, e, max_ratio=9, mean_ratio=9, rmse_ratio=9).passed


def test_atb_per_element_bound():
    g = np.array([0.5, 4.0, -100.0])
    assert testing.atb(g + np.array([2.0 ** -8, 4 * 2.0 ** -8, 90 * 2.0 ** -7]), g, k=7).passed
    assert not testing.atb(g + np.array([2.0 ** -6, 0, 0]), g, k=7).passed
    assert not testing.atb(g + np.array([0, 0, 101 * 2.0 ** -7]), g, k=7).passed


def test_frobenius(outs):
    g, e, k = outs
    assert testing.rel_frobenius(g, g) == 0.0
    assert testing.frobenius(k, g).passed
    assert not testing.frobenius(k, g, limit=1e-9).passed


def test_shape_mismatch_is_a_value_error(outs):
    g, e, k = outs
    with pytest.raises(ValueError, match="argument 'actual'"):
        testing.assert_close(k[0], g)
    with pytest.raises(ValueError, match="argument 'emulated'"):
        testing.assert_close(k, g, emulated=e[0])


def test_accepts_bf16_outputs(outs):
    g, e, k = outs
    testing.assert_close(k.astype(amla.BF16), g, emulated=e.astype(amla.BF16).astype(np.float64),
                         k=4.0)


def test_opposite_infinities_hint_at_conventions():
    g = np.array([[1.0, -np.inf]])
    with pytest.raises(AssertionError, match="lse convention mismatch"):
        testing.assert_close(np.array([[1.0, np.inf]]), g)
    testing.assert_close(amla.convert_lse(np.array([[1.0, np.inf]]), "flashmla", "amla"), g)
