"""Command line: ``python -m amla case --out DIR ...`` writes a decode case, its float64 golden
and the emulated low-precision output as .npy and raw little-endian .bin files, with case.json
describing every file (shape, dtype, layout), the problem's shape and options, and the lse
conventions: what .bin golden flows (CATLASS, ATB) read.

BF16 tensors are written as their uint16 bit patterns (.npy dtype uint16, json dtype
"bfloat16"). Golden outputs are written in float64 (golden_out_f64, golden_lse_f64) and rounded
once to float32 (golden_out, golden_lse).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

import amla
from amla import cases, flashinfer
from amla._decode import BF16

LAYOUTS = {
    "q": "[batch, s_q, h_q, d_qk]", "kv": "[num_pages, page_size, h_kv, d_qk]",
    "v": "[num_pages, page_size, h_kv, d_v]", "block_table": "[batch, max_pages_per_seq]",
    "seqlens": "[batch]", "out": "[batch, s_q, h_q, d_v]", "lse": "[batch, h_q, s_q]",
    "q_nope": "[batch * s_q, h_q, d_ckv]", "q_pe": "[batch * s_q, h_q, d_kpe]",
    "ckv": "[num_pages, page_size, d_ckv]", "kpe": "[num_pages, page_size, d_kpe]",
    "kv_indptr": "[batch + 1]", "kv_indices": "[pages used]", "kv_len": "[batch]",
    "last_page_len": "[batch]", "qo_indptr": "[batch + 1]",
    "out_flashinfer": "[batch * s_q, h_q, d_v]", "lse_flashinfer": "[batch * s_q, h_q]",
}


def _ints(text: str) -> list:
    return [int(x) for x in text.split(",") if x.strip()]


def _write(outdir: str, name: str, array, layout: str, files: dict) -> None:
    a = np.asarray(array)
    dtype = "bfloat16" if a.dtype == BF16 else str(a.dtype)
    raw = np.ascontiguousarray(a.view(np.uint16) if a.dtype == BF16 else a)
    raw = raw.astype(raw.dtype.newbyteorder("<"), copy=False)
    np.save(os.path.join(outdir, name + ".npy"), raw)
    raw.tofile(os.path.join(outdir, name + ".bin"))
    files[name] = {"npy": name + ".npy", "bin": name + ".bin", "shape": list(a.shape),
                   "dtype": dtype, "npy_dtype": str(raw.dtype), "layout": layout}


def case_command(args: argparse.Namespace) -> int:
    os.makedirs(args.out, exist_ok=True)
    c = cases.build(batch=args.batch, s_q=args.s_q, h_q=args.h_q, h_kv=args.h_kv, d_qk=args.d_qk,
                    d_v=args.d_v, page_size=args.page_size,
                    seqlens=_ints(args.seqlens) if args.seqlens else None,
                    random_seqlens=tuple(_ints(args.random_seqlens)) if args.random_seqlens else None,
                    separate_v=args.separate_v, distribution=(args.distribution, args.scale),
                    seed=args.seed, poison_unused=not args.no_poison, dtype=args.dtype,
                    causal=args.causal, softmax_scale=args.softmax_scale)
    conv = {"lse_base": args.lse_base, "empty_lse": args.empty_lse}
    common = dict(threads=args.threads, **conv)
    g = amla.golden(**c.inputs(), **common)
    emu_kw = {"precision": args.precision}
    if args.block_size:
        emu_kw["block_size"] = args.block_size
    e = amla.run(args.recurrence, **c.inputs(), options=emu_kw, **common)

    files: dict = {}
    if args.layout == "flashmla":
        for name in ("q", "kv", "v", "block_table", "seqlens"):
            if getattr(c, name) is not None:
                _write(args.out, name, getattr(c, name), LAYOUTS[name], files)
        outs = {"golden_out_f64": g.out, "golden_lse_f64": g.lse,
                "golden_out": g.out.astype(np.float32), "golden_lse": g.lse.astype(np.float32),
                "emulated_out": e.out, "emulated_lse": e.lse}
        for name, arr in outs.items():
            _write(args.out, name, arr, LAYOUTS["out" if "out" in name else "lse"], files)
    else:
        fi = c.flashinfer()
        for name, arr in fi.items():
            _write(args.out, name, arr, LAYOUTS[name], files)
        for prefix, res in (("golden", g), ("emulated", e)):
            o, l = flashinfer.outputs_to_flashinfer(res.out, res.lse)
            if prefix == "golden":
                _write(args.out, "golden_out_f64", o, LAYOUTS["out_flashinfer"], files)
                _write(args.out, "golden_lse_f64", l, LAYOUTS["lse_flashinfer"], files)
                o, l = o.astype(np.float32), l.astype(np.float32)
            _write(args.out, f"{prefix}_out", o, LAYOUTS["out_flashinfer"], files)
            _write(args.out, f"{prefix}_lse", l, LAYOUTS["lse_flashinfer"], files)

    shape = c.shape
    scale = args.softmax_scale if args.softmax_scale is not None else 1.0 / np.sqrt(shape["d_qk"])
    meta = {
        "amla_version": amla.__version__,
        "layout": args.layout,
        "shape": shape,
        "seqlens": [int(x) for x in c.seqlens],
        "options": {"causal": args.causal, "softmax_scale": float(np.float32(scale)),
                    "v_in_kv": c.v is None},
        "conventions": {**conv, "lse_layout": LAYOUTS["lse"] if args.layout == "flashmla"
                        else LAYOUTS["lse_flashinfer"],
                        "empty_rows": "out = 0; lse = the empty_lse value"},
        "golden": {"recurrence": "golden", "arithmetic": "float64"},
        "emulated": {"recurrence": args.recurrence, **emu_kw},
        "builder": {**c.params, "seed": c.seed},
        "files": files,
    }
    if hasattr(e, "report"):
        meta["emulated"]["amla_violations"] = e.report.violations
    with open(os.path.join(args.out, "case.json"), "w") as f:
        json.dump(meta, f, indent=2)
    print(f"amla case: wrote {len(files)} tensors (.npy + .bin) and case.json to {args.out}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m amla", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("case", help="write a decode case, its golden and the emulated output")
    c.add_argument("--out", required=True, help="output folder (created)")
    c.add_argument("--layout", choices=["flashmla", "flashinfer"], default="flashmla")
    c.add_argument("--batch", type=int, help="default: the number of --seqlens, else 1")
    c.add_argument("--s-q", type=int, default=1)
    c.add_argument("--h-q", type=int, default=128)
    c.add_argument("--h-kv", type=int, default=1)
    c.add_argument("--d-qk", type=int, default=576)
    c.add_argument("--d-v", type=int, default=512)
    c.add_argument("--page-size", type=int, default=64)
    c.add_argument("--seqlens", help="comma-separated lengths (one for all, or one per sequence)")
    c.add_argument("--random-seqlens", help="lo,hi: lengths drawn from [lo, hi]")
    c.add_argument("--separate-v", action="store_true")
    c.add_argument("--distribution", choices=["normal", "uniform"], default="normal")
    c.add_argument("--scale", type=float, default=1.0, help="s of N(0, s^2) or a of U(-a, a)")
    c.add_argument("--seed", type=int, default=0x5EED)
    c.add_argument("--no-poison", action="store_true", help="zero unused pages instead of NaN")
    c.add_argument("--dtype", choices=["bf16", "float32"], default="bf16")
    c.add_argument("--causal", action="store_true")
    c.add_argument("--softmax-scale", type=float)
    c.add_argument("--recurrence", default="base",
                   choices=["base", "amla", "seesaw", "transposed", "split_kv"],
                   help="the emulated kernel")
    c.add_argument("--precision", choices=["bf16", "float32"], default="bf16")
    c.add_argument("--block-size", type=int)
    c.add_argument("--lse-base", choices=["e", "2"], default="e")
    c.add_argument("--empty-lse", choices=["-inf", "+inf"], default="-inf")
    c.add_argument("--threads", type=int, default=0)
    c.set_defaults(func=case_command)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as e:
        print(f"amla: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
