"""torch CPU tensors go through DLPack with no copy (skipped when torch is not installed)."""

import numpy as np
import pytest

import amla

torch = pytest.importorskip("torch")


def test_float32_and_bfloat16_tensors():
    c = amla.cases.build(batch=2, h_q=4, d_qk=32, d_v=16, page_size=8, seqlens=[20, 7],
                         dtype="float32", seed=1)
    ref = amla.base(**c.inputs())
    t = {**c.inputs(), "q": torch.from_numpy(c.q), "kv": torch.from_numpy(c.kv),
         "block_table": torch.from_numpy(c.block_table), "seqlens": torch.from_numpy(c.seqlens)}
    np.testing.assert_array_equal(amla.base(**t).out, ref.out)
    tb = {**t, "q": t["q"].to(torch.bfloat16), "kv": t["kv"].to(torch.bfloat16)}
    np.testing.assert_array_equal(amla.base(**tb).out, ref.out)  # the values are BF16-exact


def test_writes_into_torch_outputs():
    c = amla.cases.build(h_q=4, d_qk=32, d_v=16, page_size=8, seqlens=[20], dtype="float32")
    out = torch.empty(1, 1, 4, 16)
    lse = torch.empty(1, 4, 1)
    res = amla.base(**c.inputs(), out=out, lse=lse)
    assert res.out is out
    np.testing.assert_array_equal(out.numpy(), amla.base(**c.inputs()).out)
    np.testing.assert_array_equal(lse.numpy(), amla.base(**c.inputs()).lse)
