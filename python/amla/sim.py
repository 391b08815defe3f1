"""The simulator's decode model (sim/decode.hpp): an MLA decode kernel on a Cube/Vector chip
preset, simulated at tile level. Thin, for sweeps:

    [amla.sim.decode(batch=b, s_k=4096)["fu"] for b in (1, 8, 32, 96)]
"""

from __future__ import annotations

from . import _amla

CHIPS = ("ascend910", "typhoon_npu")


def decode(*, chip: str = "ascend910", batch: int = 96, s_q: int = 1, heads: int = 128,
           s_k: int = 4096, d_qk: int = 576, d_v: int = 512, kv_block: int = 512,
           variant: str = "amla", schedule: str = "automatic",
           max_rows_per_task: int = 256) -> dict:
    """Simulates one decode kernel call. variant "amla" | "base"; schedule "automatic" (Base
    serial, AMLA preload) | "serial" | "preload". Returns a dict: feasible, reason, cycles,
    time_us, flops, fu (FLOPS utilisation), hbm_bytes, hbm_utilization, tasks, rows_per_task,
    blocks_per_task, cores_used, and pipes (per pipe kind: busy, stalled_on_data,
    stalled_on_buffer, idle shares). A tiling that does not fit comes back with feasible False
    and the reason; malformed arguments raise ValueError."""
    return _amla._simulate_decode(chip, batch, s_q, heads, s_k, d_qk, d_v, kv_block, variant,
                                  schedule, max_rows_per_task)
