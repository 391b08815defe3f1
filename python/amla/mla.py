"""The MLA cost model (mla/cost.hpp): naive, absorb and TyphoonMLA's mixed formulation priced on
the roofline of a hardware preset. Thin, for sweeps:

    amla.mla.cost("typhoon", batch=128, prefix_len=4096, suffix_len=512)["time_s"]
"""

from __future__ import annotations

from . import _amla

FORMULATIONS = ("naive", "absorb", "typhoon")
MODELS = ("deepseek_v3", "kimi_k2")
HARDWARE = ("ascend910", "typhoon_npu", "h100_sxm", "h800_sxm", "h800_sxm_throttled")


def cost(formulation: str, *, model: str = "deepseek_v3", hardware: str = "typhoon_npu",
         batch: int = 1, s_q: int = 1, prefix_len: int = 0, suffix_len: int = 0,
         bytes_per_element: float = 2.0, include_combine: bool = True) -> dict:
    """Roofline time of one decode step: ``batch`` requests of ``s_q`` query tokens, each
    attending a shared prefix of ``prefix_len`` tokens and its own ``suffix_len``. Returns a
    dict: formulation, time_s, kernels (name, macs, hbm_words, flops, hbm_bytes, compute_s,
    memory_s, time_s, compute_bound), typhoon_mixed (whether TyphoonMLA takes its mixed plan for
    this step) and typhoon_threshold (its equation 1 batch threshold)."""
    return _amla._mla_cost(formulation, model, hardware, batch, s_q, prefix_len, suffix_len,
                           float(bytes_per_element), include_combine)
