"""The simulator's decode model (sim/decode.hpp): an MLA decode kernel on a Cube/Vector chip
preset, simulated at tile level. Thin, for sweeps:

    [amla.sim.decode(batch=b, s_k=4096)["fu"] for b in (1, 8, 32, 96)]
"""

from __future__ import annotations

from . import _amla

CHIPS = ("ascend910", "typhoon_npu")


def decode(*, chip: str = "ascend910", batch: int = 96, s_q: int = 1, h_q: int = 128,
           s_k: int = 4096, seqlens=None, d_qk: int = 576, d_v: int = 512,
           causal: bool = False, kv_block: int = 512, variant: str = "amla",
           schedule: str = "automatic", max_rows_per_task: int = 256) -> dict:
    """Simulates one decode kernel call on a chip preset ("ascend910" | "typhoon_npu").

    The workload is `batch` sequences of `s_k` keys, or the per-sequence lengths `seqlens` (a
    varlen batch; then batch and s_k are ignored). variant "amla" | "base"; schedule
    "automatic" (Base serial, AMLA Figure 7's preload) | "serial" | "preload" | "theorem_b1"
    (the arrangement Theorem B.1 constructs). Returns a dict: ok, reason, cycles, time_us,
    flops, fu (FLOPS utilisation), hbm_bytes, hbm_utilization, tasks, rows_per_task,
    blocks_per_task, cores_used, and pipes (per pipe kind: busy, stalled_on_data,
    stalled_on_buffer, idle shares). A tiling or arrangement that does not fit comes back with
    ok False and the reason; malformed arguments raise ValueError."""
    if seqlens is None:
        if batch < 1:
            raise ValueError(f"amla.sim.decode: argument 'batch' = {batch} violates: must be >= 1")
        seqlens = [s_k] * batch
    return _amla._simulate_decode(chip, [int(x) for x in seqlens], s_q, h_q, d_qk, d_v, causal,
                                  kv_block, variant, schedule, max_rows_per_task)
