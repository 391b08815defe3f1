"""amla.cases: the problem builder's properties, seen from Python."""

import numpy as np

import amla


def test_poisoned_unused_pages_slots_and_table_entries():
    c = amla.cases.build(batch=2, h_q=4, d_qk=32, d_v=16, page_size=8, seqlens=[13, 0],
                         spare_pages=2, extra_table_columns=1, seed=1)
    kv = c.kv.astype(np.float32)
    used_page = c.block_table[0, 1]
    assert not np.isnan(kv[used_page, :5]).any()  # keys 8..12
    assert np.isnan(kv[used_page, 5:]).all()  # slots past the end
    used = {int(c.block_table[0, 0]), int(used_page)}
    for p in range(c.kv.shape[0]):
        if p not in used:
            assert np.isnan(kv[p]).all()
    n_pages = c.kv.shape[0]
    assert ((c.block_table[1] < 0) | (c.block_table[1] >= n_pages)).all()
    assert ((c.block_table[0, 2:] < 0) | (c.block_table[0, 2:] >= n_pages)).all()
    # and the recurrences never read them
    assert np.isfinite(amla.golden(**c.inputs()).out).all()


def test_seeds_reproduce_and_differ():
    a = amla.cases.build(h_q=4, d_qk=32, d_v=16, seqlens=[50], seed=7)
    b = amla.cases.build(h_q=4, d_qk=32, d_v=16, seqlens=[50], seed=7)
    c = amla.cases.build(h_q=4, d_qk=32, d_v=16, seqlens=[50], seed=8)
    np.testing.assert_array_equal(a.q.view(np.uint16), b.q.view(np.uint16))
    np.testing.assert_array_equal(a.block_table, b.block_table)
    assert not np.array_equal(a.q.view(np.uint16), c.q.view(np.uint16))


def test_values_do_not_depend_on_paging():
    a = amla.cases.build(batch=2, h_q=4, d_qk=32, d_v=16, page_size=8, seqlens=[40, 9], seed=5)
    b = amla.cases.build(batch=2, h_q=4, d_qk=32, d_v=16, page_size=3, seqlens=[40, 9], seed=5,
                         shuffle_pages=False, spare_pages=0)
    np.testing.assert_array_equal(amla.golden(**a.inputs()).out, amla.golden(**b.inputs()).out)


def test_random_varlen_with_zero_lengths():
    c = amla.cases.build(batch=16, h_q=2, d_qk=16, d_v=8, page_size=4, random_seqlens=(0, 5),
                         seed=3)
    assert c.seqlens.shape == (16,) and c.seqlens.min() >= 0 and c.seqlens.max() <= 5
    assert (c.seqlens == 0).any()
    r = amla.base(**c.inputs())
    assert np.isneginf(r.lse[c.seqlens == 0]).all()


def test_float32_dtype_and_separate_v_and_causal_recorded():
    c = amla.cases.build(h_q=4, h_kv=2, d_qk=32, d_v=24, seqlens=[20], dtype="float32",
                         separate_v=True, s_q=3, causal=True, softmax_scale=0.5)
    assert c.q.dtype == np.float32 and c.v.shape[-1] == 24
    assert c.inputs()["causal"] and c.inputs()["softmax_scale"] == 0.5
    assert c.shape["h_kv"] == 2 and c.shape["s_q"] == 3
    # values are BF16-exact unless asked otherwise
    np.testing.assert_array_equal(c.q, c.q.astype(amla.BF16).astype(np.float32))
    raw = amla.cases.build(h_q=4, d_qk=32, d_v=24, seqlens=[20], dtype="float32",
                           round_to_bf16=False)
    assert not np.array_equal(raw.q, raw.q.astype(amla.BF16).astype(np.float32))


def test_deepseek_preset():
    c = amla.cases.deepseek_mla(1, 100, seed=1)
    assert c.q.shape == (1, 1, 128, 576) and c.kv.shape[1:] == (64, 1, 576) and c.d_v == 512
