"""The simulator and cost-model bindings return the models' results as plain values."""

import pytest

import amla


def test_sim_decode_amla_beats_base():
    a = amla.sim.decode(batch=8, s_k=2048, variant="amla")
    b = amla.sim.decode(batch=8, s_k=2048, variant="base")
    assert a["ok"] and b["ok"]
    assert a["cycles"] > 0 and 0 < a["fu"] < 1
    assert a["time_us"] < b["time_us"]
    assert {p["pipe"] for p in a["pipes"]} >= {"MMAD", "Vector"}
    assert a["flops"] == pytest.approx(2 * 8 * 128 * 2048 * (576 + 512))


def test_sim_typhoon_chip():
    assert amla.sim.decode(chip="typhoon_npu", batch=4, s_k=1024)["ok"]


def test_sim_varlen_batch_and_theorem_b1():
    w = amla.sim.decode(seqlens=[4096, 512, 0, 2048], variant="amla")
    assert w["ok"] and w["tasks"] == 3  # the empty sequence gets no task
    assert w["flops"] == pytest.approx(2 * 128 * (4096 + 512 + 2048) * (576 + 512))
    uniform = amla.sim.decode(seqlens=[2048] * 8)
    assert uniform == amla.sim.decode(batch=8, s_k=2048)
    b1 = amla.sim.decode(batch=8, s_k=2048, schedule="theorem_b1")
    assert b1["ok"] and b1["cycles"] > 0
    with pytest.raises(ValueError, match="schedule"):
        amla.sim.decode(schedule="nope")


@pytest.mark.parametrize("f", amla.mla.FORMULATIONS)
def test_mla_cost(f):
    r = amla.mla.cost(f, batch=64, prefix_len=4096, suffix_len=512)
    assert r["formulation"] == f and r["time_s"] > 0
    assert r["time_s"] == pytest.approx(sum(k["time_s"] for k in r["kernels"]))
    assert len(r["kernels"]) == (3 if f == "typhoon" else 1)


def test_typhoon_threshold_on_its_npu():
    r = amla.mla.cost("typhoon", hardware="typhoon_npu", batch=128, prefix_len=8192,
                      suffix_len=256)
    assert r["typhoon_threshold"] == pytest.approx(61.4, abs=0.1)
    assert r["typhoon_mixed"]
