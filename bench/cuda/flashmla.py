#!/usr/bin/env python3
"""Times FlashMLA's Hopper dense decode kernel as bm_cuda_decode times amla's, on a GPU machine.

    python3 bench/cuda/flashmla.py [--passes N] [--filter LIST [--varlen]] [--amla-log FILE]
    python3 bench/cuda/flashmla.py --profile B S_Q S_K    five untimed launches of one shape, the
                                                          L2 flushed before the last four, for ncu
                                                          (as bm_cuda_decode --profile)
    python3 bench/cuda/flashmla.py --kernels B S_Q S_K    where one shape's time goes: each of
                                                          FlashMLA's kernels, traced

FlashMLA comes from the `flash_mla` package (the `sgl-flash-mla` wheel carries FlashMLA's SM90
kernels as `use_legacy=True`; it is not a dependency of amla: without it the script says so and
exits 2). The method is bm_cuda_decode's: b requests of s_k keys each, h_q 128, pages of 64 keys
in a shuffled block table, random BF16 inputs, the split-KV metadata made by a first call and
reused (as bm_cuda_decode's "plan reused"), 3 warm-up launches, then the median of 15 launches
timed with CUDA events, a 256 MB memset flushing the L2 before each, and
TFLOPS = 2 b s_q h_q s_k (576 + 512) / time. Besides its grid it times bm_cuda_decode's two mixed
batches (`flashmla/varlen`: b 512, s_q 1 and b 256, s_q 2, lengths in [1, 8191] from the same
sequence as bench_cuda.cuh's varlen_lengths, so that both programs time the same batch; TFLOPS
from the keys drawn), which --filter leaves out unless --varlen is given. Before each
configuration the GPU idles AMLA_CUDA_SETTLE_MS milliseconds (default 300), so that the card's
power management starts every configuration of both programs from the same state, and each line
ends with the SM clock that NVML reports right after the timed launches (torch.cuda.clock_rate,
where pynvml is importable; a coarser reading than bm_cuda_decode's, which counts cycles on the
SMs). Each configuration is timed once per pass; the lines
have bm_cuda_decode's form (`pass P  flashmla  b B s_q S s_k K pieces 0: T us F TFLOPS`), so that
bench/cuda/ab.sh's parser and a reader can set them beside amla's from the same call. With
--amla-log FILE (bm_cuda_decode's output from the same machine and run, as scripts/cuda.sh passes
it) the script ends with a table of each shape's fastest passes: FlashMLA's TFLOPS and amla's
hopper/standard, hopper/amla and hopper/amla/skip (at b 16 and b 1 also with the plan reused; for
the mixed batches hopper/standard/varlen, also with the plan reused) as fractions of it, and the two
AMLA kernels' speeds as fractions of hopper/standard's, to three places. With --kernels the 15
launches of one shape (after the same warm-up, each after the same flush) run under torch.profiler,
whose CUDA activity records (CUPTI) give each of FlashMLA's kernels (the split-KV decode kernel,
then the combine, which programmatic dependent launch may start before the decode kernel ends) its
start, end and duration, in microseconds after the end of the flush before it; the medians over the
launches are printed (kernel_spans).
"""

import argparse
import collections
import json
import os
import re
import statistics
import sys
import tempfile
import time

SHAPES = [  # (b, s_q, s_k): bm_cuda_decode's b 128 grid and its two split-KV shapes
    (128, 1, 1024), (128, 1, 4096), (128, 1, 16384),
    (128, 2, 1024), (128, 2, 4096), (128, 2, 16384),
    (16, 2, 4096), (1, 2, 16384),
]
VARLEN_SHAPES = [(512, 1, 4096), (256, 2, 4096)]  # bm_cuda_decode's /varlen batches
H_Q, D_QK, D_V, PAGE = 128, 576, 512, 64


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=2, help="passes over the shapes (default 2)")
    ap.add_argument("--filter", default="",
                    help='shapes as b,s_q,s_k triples separated by semicolons, e.g. '
                         '"128,2,4096;132,2,4096" (the grid\'s or any other)')
    ap.add_argument("--varlen", action="store_true",
                    help="with --filter, also the mixed batches (run by default without --filter)")
    ap.add_argument("--amla-log", help="bm_cuda_decode's output to compare against")
    ap.add_argument("--profile", nargs=3, type=int, metavar=("B", "S_Q", "S_K"),
                    help="launch one shape five times, untimed (for ncu)")
    ap.add_argument("--kernels", nargs=3, type=int, metavar=("B", "S_Q", "S_K"),
                    help="trace one shape's launches: each kernel's start, end and duration")
    args = ap.parse_args()
    if args.passes < 1:
        raise ValueError(f"--passes = {args.passes}: must be at least 1")
    if args.profile and args.kernels:
        raise ValueError("--profile and --kernels: give one of them")
    if args.kernels:
        args.passes = 1
    shapes = shapes_of(args.profile or args.kernels, args.filter, args.varlen,
                       "--kernels" if args.kernels else "--profile")
    settle_text = os.environ.get("AMLA_CUDA_SETTLE_MS", "300")
    if not settle_text.isdigit() or int(settle_text) > 60000:
        raise ValueError(f"AMLA_CUDA_SETTLE_MS = {settle_text!r}: must be a whole number of "
                         "milliseconds in [0, 60000]")
    settle_ms = int(settle_text)
    try:
        import torch
        import flash_mla
    except ImportError as e:
        print(f"flashmla.py: FlashMLA is not importable ({e}); install sgl-flash-mla",
              file=sys.stderr)
        return 2
    if not flash_mla.has_legacy():
        print("flashmla.py: this flash_mla has no SM90 kernels (use_legacy)", file=sys.stderr)
        return 2
    dev = torch.cuda.get_device_name()
    print(f"flashmla.py: {dev}, torch {torch.__version__}, flash_mla {flash_mla.__version__}")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    start = [torch.cuda.Event(enable_timing=True) for _ in range(15)]
    stop = [torch.cuda.Event(enable_timing=True) for _ in range(15)]
    best = {}
    for p in range(1, args.passes + 1):
        for b, s_q, s_k, varlen in shapes:
            g = torch.Generator(device="cuda").manual_seed(1000 * p + 7 * b + 3 * s_q + s_k)
            q = torch.randn(b, s_q, H_Q, D_QK, generator=g, device="cuda").to(torch.bfloat16)
            if varlen:
                lengths = varlen_lengths(b, s_q, s_k, p - 1)
                counts = [(n + PAGE - 1) // PAGE for n in lengths]
                pages = sum(counts)
                kv = torch.randn(pages, PAGE, 1, D_QK, generator=g,
                                 device="cuda").to(torch.bfloat16)
                order = torch.randperm(pages, generator=g, device="cuda").to(torch.int32).cpu()
                table = torch.zeros(b, max(counts), dtype=torch.int32)
                at = 0
                for r, n in enumerate(counts):
                    table[r, :n] = order[at:at + n]
                    at += n
                table = table.cuda()
                lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
                keys = sum(lengths)
            else:
                blocks = (s_k + PAGE - 1) // PAGE
                pages = b * blocks
                kv = torch.randn(pages, PAGE, 1, D_QK, generator=g,
                                 device="cuda").to(torch.bfloat16)
                table = torch.randperm(pages, generator=g, device="cuda").to(torch.int32)
                table = table.view(b, blocks)
                lens = torch.full((b,), s_k, dtype=torch.int32, device="cuda")
                keys = b * s_k
            meta, _ = flash_mla.get_mla_metadata()

            def launch():
                return flash_mla.flash_mla_with_kvcache(q, kv, table, lens, D_V, meta, None,
                                                        causal=False, use_legacy=True)

            launch()  # makes the metadata, reused below
            if args.profile:
                for _ in range(4):
                    flush.zero_()
                    launch()
                torch.cuda.synchronize()
                return 0
            torch.cuda.synchronize()
            time.sleep(settle_ms / 1000)
            for _ in range(3):
                flush.zero_()
                launch()
            if args.kernels:
                trace_kernels(torch, flush, launch, (b, s_q, s_k))
                return 0
            for i in range(15):
                flush.zero_()
                start[i].record()
                launch()
                stop[i].record()
            torch.cuda.synchronize()
            us = statistics.median(s.elapsed_time(e) for s, e in zip(start, stop)) * 1e3
            tflops = 2 * keys * s_q * H_Q * (D_QK + D_V) / (us * 1e-6) / 1e12
            name = "flashmla/varlen" if varlen else "flashmla"
            print(f"pass {p}  {name:<28s} b {b:3d} s_q {s_q} s_k {s_k:5d} pieces   0: "
                  f"{us:9.1f} us {tflops:7.1f} TFLOPS  SM {sm_clock_mhz(torch)} MHz (NVML)",
                  flush=True)
            key = (b, s_q, s_k, varlen)
            best[key] = max(best.get(key, 0.0), tflops)
            del q, kv, table
    if args.amla_log:
        compare(best, args.amla_log)
    return 0


def trace_kernels(torch, flush, launch, shape):
    """Runs 15 launches, each after a flush, under torch.profiler and prints kernel_spans of its
    CUDA kernel records."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(15):
            flush.zero_()
            launch()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"]
    b, s_q, s_k = shape
    print(f"flashmla kernels, b {b} s_q {s_q} s_k {s_k}: medians over the launches, us after the "
          "end of the flush before each")
    for name, start, end, dur in kernel_spans(events, "flash"):
        print(f"  {name[:72]:<72s} start {start:7.1f}  end {end:7.1f}  duration {dur:7.1f}")


def kernel_spans(events, marker):
    """The kernels of repeated launches, from trace events (dicts with name, ts and dur in us): an
    event whose name does not hold `marker` is a flush, and the events after it up to the next
    flush are one launch's kernels, in order of their start. Returns, for the i-th kernel of a
    launch (over the launches that have one), (name, median start, median end, median duration),
    start and end in us after the end of the launch's flush. Raises ValueError where no event
    follows a flush."""
    launches = []
    for e in sorted(events, key=lambda e: e["ts"]):
        if marker not in e["name"]:
            launches.append((e["ts"] + e["dur"], []))
        elif launches:
            launches[-1][1].append(e)
    launches = [(t, ks) for t, ks in launches if ks]
    if not launches:
        raise ValueError(f"kernel_spans: no kernel named with {marker!r} follows a flush")
    spans = []
    for i in range(max(len(ks) for _, ks in launches)):
        rows = [(t, ks[i]) for t, ks in launches if len(ks) > i]
        spans.append((rows[0][1]["name"],
                      statistics.median(k["ts"] - t for t, k in rows),
                      statistics.median(k["ts"] + k["dur"] - t for t, k in rows),
                      statistics.median(k["dur"] for _, k in rows)))
    return spans


def shapes_of(profile, filter_text, varlen, flag="--profile"):
    """The configurations to time, as (b, s_q, s_k, varlen): with `profile` (b, s_q, s_k, given
    as `flag`) that shape; with `filter_text` ("b,s_q,s_k;...") the grid's shapes it names in the
    grid's order, then any other it names, and the mixed batches only with `varlen`; else the grid
    and the mixed batches. Raises ValueError naming the argument for a malformed or non-positive
    shape."""
    if profile:
        if min(profile) < 1:
            raise ValueError(f"{flag} {tuple(profile)}: b, s_q and s_k must be positive")
        return [tuple(profile) + (False,)]
    if not filter_text:
        return [s + (False,) for s in SHAPES] + [s + (True,) for s in VARLEN_SHAPES]
    try:
        wanted = {tuple(int(x) for x in t.split(",")) for t in filter_text.split(";")}
    except ValueError:
        raise ValueError(f"--filter {filter_text!r}: must be b,s_q,s_k triples of integers "
                         "separated by semicolons") from None
    if any(len(t) != 3 or min(t) < 1 for t in wanted):
        raise ValueError(f"--filter {filter_text!r}: each shape must be three positive "
                         "integers b,s_q,s_k")
    shapes = [s + (False,) for s in [s for s in SHAPES if s in wanted] +
              sorted(wanted - set(SHAPES))]
    if varlen:
        shapes += [s + (True,) for s in VARLEN_SHAPES]
    return shapes


def varlen_lengths(b, s_q, s_k, p):
    """bench/cuda/bench_cuda.cuh's varlen_lengths: b lengths in [1, 2 s_k - 1] for pass p (0, 1,
    ...), from a 32-bit linear congruential generator seeded with 7 b + 3 s_q + p."""
    x = (7 * b + 3 * s_q + p) & 0xFFFFFFFF
    lengths = []
    for _ in range(b):
        x = (x * 1664525 + 1013904223) & 0xFFFFFFFF
        lengths.append(1 + (x >> 8) % (2 * s_k - 1))
    return lengths


def sm_clock_mhz(torch):
    """The SM clock NVML reports now, as text ("-" where torch cannot read it)."""
    try:
        return f"{torch.cuda.clock_rate():4d}"
    except Exception:  # pynvml missing, or NVML unavailable in this container
        return "   -"


# bm_cuda_decode's lines (a configuration's name may hold spaces: "hopper/standard/plan reused").
LINE = re.compile(r"pass \d+\s+(\S+(?: \S+)*?)\s+b\s+(\d+) s_q (\d+) s_k\s+(\d+) "
                  r"pieces\s+\d+:\s+[\d.]+ us\s+([\d.]+) TFLOPS")


def compare(flashmla, log):
    """Prints each shape's fastest FlashMLA pass beside amla's fastest passes in `log`."""
    amla = collections.defaultdict(float)
    with open(log) as f:
        for text in f:
            m = LINE.match(text)
            if m:
                key = (m[1], int(m[2]), int(m[3]), int(m[4]))
                amla[key] = max(amla[key], float(m[5]))
    kernels = ["hopper/standard", "hopper/amla", "hopper/amla/skip", "hopper/standard/plan reused",
               "hopper/amla/plan reused"]
    # The AMLA kernels' speeds as fractions of hopper/standard's, to three places: the integer
    # add's target is 0.95 of it (bench/CUDA_RESULTS.md).
    ratios = ["hopper/amla", "hopper/amla/skip"]
    print()
    print("| b, s_q, s_k | FlashMLA TFLOPS | " + " | ".join(kernels) + " | " +
          " | ".join(f"{k} / hopper/standard" for k in ratios) + " |")
    print("|---|---|" + "---|" * (len(kernels) + len(ratios)))
    for (b, s_q, s_k, varlen), ref in flashmla.items():
        shape = (b, s_q, s_k)
        # A mixed batch: bm_cuda_decode times hopper/standard/varlen, in index order and with a plan
        # made once (longest first).
        names = (["hopper/standard/varlen", None, None, "hopper/standard/varlen/plan reused", None]
                 if varlen else kernels)
        cells = []
        for k in names:
            t = amla.get((k,) + shape) if k else None
            cells.append(f"{t:.0f} ({t / ref:.2f}x)" if t else "-")
        std = amla.get(("hopper/standard",) + shape)
        for k in ratios:
            t = amla.get((k,) + shape)
            cells.append(f"{t / std:.3f}" if std and t and not varlen else "-")
        label = f"{b}, {s_q}, {s_k}" + (" (varlen)" if varlen else "")
        print(f"| {label} | {ref:.0f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
