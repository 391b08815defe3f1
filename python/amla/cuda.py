"""amla's CUDA backend from Python: the float64 golden and the decode kernels (Base and AMLA) over
CUDA tensors, taken through DLPack without a copy (torch CUDA tensors; torch is never required by
amla itself, only by the caller that holds such tensors).

Present when the package was built with the CUDA backend::

    pip install . -C cmake.define.AMLA_ENABLE_CUDA=ON

otherwise ``amla.cuda.available`` is False (and ``amla.cuda.unavailable_reason`` says why) and the
functions raise RuntimeError. Layouts are amla's (the FlashMLA layout, see amla._decode):

    q            [batch, s_q, h_q, d_qk]                    bfloat16
    kv           [num_pages, page_size, h_kv, d_qk]         bfloat16 (V its first d_v columns)
    v            [num_pages, page_size, h_kv, d_v] or None  bfloat16
    block_table  [batch, max_pages_per_seq]                 int32
    seqlens      [batch]                                    int32

    out, lse = amla.cuda.golden(q, kv, block_table, seqlens, d_v=512)   # float64 on the GPU
    out, lse = amla.cuda.base(q, kv, block_table, seqlens, d_v=512)     # bfloat16 out, float32 lse
    out, lse = amla.cuda.amla(q, kv, block_table, seqlens, d_v=512)     # AMLA's integer add

    plan = amla.cuda.plan_decode(q, kv, block_table, seqlens, d_v=512)  # once per decode step
    out, lse = amla.cuda.base(q, kv, block_table, seqlens, d_v=512, plan=plan)  # every layer

Keywords: v, d_v (needed when V lives in kv), causal, softmax_scale, out and lse (caller tensors
to write; else new torch tensors on q's device), and for base/amla/decode kernel ("automatic",
"simple" or "hopper"), num_splits (0: sized from the batch and lengths), check_tables (copy the
tables to the host and validate them: synchronises; False for timing) and, for amla, rescale
("hardware" or "safe") and skip_unmoved (True: a step whose max did not move adds k = 0, the
identity, instead of the nudge's 8, as the CPU's ``amla.amla(skip_unmoved=True)``; the Hopper
kernel then skips the add where no row of a warp moved), workspace (a 1-D uint8 CUDA tensor of
at least ``workspace_bytes(...)`` bytes for the split-KV plan and partial outputs, used in stream
order; else each call allocates its own) and plan. The work goes on torch's current stream of q's
device.

The split-KV schedule (how many pieces each request is cut into) is sized from the batch and the
lengths in every call unless a plan is given: ``plan_decode`` sizes it once into its own
workspace and returns a DecodePlan, which later calls of the same batch, s_q and h_q on the same
device take as ``plan=`` (as FlashMLA's metadata is computed once per decode step and reused by
every layer): they size nothing and write their partial outputs into the plan's workspace, and for a
batch that fills a wave of CTAs they take its requests longest first, as the plan lists them (a
mixed batch's last CTAs then run its shortest requests: 9-10% less time on an H200). A plan
stays valid while each request's length needs the same number of pieces; a call whose lengths
need others is a ValueError naming the plan when the call checks its tables (check_tables, the
default), and otherwise stops the kernel with a device trap (the CUDA context is then lost). Errors in the arguments are ValueError naming the argument, its value and the
rule; CUDA failures RuntimeError.
"""

from __future__ import annotations

from typing import Optional

__all__ = ["available", "unavailable_reason", "golden", "decode", "base", "amla", "DecodePlan",
           "plan_decode", "workspace_bytes"]

import importlib.util

_ext = None
if importlib.util.find_spec(f"{__package__}._amla_cuda") is None:
    unavailable_reason = ("the package was built without the CUDA backend (pip install . -C "
                          "cmake.define.AMLA_ENABLE_CUDA=ON)")
else:
    try:
        from . import _amla_cuda as _ext
        unavailable_reason = ""
    except ImportError as e:  # e.g. no CUDA runtime on this machine
        unavailable_reason = f"its extension does not load: {e}"
available = _ext is not None


def _require():
    if _ext is None:
        raise RuntimeError(f"amla.cuda is not available: {unavailable_reason}")


def _torch_context(q):
    """torch (imported only now: the caller holds torch tensors), the device guard and stream."""
    import torch
    if not isinstance(q, torch.Tensor) or q.device.type != "cuda":
        return torch, None, 0
    return torch, torch.cuda.device(q.device), torch.cuda.current_stream(q.device).cuda_stream


def _on_device(guard, fn, *args, **kw):
    """fn(*args, **kw) under q's device guard (none for arrays that are not torch tensors)."""
    if guard is None:
        return fn(*args, **kw)
    with guard:
        return fn(*args, **kw)


def _outputs(torch, q, kv, v, d_v, out, lse, out_dtype, lse_dtype):
    if out is not None and lse is not None:
        return out, lse
    batch, s_q, h_q = q.shape[0], q.shape[1], q.shape[2]
    dv = v.shape[3] if v is not None else d_v
    if dv is None:
        raise ValueError("amla.cuda: argument 'd_v' = None violates: must be given when V is the "
                         "first d_v columns of kv (MLA: 512)")
    if out is None:
        out = torch.empty((batch, s_q, h_q, dv), dtype=out_dtype, device=q.device)
    if lse is None:
        lse = torch.empty((batch, h_q, s_q), dtype=lse_dtype, device=q.device)
    return out, lse


def golden(q, kv, block_table, seqlens, *, v=None, d_v: Optional[int] = None,
           causal: bool = False, softmax_scale: Optional[float] = None, out=None, lse=None,
           check_tables: bool = True):
    """Float64 softmax attention on the GPU (backend/cuda/golden.cuh, the mirror of
    attention/golden.hpp): (out [batch, s_q, h_q, d_v] float64, lse [batch, h_q, s_q] float64)."""
    _require()
    torch, guard, stream = _torch_context(q)
    out, lse = _outputs(torch, q, kv, v, d_v, out, lse, torch.float64, torch.float64)
    _on_device(guard, _ext.golden, q, kv, block_table, seqlens, out, lse, v=v, d_v=d_v,
               causal=causal, softmax_scale=softmax_scale, check_tables=check_tables,
               stream=stream)
    return out, lse


class DecodePlan:
    """A sized split-KV schedule on the GPU, made once by ``plan_decode`` and passed to decode,
    base or amla as ``plan=`` (see the module's text). It owns its workspace (``workspace``, a
    uint8 tensor): decode calls that take the plan and no workspace of their own write their
    partial outputs there, in stream order. batch, s_q and h_q are those it was made for, slots
    the pieces of one wave of the device it was sized on."""

    def __init__(self, handle, workspace):
        self._handle = handle
        self.workspace = workspace

    batch = property(lambda self: self._handle.batch)
    s_q = property(lambda self: self._handle.s_q)
    h_q = property(lambda self: self._handle.h_q)
    slots = property(lambda self: self._handle.slots)

    def __repr__(self):
        return (f"DecodePlan(batch={self.batch}, s_q={self.s_q}, h_q={self.h_q}, "
                f"slots={self.slots})")


def workspace_bytes(q, kv, block_table, seqlens, *, v=None, d_v: Optional[int] = None,
                    num_splits: int = 0) -> int:
    """Bytes of workspace decode needs for this shape on q's device (the split-KV plan and
    partial outputs; 0 when it needs none); an upper bound for any lengths."""
    _require()
    torch, guard, _ = _torch_context(q)
    return _on_device(guard, _ext.workspace_bytes, q, kv, block_table, seqlens, v=v, d_v=d_v,
                      num_splits=num_splits)


def plan_decode(q, kv, block_table, seqlens, *, v=None, d_v: Optional[int] = None,
                check_tables: bool = True, workspace=None) -> DecodePlan:
    """Sizes the split-KV schedule of this batch and these lengths once (as decode with
    num_splits 0 does in each call) into ``workspace`` (a 1-D uint8 CUDA tensor of at least
    ``workspace_bytes`` bytes; None: a new one on q's device) and returns its DecodePlan."""
    _require()
    torch, guard, stream = _torch_context(q)
    if workspace is None:
        n = _on_device(guard, _ext.workspace_bytes, q, kv, block_table, seqlens, v=v, d_v=d_v)
        workspace = torch.empty(n, dtype=torch.uint8, device=q.device)
    handle = _on_device(guard, _ext.plan_decode, q, kv, block_table, seqlens, workspace, v=v,
                        d_v=d_v, check_tables=check_tables, stream=stream)
    return DecodePlan(handle, workspace)


def decode(q, kv, block_table, seqlens, *, mode: str = "standard", v=None,
           d_v: Optional[int] = None, causal: bool = False, softmax_scale: Optional[float] = None,
           kernel: str = "automatic", rescale: str = "hardware", skip_unmoved: bool = False,
           num_splits: int = 0, check_tables: bool = True, workspace=None,
           plan: Optional[DecodePlan] = None, out=None, lse=None, return_launch: bool = False):
    """amla::cuda::decode: (out [batch, s_q, h_q, d_v] bfloat16, lse [batch, h_q, s_q] float32),
    and with return_launch a dict saying which kernel ran, its pieces and why automatic fell
    back to the simple kernel."""
    _require()
    if plan is not None and not isinstance(plan, DecodePlan):
        raise ValueError(f"amla.cuda.decode: argument 'plan' = {type(plan).__name__} violates: "
                         "must be a DecodePlan made by amla.cuda.plan_decode, or None")
    torch, guard, stream = _torch_context(q)
    if (plan is not None and isinstance(q, torch.Tensor)
            and isinstance(plan.workspace, torch.Tensor) and q.device != plan.workspace.device):
        raise ValueError(f"amla.cuda.decode: argument 'plan' = {plan!r} on "
                         f"{plan.workspace.device} violates: must be made on q's device "
                         f"({getattr(q, 'device', 'unknown')})")
    out, lse = _outputs(torch, q, kv, v, d_v, out, lse, torch.bfloat16, torch.float32)
    if plan is not None and workspace is None:
        workspace = plan.workspace
    launch = _on_device(guard, _ext.decode, q, kv, block_table, seqlens, out, lse, v=v, d_v=d_v,
                        causal=causal, softmax_scale=softmax_scale, mode=mode, kernel=kernel,
                        rescale=rescale, skip_unmoved=skip_unmoved, num_splits=num_splits,
                        check_tables=check_tables, workspace=workspace,
                        plan=None if plan is None else plan._handle, stream=stream)
    return (out, lse, launch) if return_launch else (out, lse)


def base(q, kv, block_table, seqlens, **kw):
    """decode with Base's rescale (backend/cuda/online_softmax.cuh)."""
    return decode(q, kv, block_table, seqlens, mode="standard", **kw)


def amla(q, kv, block_table, seqlens, **kw):
    """decode with AMLA's integer-add rescale (backend/cuda/amla.cuh)."""
    return decode(q, kv, block_table, seqlens, mode="amla", **kw)
