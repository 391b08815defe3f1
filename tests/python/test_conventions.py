"""amla.convert_lse (problem/conventions.hpp's convert_lse) and the named conventions."""

import math

import numpy as np
import pytest

import amla


def test_named_conventions():
    assert amla.AMLA_LSE == amla.LseConvention("e", "-inf")
    assert amla.FLASHMLA_LSE == amla.LseConvention("e", "+inf")
    assert amla.FLASHINFER_LSE.base == "2"


def test_convert_between_bases_and_empty_markers():
    lse = np.array([1.0, -np.inf, np.nan, 0.0, -3.5], np.float32)
    fm = amla.convert_lse(lse, from_="amla", to="flashmla")
    assert fm.dtype == np.float32
    np.testing.assert_array_equal(fm[[0, 3, 4]], lse[[0, 3, 4]])
    assert np.isposinf(fm[1]) and np.isnan(fm[2])
    two = amla.convert_lse(lse, from_="amla", to=("2", "-inf"))
    assert two[0] == np.float32(1.0) * np.float32(math.log2(math.e))
    back = amla.convert_lse(two, from_=("2", "-inf"), to="amla")
    np.testing.assert_allclose(back[[0, 3, 4]], lse[[0, 3, 4]], rtol=1e-6)
    # either infinity is an empty row
    assert np.isneginf(amla.convert_lse(np.array([np.inf]), from_="flashmla", to="amla")).all()
    # the input is not modified; float64 stays float64
    d = np.array([2.0, -np.inf])
    amla.convert_lse(d, to="flashmla")
    assert np.isneginf(d[1]) and amla.convert_lse(d).dtype == np.float64


def test_bad_convention():
    with pytest.raises(ValueError, match="argument 'to'"):
        amla.convert_lse(np.zeros(2), to="flashattention4")
    with pytest.raises(ValueError, match="argument 'base'"):
        amla.LseConvention("10", "-inf")
