"""The recurrences through the bindings: golden against a numpy float64 attention, every
emulation against golden, caller outputs, dtypes, thread independence, empty rows, conventions."""

import numpy as np
import pytest

import amla
from conftest import numpy_attention

EMULATIONS = ["base", "amla", "seesaw", "transposed", "split_kv"]


@pytest.mark.parametrize("causal", [False, True])
def test_golden_matches_numpy_float64(small_case, causal):
    c = small_case
    out, lse = amla.golden(c.q, c.kv, c.block_table, c.seqlens, d_v=c.d_v, causal=causal)
    assert out.dtype == np.float64 and lse.dtype == np.float64
    ref_out, ref_lse = numpy_attention(c.q, c.kv, c.block_table, c.seqlens, c.d_v, causal=causal)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(ref_lse))
    fin = np.isfinite(ref_lse)
    np.testing.assert_allclose(lse[fin], ref_lse[fin], rtol=1e-12)


def test_golden_separate_v_gqa(gqa_case):
    c = gqa_case
    out, lse = amla.golden(**c.inputs())
    ref_out, ref_lse = numpy_attention(c.q, c.kv, c.block_table, c.seqlens, c.d_v, v=c.v)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-12)


def test_softmax_scale_is_used(small_case):
    c = small_case
    out, lse = amla.golden(**{**c.inputs(), "softmax_scale": 0.3})
    ref_out, ref_lse = numpy_attention(c.q, c.kv, c.block_table, c.seqlens, c.d_v, scale=0.3)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", EMULATIONS)
def test_float32_mode_agrees_with_golden(small_case, name):
    c = small_case
    g = amla.golden(**{**c.inputs(), "causal": True})
    res = getattr(amla, name)(**{**c.inputs(), "causal": True}, precision="float32", block_size=16)
    assert res.out.dtype == np.float32
    np.testing.assert_allclose(res.out, g.out, rtol=0, atol=2e-6)
    fin = np.isfinite(g.lse)
    np.testing.assert_array_equal(np.isfinite(res.lse), fin)
    np.testing.assert_allclose(res.lse[fin], g.lse[fin], rtol=1e-5)


@pytest.mark.parametrize("name", EMULATIONS)
def test_bf16_mode_close_to_golden_and_not_exact(small_case, name):
    c = small_case
    g = amla.golden(**c.inputs())
    res = getattr(amla, name)(**c.inputs(), block_size=16)
    err = np.abs(res.out - g.out).max()
    assert 0 < err < 2e-2
    amla.testing.assert_close(res.out, g.out, atol=2e-2, rtol=0)


def test_base_emulation_passes_derived_tolerance_against_itself(small_case):
    c = small_case
    g = amla.golden(**c.inputs())
    e = amla.base(**c.inputs())
    amla.testing.assert_close(e.out, g.out, emulated=e.out, k=1.0)
    # AMLA's bf16 recurrence errs within a few times Base's on ordinary data
    a = amla.amla(**c.inputs())
    amla.testing.assert_close(a.out, g.out, emulated=e.out, k=8.0)


@pytest.mark.parametrize("name", ["golden"] + EMULATIONS)
def test_results_do_not_depend_on_threads(name):
    c = amla.cases.build(batch=1, h_q=16, d_qk=64, d_v=32, page_size=16, seqlens=[300], seed=5)
    fn = getattr(amla, name)
    one = fn(**c.inputs(), threads=1)
    two = fn(**c.inputs(), threads=2)
    many = fn(**c.inputs(), threads=5)
    for r in (two, many):
        np.testing.assert_array_equal(one.out, r.out)
        np.testing.assert_array_equal(one.lse, r.lse)


def test_bf16_as_ml_dtypes_and_as_uint16_bits_agree(small_case):
    c = small_case
    assert c.q.dtype == amla.BF16
    a = amla.base(**c.inputs())
    bits = {**c.inputs(), "q": c.q.view(np.uint16), "kv": c.kv.view(np.uint16)}
    b = amla.base(**bits)
    np.testing.assert_array_equal(a.out, b.out)
    np.testing.assert_array_equal(a.lse, b.lse)
    # and a float32 copy of the same BF16 values gives the same golden
    f32 = {**c.inputs(), "q": c.q.astype(np.float32), "kv": c.kv.astype(np.float32)}
    np.testing.assert_array_equal(amla.golden(**c.inputs()).out, amla.golden(**f32).out)


def test_writes_into_caller_arrays(small_case):
    c = small_case
    b, s_q, h_q, _ = c.q.shape
    ref = amla.base(**c.inputs())
    out = np.full((b, s_q, h_q, c.d_v), 7.0, np.float32)
    lse = np.full((b, h_q, s_q), 7.0, np.float32)
    res = amla.base(**c.inputs(), out=out, lse=lse)
    assert res.out is out and res.lse is lse
    np.testing.assert_array_equal(out, ref.out)
    np.testing.assert_array_equal(lse, ref.lse)


def test_golden_into_float32_and_bf16_outputs(small_case):
    c = small_case
    g = amla.golden(**c.inputs())
    b, s_q, h_q, _ = c.q.shape
    out32 = np.empty((b, s_q, h_q, c.d_v), np.float32)
    lse32 = np.empty((b, h_q, s_q), np.float32)
    amla.golden(**c.inputs(), out=out32, lse=lse32)
    np.testing.assert_array_equal(out32, g.out.astype(np.float32))
    np.testing.assert_array_equal(lse32, g.lse.astype(np.float32))
    outbf = np.empty((b, s_q, h_q, c.d_v), amla.BF16)
    amla.golden(**c.inputs(), out=outbf)
    np.testing.assert_array_equal(outbf, g.out.astype(amla.BF16))
    new = amla.golden(**c.inputs(), out_dtype=amla.BF16)
    np.testing.assert_array_equal(new.out, outbf)


def test_strided_output_is_written_through_a_temporary(small_case):
    c = small_case
    b, s_q, h_q, _ = c.q.shape
    big = np.zeros((b, s_q, h_q, 2 * c.d_v), np.float32)
    view = big[..., ::2]
    amla.base(**c.inputs(), out=view)
    np.testing.assert_array_equal(view, amla.base(**c.inputs()).out)
    assert not big[..., 1::2].any()


def test_return_lse_false(small_case):
    res = amla.base(**small_case.inputs(), return_lse=False)
    assert res.lse is None and res.out.shape[-1] == small_case.d_v


def test_empty_rows_and_conventions(small_case):
    c = small_case  # sequence 1 has no keys
    for name in ["golden"] + EMULATIONS:
        res = getattr(amla, name)(**c.inputs())
        assert not res.out[1].any()
        assert np.isneginf(res.lse[1]).all()
    fm = amla.base(**c.inputs(), empty_lse="+inf")
    assert np.isposinf(fm.lse[1]).all()
    two = amla.base(**c.inputs(), lse_base="2")
    e = amla.base(**c.inputs())
    fin = np.isfinite(e.lse)
    np.testing.assert_allclose(two.lse[fin], e.lse[fin] * np.log2(np.e), rtol=1e-6)
    causal = amla.golden(**{**c.inputs(), "causal": True}, empty_lse="+inf", lse_base="2")
    np.testing.assert_array_equal(causal.lse,
                                  amla.convert_lse(amla.golden(**{**c.inputs(), "causal": True}).lse,
                                                   from_="amla", to=("2", "+inf")))


def test_causal_mtp_rows(small_case):
    """With s_q = 2 and causal, the first token sees one key fewer than the last."""
    c = small_case
    full = amla.golden(**c.inputs())
    causal = amla.golden(**{**c.inputs(), "causal": True})
    np.testing.assert_array_equal(causal.out[:, 1], full.out[:, 1])
    assert not np.array_equal(causal.out[0, 0], full.out[0, 0])


def test_amla_report_modes():
    # U(-30, 30) values make large exponent steps; checked mode locates what hardware counts.
    c = amla.cases.build(batch=1, h_q=4, d_qk=64, d_v=32, page_size=16, seqlens=[256],
                         distribution=("uniform", 30.0), seed=2)
    hw = amla.amla(**c.inputs(), block_size=16)
    assert isinstance(hw.report, amla.AmlaReport)
    assert hw.report.located.size == hw.report.violations  # located in hardware mode too
    assert hw.report.clamps.size == 0  # clamp events counted, not located
    assert hw.report.rescaled_elements == 4 * 32 * (256 // 16 - 1)
    checked = amla.amla(**c.inputs(), block_size=16, rescale="checked")
    np.testing.assert_array_equal(hw.out, checked.out)
    assert checked.report.violations == hw.report.violations == checked.report.located.size
    np.testing.assert_array_equal(checked.report.located, hw.report.located)
    assert checked.report.clamped == hw.report.clamped == checked.report.clamps.size
    safe = amla.amla(**c.inputs(), block_size=16, rescale="safe")
    assert safe.report.clamped == hw.report.clamped
    if not safe.report.clamped:  # the same steps: the same elements break Lemma 3.1
        assert safe.report.violations == hw.report.violations
    if safe.report.violations:
        d = safe.report.as_dicts()[0]
        assert set(d) == set(amla.VIOLATION_DTYPE.names)
        assert d["batch"] == 0 and 0 <= d["col"] < 32


def test_amla_clamp_events():
    """A max jump of 40 after 4096 keys of score 0: the clamped step keeps 2^-30 of them."""
    h_q, d = 1, 8
    q = np.zeros((1, 1, h_q, d), np.float32)
    q[..., 0] = 1.0
    kv = np.zeros((65, 64, 1, d), np.float32)  # 4097 keys in pages of 64
    kv[..., 1] = 64.0  # V column 1 (V = the first d_v columns of kv)
    kv[64, 0, 0, 0] = 40.0  # key 4096 scores 40
    kv[64, 0, 0, 1] = 0.0625
    table = np.arange(65, dtype=np.int32).reshape(1, 65)
    lens = np.array([4097], np.int32)
    args = dict(q=q, kv=kv, block_table=table, seqlens=lens, d_v=4, softmax_scale=1.0)
    golden = amla.golden(**args)
    hw = amla.amla(**args, rescale="checked")
    safe = amla.amla(**args, rescale="safe")
    assert golden.out[0, 0, 0, 1] == pytest.approx(0.0625, rel=1e-9)
    assert hw.out[0, 0, 0, 1] == pytest.approx(0.0627990, rel=1e-6)
    assert safe.out[0, 0, 0, 1] == pytest.approx(0.0625, rel=1e-6)
    for r in (hw, safe):
        assert r.report.clamped == 1
        assert r.report.clamps.tolist() == [(0, 0, 8, 0, -58.0)]


def test_amla_report_locates_zero_columns():
    """A V column of zeros makes O's element exactly 0: every rescale of it breaks Lemma 3.1."""
    c = amla.cases.build(batch=1, h_q=2, d_qk=32, d_v=16, page_size=8, seqlens=[64], seed=4,
                         dtype="float32", poison_unused=False)
    kv = c.kv.copy()
    kv[..., 3] = 0.0  # column 3 of V (and of K)
    r = amla.amla(**{**c.inputs(), "kv": kv}, block_size=16, rescale="checked")
    assert r.report.violations > 0
    assert (r.report.located["col"] == 3).all()
    assert r.report.located["before"][0] == 0.0
    safe = amla.amla(**{**c.inputs(), "kv": kv}, block_size=16, rescale="safe")
    assert (safe.out[..., 3] == 0).all()


def test_amla_options_change_the_answer(small_case):
    c = small_case
    a = amla.amla(**c.inputs(), block_size=16)
    b = amla.amla(**c.inputs(), block_size=16, compensation="none")
    n = amla.amla(**c.inputs(), block_size=16, nudge=0.0, n_cast="nearest_even",
                  exponent_clamp=-40)
    assert not np.array_equal(a.out, b.out)
    assert n.out.shape == a.out.shape


def test_amla_skip_unmoved_drops_the_nudge_drift(small_case):
    # seqlens 70 and 33 in blocks of 16: rows whose max stays put for a block take the nudge's
    # k = 8 by default and k = 0 with skip_unmoved; the two runs differ only by that drift.
    c = small_case
    a = amla.amla(**c.inputs(), block_size=16)
    s = amla.amla(**c.inputs(), block_size=16, skip_unmoved=True)
    assert not np.array_equal(a.out, s.out)
    np.testing.assert_allclose(s.out, a.out, rtol=1e-4, atol=1e-6)
    assert np.array_equal(a.lse, s.lse)


def test_transposed_reverse_and_split_counts(small_case):
    c = small_case
    f = amla.transposed(**c.inputs(), precision="float32", order="reverse")
    g = amla.golden(**c.inputs())
    np.testing.assert_allclose(f.out, g.out, atol=2e-6)
    for splits in (1, 3, 50):
        s = amla.split_kv(**c.inputs(), precision="float32", num_splits=splits, block_size=16)
        np.testing.assert_allclose(s.out, g.out, atol=2e-6)


def test_round_output_bf16(small_case):
    r = amla.base(**small_case.inputs(), round_output_bf16=True)
    np.testing.assert_array_equal(r.out, r.out.astype(amla.BF16).astype(np.float32))


FP16_EMULATIONS = ["base", "seesaw", "transposed", "split_kv"]


@pytest.mark.parametrize("name", FP16_EMULATIONS)
def test_fp16_mode_between_float32_and_bf16(small_case, name):
    c = small_case
    g = amla.golden(**c.inputs())
    f16 = getattr(amla, name)(**c.inputs(), precision="fp16", block_size=16)
    b16 = getattr(amla, name)(**c.inputs(), precision="bf16", block_size=16)
    err16 = np.abs(f16.out - g.out).max()
    assert 0 < err16 < 2e-2 / 8  # FP16 keeps 3 significand bits more than BF16
    assert err16 < np.abs(b16.out - g.out).max()


def test_round_output_fp16(small_case):
    r = amla.base(**small_case.inputs(), precision="fp16", round_output_fp16=True)
    np.testing.assert_array_equal(r.out, r.out.astype(np.float16).astype(np.float32))
    with pytest.raises(ValueError, match="round_output_fp16"):
        amla.base(**small_case.inputs(), round_output_fp16=True, round_output_bf16=True)


def test_amla_rejects_fp16(small_case):
    with pytest.raises(ValueError, match="precision::fp16"):
        amla.amla(**small_case.inputs(), precision="fp16")


def test_non_contiguous_input_is_read_correctly(gqa_case):
    c = gqa_case
    q_f = np.asfortranarray(c.q)
    np.testing.assert_array_equal(amla.golden(**{**c.inputs(), "q": q_f}).out,
                                  amla.golden(**c.inputs()).out)


def test_int64_tables_are_accepted(small_case):
    c = small_case
    r = amla.golden(**{**c.inputs(), "block_table": c.block_table.astype(np.int64),
                       "seqlens": list(c.seqlens)})
    np.testing.assert_array_equal(r.out, amla.golden(**c.inputs()).out)


class _DLPackOnly:
    """An array that offers nothing but the DLPack protocol and a shape, as a foreign tensor."""

    def __init__(self, a):
        self._a = a
        self.shape = a.shape

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_any_dlpack_object_in_and_out(gqa_case):
    c = gqa_case
    ref = amla.golden(**c.inputs())
    out = np.zeros_like(ref.out)
    res = amla.golden(**{**c.inputs(), "q": _DLPackOnly(c.q), "kv": _DLPackOnly(c.kv),
                         "v": _DLPackOnly(c.v)}, out=_DLPackOnly(out))
    np.testing.assert_array_equal(out, ref.out)  # written in place, through DLPack
    assert isinstance(res.out, _DLPackOnly)


def test_read_only_inputs(gqa_case):
    c = gqa_case
    q = c.q.copy()
    q.flags.writeable = False
    np.testing.assert_array_equal(amla.golden(**{**c.inputs(), "q": q}).out,
                                  amla.golden(**c.inputs()).out)


def test_concurrent_calls_from_python_threads(small_case):
    """The GIL is released while a recurrence runs: calls from several threads run side by side
    and give the same results as one at a time."""
    import threading

    c = small_case
    ref = {n: getattr(amla, n)(**c.inputs()).out for n in ["golden", "amla", "base"]}
    got, errors = {}, []

    def work(name, i):
        try:
            got[(name, i)] = getattr(amla, name)(**c.inputs(), threads=1).out
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n, i)) for n in ref for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for (name, _), out in got.items():
        np.testing.assert_array_equal(out, ref[name])


def test_out_dtype(small_case):
    c = small_case
    g = amla.golden(**c.inputs())
    g32 = amla.golden(**c.inputs(), out_dtype=np.float32)
    assert g32.out.dtype == np.float32 and g32.lse.dtype == np.float64
    np.testing.assert_array_equal(g32.out, g.out.astype(np.float32))
    with pytest.raises(ValueError, match="argument 'out_dtype'"):
        amla.base(**c.inputs(), out_dtype=np.int32)


# ---- caches in other formats: FP8 and NZ, read as their kernels read them -----------------------

@pytest.mark.parametrize("layout", ["v32", "model1"])
def test_flashmla_fp8_cache_gives_the_dequantized_result(layout):
    d_qk, d_v = (576, 512) if layout == "v32" else (512, 448)
    c = amla.cases.build(batch=2, h_q=4, d_qk=d_qk, d_v=d_v, page_size=64, seqlens=[100, 64],
                         seed=5)
    cache = amla.formats.quantize_flashmla(c.kv, layout)
    page_size = None if layout == "v32" else 64
    dense = amla.formats.dequantize_flashmla(cache, layout, page_size=page_size)
    kw = {**c.inputs(), "kv": cache, "kv_format": f"flashmla_{layout}", "page_size": page_size}
    for name in ["golden", "base", "seesaw", "transposed", "split_kv"]:
        want = getattr(amla, name)(**{**c.inputs(), "kv": dense})
        got = getattr(amla, name)(**kw)
        np.testing.assert_array_equal(got.out, want.out)
        np.testing.assert_array_equal(got.lse, want.lse)
    # The float64 golden on the unquantized values: the quantization error alone.
    exact = amla.golden(**c.inputs()).out
    quant = amla.golden(**kw).out
    rel = np.linalg.norm(quant - exact) / np.linalg.norm(exact)
    assert 1e-3 < rel < 5e-2
    fp16 = amla.base(**kw, precision="fp16")  # an FP16 kernel on the same cache
    assert np.abs(fp16.out - quant).max() < 2e-3


@pytest.mark.parametrize("group_size", [0, 16])
def test_scaled_fp8_cache_gives_the_dequantized_result(gqa_case, group_size):
    c = gqa_case
    kc, ks = amla.formats.quantize_scaled(c.kv, "e4m3", group_size=group_size)
    vc, vs = amla.formats.quantize_scaled(c.v, "e4m3", group_size=group_size)
    dk = amla.formats.dequantize_scaled(kc, ks, "e4m3", group_size=group_size)
    dv = amla.formats.dequantize_scaled(vc, vs, "e4m3", group_size=group_size)
    kw = {**c.inputs(), "kv": kc, "v": vc, "kv_format": "scaled", "kv_scales": ks,
          "v_scales": vs, "group_size": group_size}
    for name in ["golden", "base", "transposed"]:
        for precision in ([None] if name == "golden" else ["bf16", "fp16", "float32"]):
            extra = {} if precision is None else {"precision": precision}
            want = getattr(amla, name)(**{**c.inputs(), "kv": dk, "v": dv}, **extra)
            got = getattr(amla, name)(**kw, **extra)
            np.testing.assert_array_equal(got.out, want.out)


def test_nz_cache_gives_the_same_result(small_case):
    c = small_case
    nz = amla.formats.to_nz(c.kv)
    for name in ["golden", "base", "amla"]:
        want = getattr(amla, name)(**c.inputs())
        got = getattr(amla, name)(**{**c.inputs(), "kv": nz, "kv_format": "nz"})
        np.testing.assert_array_equal(got.out, want.out)


def test_bad_cache_formats_are_rejected(small_case):
    c = small_case
    with pytest.raises(ValueError, match="kv_format"):
        amla.base(**c.inputs(), kv_format="fp4")
    with pytest.raises(ValueError, match="kv_scales"):
        amla.base(**c.inputs(), kv_scales=np.ones(1, np.float32))
    with pytest.raises(ValueError, match="kv_scales"):
        amla.base(**{**c.inputs(), "kv": np.zeros((4, 16, 1, 96), np.uint8)}, kv_format="scaled")
