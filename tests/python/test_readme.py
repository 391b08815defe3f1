"""The README's "amla in your pytest suite" example, with amla.seesaw playing the kernel."""

import pytest

import amla


def my_kernel(**inputs):
    return amla.seesaw(**inputs, empty_lse="+inf")


@pytest.mark.parametrize("seqlen", [1, 63, 413])
@pytest.mark.parametrize("causal,s_q", [(False, 1), (True, 2)])
def test_my_mla_decode(seqlen, causal, s_q):
    case = amla.cases.build(batch=4, s_q=s_q, h_q=16, seqlens=[seqlen, 0, 7, seqlen],
                            causal=causal, seed=seqlen)
    out, lse = my_kernel(**case.inputs())
    golden = amla.golden(**case.inputs(), empty_lse="+inf")
    emulated = amla.base(**case.inputs())
    amla.testing.assert_close(out, golden.out, emulated=emulated.out)
    amla.testing.assert_close(lse, golden.lse, emulated=emulated.lse)
