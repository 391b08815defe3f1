"""Bad input raises ValueError with amla's message, naming the argument."""

import numpy as np
import pytest

import amla


def kw(case, **changes):
    d = case.inputs()
    d.update(changes)
    return d


@pytest.mark.parametrize("changes, arg", [
    (lambda c: {"q": c.q[0]}, "q"),
    (lambda c: {"q": c.q.astype(np.float64)}, "q"),
    (lambda c: {"kv": c.kv[..., :10]}, "kv"),
    (lambda c: {"kv": c.kv.astype(np.float32)}, "kv"),
    (lambda c: {"block_table": c.block_table[:1]}, "block_table"),
    (lambda c: {"block_table": c.block_table.astype(np.float32)}, "block_table"),
    (lambda c: {"seqlens": c.seqlens[:2]}, "seqlens"),
    (lambda c: {"seqlens": np.array([70, 0, 10**6], np.int32)}, "seqlens"),
    (lambda c: {"block_table": np.full_like(c.block_table, 10**5)}, "block_table"),
    (lambda c: {"d_v": 1000}, "shape.d_v"),
    (lambda c: {"d_v": None}, "d_v"),
    (lambda c: {"softmax_scale": -1.0}, "options.softmax_scale"),
    (lambda c: {"threads": -2}, "options.threads"),
    (lambda c: {"out": np.zeros((1, 2, 3, 4), np.float32)}, "out"),
    (lambda c: {"lse": np.zeros((3, 8, 2), np.int32)}, "lse"),
    (lambda c: {"lse_base": "10"}, "lse_base"),
    (lambda c: {"empty_lse": "nan"}, "empty_lse"),
])
def test_bad_argument_names_it(small_case, changes, arg):
    with pytest.raises(ValueError) as e:
        amla.base(**kw(small_case, **changes(small_case)))
    msg = str(e.value)
    assert f"argument '{arg}'" in msg
    assert "violates" in msg


@pytest.mark.parametrize("fn, options, arg", [
    (amla.base, {"precision": "fp8"}, "precision"),
    (amla.base, {"block_size": 0}, "base.block_size"),
    (amla.amla, {"compensation": "twice"}, "compensation"),
    (amla.amla, {"rescale": "fast"}, "rescale"),
    (amla.amla, {"n_cast": "up"}, "n_cast"),
    (amla.amla, {"exponent_clamp": 5}, "amla.exponent_clamp"),
    (amla.transposed, {"order": "sideways"}, "order"),
    (amla.split_kv, {"num_splits": 0}, "split.num_splits"),
    (amla.base, {"block_size": "64"}, "block_size"),
    (amla.amla, {"compensation": 3}, "compensation"),
    (amla.amla, {"nudge": "big"}, "nudge"),
    (amla.amla, {"skip_unmoved": "yes"}, "skip_unmoved"),
])
def test_bad_recurrence_option_names_it(small_case, fn, options, arg):
    with pytest.raises(ValueError, match=f"argument '{arg}'"):
        fn(**small_case.inputs(), **options)


def test_message_is_the_cpp_validators(small_case):
    with pytest.raises(ValueError) as e:
        amla.golden(**kw(small_case, seqlens=np.array([70, 0, 10**6], np.int32)))
    assert str(e.value).startswith("golden_decode: argument 'seqlens' = seqlens[2] = 1000000")


def test_read_only_output_rejected(small_case):
    c = small_case
    out = np.zeros((3, 2, 8, c.d_v), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'out'"):
        amla.base(**c.inputs(), out=out)


def test_builder_errors():
    with pytest.raises(ValueError, match="argument 'seqlens'"):
        amla.cases.build(batch=2, seqlens=[1, 2, 3])
    with pytest.raises(ValueError, match="argument 'dtype'"):
        amla.cases.build(h_q=2, seqlens=[4], dtype="fp8")
    with pytest.raises(ValueError, match="argument 'q_distribution'"):
        amla.cases.build(h_q=2, seqlens=[4], q_distribution=("cauchy", 1.0))
    with pytest.raises(ValueError, match="argument 'shape.h_kv'"):
        amla.cases.build(h_q=6, h_kv=4, seqlens=[4])


def test_model_errors():
    with pytest.raises(ValueError, match="argument 'chip'"):
        amla.sim.decode(chip="tpu")
    with pytest.raises(ValueError, match="argument 'formulation'"):
        amla.mla.cost("dense")
    with pytest.raises(ValueError, match="argument 'step.batch'"):
        amla.mla.cost("absorb", batch=0)
