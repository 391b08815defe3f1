"""FlashInfer's layout maps to the FlashMLA layout and gives the same answers."""

import numpy as np
import pytest

import amla
from amla import flashinfer


@pytest.fixture(scope="module")
def case():
    return amla.cases.build(batch=3, s_q=2, h_q=8, d_qk=80, d_v=64, page_size=4,
                            seqlens=[37, 0, 12], seed=21)


@pytest.mark.parametrize("name", ["golden", "base", "amla"])
@pytest.mark.parametrize("causal", [False, True])
def test_both_layouts_agree(case, name, causal):
    fi = case.flashinfer()
    scale = 1.0 / np.sqrt(192)
    res_fi = getattr(flashinfer, name)(fi["q_nope"], fi["q_pe"], fi["ckv"], fi["kpe"],
                                       fi["kv_indptr"], fi["kv_indices"], fi["kv_len"],
                                       causal=causal, softmax_scale=scale)
    res = getattr(amla, name)(**{**case.inputs(), "causal": causal, "softmax_scale": scale})
    out_fi, lse_fi = flashinfer.outputs_to_flashinfer(res.out, res.lse)
    np.testing.assert_array_equal(res_fi.out, out_fi)
    np.testing.assert_array_equal(res_fi.lse, amla.convert_lse(lse_fi, "amla", "flashinfer"))
    assert res_fi.out.shape == (3 * 2, 8, 64) and res_fi.lse.shape == (6, 8)


def test_last_page_len_and_qo_indptr(case):
    fi = case.flashinfer()
    a = flashinfer.golden(fi["q_nope"], fi["q_pe"], fi["ckv"], fi["kpe"], fi["kv_indptr"],
                          fi["kv_indices"], last_page_len=fi["last_page_len"],
                          qo_indptr=fi["qo_indptr"])
    b = flashinfer.golden(fi["q_nope"], fi["q_pe"], fi["ckv"], fi["kpe"], fi["kv_indptr"],
                          fi["kv_indices"], fi["kv_len"])
    np.testing.assert_array_equal(a.out, b.out)


def test_round_trip(case):
    fi = case.flashinfer()
    back = flashinfer.to_flashmla(fi["q_nope"], fi["q_pe"], fi["ckv"], fi["kpe"],
                                  fi["kv_indptr"], fi["kv_indices"], fi["kv_len"])
    np.testing.assert_array_equal(back["q"], case.q)
    np.testing.assert_array_equal(back["seqlens"], case.seqlens)
    assert back["d_v"] == 64
    # the used pages hold the same keys
    for b, n in enumerate(case.seqlens):
        for s in range(n):
            p0 = case.block_table[b, s // 4]
            p1 = back["block_table"][b, s // 4]
            np.testing.assert_array_equal(back["kv"][p1, s % 4], case.kv[p0, s % 4])


def test_flashinfer_errors(case):
    fi = case.flashinfer()
    with pytest.raises(ValueError, match="argument 'kv_len'"):
        flashinfer.to_flashmla(fi["q_nope"], fi["q_pe"], fi["ckv"], fi["kpe"], fi["kv_indptr"],
                               fi["kv_indices"])
    with pytest.raises(ValueError, match="argument 'qo_indptr'"):
        flashinfer.to_flashmla(fi["q_nope"], fi["q_pe"], fi["ckv"], fi["kpe"], fi["kv_indptr"],
                               fi["kv_indices"], fi["kv_len"], qo_indptr=[0, 1, 4, 6])
    with pytest.raises(ValueError, match="argument 'kpe'"):
        flashinfer.to_flashmla(fi["q_nope"], fi["q_pe"], fi["ckv"], fi["kpe"][:1], fi["kv_indptr"],
                               fi["kv_indices"], fi["kv_len"])


def test_fp8_codes_and_tables_through_the_cpp_converter(case):
    # FP8 codes travel both ways bit for bit, like BF16 values (the converter copies elements).
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 256, case.kv.shape, dtype=np.uint8)
    fi = flashinfer.from_flashmla(case.q, codes, case.block_table, case.seqlens, d_v=64)
    assert fi["ckv"].dtype == np.uint8 and fi["ckv"].shape == codes.shape[:2] + (64,)
    back = flashinfer.to_flashmla(fi["q_nope"], fi["q_pe"], fi["ckv"], fi["kpe"], fi["kv_indptr"],
                                  fi["kv_indices"], last_page_len=fi["last_page_len"])
    np.testing.assert_array_equal(back["kv"], codes)
    np.testing.assert_array_equal(back["seqlens"], case.seqlens)
    # A last page holding more keys than a page is refused by the C++ validator.
    bad = fi["last_page_len"].copy()
    bad[0] = 5
    with pytest.raises(ValueError, match="argument 'last_page_len'"):
        flashinfer.to_flashmla(fi["q_nope"], fi["q_pe"], fi["ckv"], fi["kpe"], fi["kv_indptr"],
                               fi["kv_indices"], last_page_len=bad)
    with pytest.raises(ValueError, match="argument 'kv_indices'"):
        flashinfer.to_flashmla(fi["q_nope"], fi["q_pe"], fi["ckv"], fi["kpe"], fi["kv_indptr"],
                               np.full_like(fi["kv_indices"], 10**6), fi["kv_len"])
    with pytest.raises(ValueError, match="argument 'kv_indptr'"):
        flashinfer.to_flashmla(fi["q_nope"], fi["q_pe"], fi["ckv"], fi["kpe"],
                               fi["kv_indptr"].astype(np.int64) + 2**40, fi["kv_indices"],
                               fi["kv_len"])
