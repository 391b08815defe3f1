"""amla.cuda: the CUDA backend on torch CUDA tensors (skipped without the backend, torch or a
GPU). Compared with amla's CPU references on problems built by amla.cases."""

import numpy as np
import pytest

import amla

if not amla.cuda.available:
    pytest.skip(f"amla.cuda not built: {amla.cuda.unavailable_reason}", allow_module_level=True)
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)


def to_cuda(case):
    """The case's inputs as torch CUDA tensors (bfloat16 from the BF16 bit patterns; no rounding)."""
    d = {}
    for name in ("q", "kv", "v"):
        x = getattr(case, name)
        if x is None:
            d[name] = None
            continue
        bits = torch.from_numpy(np.ascontiguousarray(x).view(np.int16))
        d[name] = bits.view(torch.bfloat16).cuda()
    d["block_table"] = torch.from_numpy(case.block_table).cuda()
    d["seqlens"] = torch.from_numpy(case.seqlens).cuda()
    return d


@pytest.mark.parametrize("causal", [False, True])
def test_golden_matches_the_cpu_golden(causal):
    c = amla.cases.build(batch=3, s_q=2, h_q=16, seqlens=[300, 0, 65], seed=3, causal=causal)
    ref = amla.golden(**c.inputs())
    t = to_cuda(c)
    out, lse = amla.cuda.golden(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v,
                                causal=causal)
    assert out.dtype == torch.float64 and out.is_cuda
    np.testing.assert_allclose(out.cpu().numpy(), ref.out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lse.cpu().numpy(), ref.lse, rtol=1e-12, atol=1e-12)


def test_golden_with_a_separate_v():
    c = amla.cases.build(batch=2, s_q=1, h_q=8, h_kv=2, d_qk=64, d_v=32, page_size=16,
                         seqlens=[40, 9], separate_v=True, seed=4)
    ref = amla.golden(**c.inputs())
    t = to_cuda(c)
    out, lse = amla.cuda.golden(t["q"], t["kv"], t["block_table"], t["seqlens"], v=t["v"])
    np.testing.assert_allclose(out.cpu().numpy(), ref.out, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["base", "amla"])
def test_kernels_match_the_golden(mode):
    c = amla.cases.build(batch=2, s_q=2, h_q=128, seqlens=[1000, 64], seed=5)
    ref = amla.golden(**c.inputs())
    t = to_cuda(c)
    run = amla.cuda.base if mode == "base" else amla.cuda.amla
    out, lse, launch = run(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v,
                           return_launch=True)
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    assert launch["kernel"] in ("hopper", "simple")
    o = out.float().cpu().numpy()
    rel = np.linalg.norm(o - ref.out) / np.linalg.norm(ref.out)
    assert rel < 3e-3
    np.testing.assert_allclose(lse.cpu().numpy(), ref.lse, atol=1e-3)


def test_writes_into_caller_tensors_without_a_copy():
    c = amla.cases.build(batch=1, s_q=1, h_q=16, seqlens=[100], seed=6)
    t = to_cuda(c)
    out = torch.empty((1, 1, 16, c.d_v), dtype=torch.bfloat16, device="cuda")
    lse = torch.empty((1, 16, 1), dtype=torch.float32, device="cuda")
    o, l = amla.cuda.base(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v, out=out,
                          lse=lse)
    assert o is out and l is lse
    assert torch.isfinite(out.float()).all()


def test_bad_arguments_are_value_errors_naming_them():
    c = amla.cases.build(batch=1, s_q=1, h_q=16, seqlens=[10], seed=7)
    t = to_cuda(c)
    with pytest.raises(ValueError, match="'q'"):
        amla.cuda.base(t["q"].float(), t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v)
    with pytest.raises(ValueError, match="'kv'"):
        amla.cuda.base(t["q"], t["kv"].cpu(), t["block_table"], t["seqlens"], d_v=c.d_v)
    with pytest.raises(ValueError, match="'d_v'"):
        amla.cuda.golden(t["q"], t["kv"], t["block_table"], t["seqlens"])
    with pytest.raises(ValueError, match="'mode'"):
        amla.cuda.decode(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v, mode="x")
    with pytest.raises(ValueError, match="softmax_scale"):
        amla.cuda.base(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v,
                       softmax_scale=-1.0)


def stay_put_case():
    """b 1, s_q 1, h_q 128, 16384 keys whose max every row meets at key 0 (block 0) and never
    again: each of the 255 later blocks of 64 is an unmoved step, where the printed step adds the
    nudge's k = 8 (a factor of at least 1 + 4.7e-7 each, 1.2e-4 over the row) and skip_unmoved
    adds nothing. The large score comes from the last (RoPE) column of Q and K, which V does not
    hold, so that V stays random: no O element is 0, which the hardware add would garble."""
    c = amla.cases.build(batch=1, s_q=1, h_q=128, seqlens=[16384], seed=8,
                         distribution=("normal", 0.05), softmax_scale=1.0)
    q = c.q.astype(np.float32)
    kv = c.kv.astype(np.float32)
    q[..., -1] = 4.0
    kv[..., -1] = 0.0
    kv[c.block_table[0, 0], 0, :, -1] = 3.0  # q . k_0 about 12, every other score near 0
    c.q = q.astype(amla.BF16)
    c.kv = kv.astype(amla.BF16)
    return c


@pytest.mark.parametrize("kernel", ["automatic", "simple"])
def test_amla_skip_unmoved_matches_the_cpu_recurrence(kernel):
    c = stay_put_case()
    cpu = {skip: amla.amla(**c.inputs(), block_size=64, skip_unmoved=skip,
                           round_output_bf16=True).out for skip in (False, True)}
    t = to_cuda(c)
    gpu = {}
    for skip in (False, True):
        # One piece per request: every CTA walks all 256 blocks, as the CPU recurrence does.
        out, lse = amla.cuda.amla(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v,
                                  softmax_scale=1.0, kernel=kernel, num_splits=1,
                                  skip_unmoved=skip)
        o = out.float().cpu().numpy()
        assert np.isfinite(o).all()
        # The BF16 outputs of the same step differ only where the GPU's FP32 sums (another order
        # of additions) round across a BF16 boundary; the drift of the other step moves more.
        same = np.count_nonzero(o != cpu[skip])
        other = np.count_nonzero(o != cpu[not skip])
        assert 3 * same < other
        np.testing.assert_allclose(o, cpu[skip], rtol=1e-2, atol=1e-3)
        gpu[skip] = o
    # The printed step multiplies O by more than 1 at each unmoved block: where the two GPU outputs
    # differ (a few percent of them), the printed one is the larger in magnitude.
    moved = gpu[False] != gpu[True]
    assert np.count_nonzero(moved) > 0.01 * moved.size
    assert np.mean(np.abs(gpu[False][moved]) > np.abs(gpu[True][moved])) > 0.95


def split_case(seqlens, seed):
    """A batch small enough that the sized schedule cuts its requests into pieces (16 requests of
    s_q 2 and h_q 128 fill a quarter of an H100's wave)."""
    return amla.cases.build(batch=len(seqlens), s_q=2, h_q=128, seqlens=seqlens, seed=seed)


@pytest.mark.parametrize("mode", ["base", "amla"])
def test_a_reused_plan_gives_the_sized_call_bit_for_bit(mode):
    lens = [4096] * 8 + [3000, 64, 1, 4000, 2048, 700, 4096, 129]
    c = split_case(lens, seed=9)
    t = to_cuda(c)
    run = amla.cuda.base if mode == "base" else amla.cuda.amla
    plan = amla.cuda.plan_decode(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v)
    assert (plan.batch, plan.s_q, plan.h_q) == (16, 2, 128)
    sized, sized_lse, launch = run(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v,
                                   return_launch=True)
    # Two layers of one decode step: the same plan, other queries (the lengths unchanged).
    for layer in range(2):
        q = t["q"] if layer == 0 else t["q"].flip(2).contiguous()
        ref, ref_lse = run(q, t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v)
        out, lse, reused = run(q, t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v, plan=plan,
                               return_launch=True)
        assert reused["kernel"] == launch["kernel"] and reused["pieces"] == launch["pieces"]
        assert torch.equal(out.view(torch.int16), ref.view(torch.int16))
        assert torch.equal(lse, ref_lse)
    if launch["kernel"] == "hopper":
        assert launch["pieces"] > 16  # the schedule cut requests: the plan mattered


def test_a_plan_is_refused_for_other_lengths_and_other_shapes():
    c = split_case([4096] * 16, seed=10)
    t = to_cuda(c)
    plan = amla.cuda.plan_decode(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v)
    # Lengths that need other piece counts than the plan gave (checked with the tables).
    shorter = torch.full_like(t["seqlens"], 64)
    with pytest.raises(ValueError, match="plan"):
        amla.cuda.base(t["q"], t["kv"], t["block_table"], shorter, d_v=c.d_v, plan=plan)
    # Another batch.
    with pytest.raises(ValueError, match="plan"):
        amla.cuda.base(t["q"][:8], t["kv"], t["block_table"][:8], t["seqlens"][:8], d_v=c.d_v,
                       plan=plan)
    # Fixed splits and a plan at once.
    with pytest.raises(ValueError, match="plan|num_splits"):
        amla.cuda.base(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v, plan=plan,
                       num_splits=2)
    # Not a plan.
    with pytest.raises(ValueError, match="'plan'"):
        amla.cuda.base(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v,
                       plan={"batch": 16})
    # A workspace too small for the plan.
    small = torch.empty(64, dtype=torch.uint8, device="cuda")
    with pytest.raises(ValueError, match="workspace"):
        amla.cuda.plan_decode(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v,
                              workspace=small)


def test_a_caller_workspace_serves_calls_without_a_plan():
    c = split_case([2000] * 4, seed=11)
    t = to_cuda(c)
    n = amla.cuda.workspace_bytes(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v)
    assert n > 0
    ws = torch.empty(n, dtype=torch.uint8, device="cuda")
    ref, ref_lse = amla.cuda.base(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v)
    out, lse = amla.cuda.base(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v,
                              workspace=ws)
    assert torch.equal(out.view(torch.int16), ref.view(torch.int16))
    assert torch.equal(lse, ref_lse)
    with pytest.raises(ValueError, match="workspace"):
        amla.cuda.base(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v,
                       workspace=ws[:16])
    with pytest.raises(ValueError, match="'workspace'"):
        amla.cuda.base(t["q"], t["kv"], t["block_table"], t["seqlens"], d_v=c.d_v,
                       workspace=ws.view(torch.int8))
