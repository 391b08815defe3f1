"""bench/cuda/flashmla.py's comparison table from bm_cuda_decode lines (no GPU needed)."""

import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "cuda" / "flashmla.py"


@pytest.fixture(scope="module")
def flashmla():
    spec = importlib.util.spec_from_file_location("flashmla_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BM_LOG = """\
pass 1  hopper/standard              b 128 s_q 2 s_k  4096 pieces 128:     520.0 us   560.0 TFLOPS
pass 2  hopper/standard              b 128 s_q 2 s_k  4096 pieces 128:     500.0 us   580.0 TFLOPS
pass 1  hopper/amla                  b 128 s_q 2 s_k  4096 pieces 128:     560.0 us   522.0 TFLOPS
pass 2  hopper/amla/skip             b 128 s_q 2 s_k  4096 pieces 128:     540.0 us   551.0 TFLOPS
pass 1  hopper/standard              b  16 s_q 2 s_k  4096 pieces  33:      96.0 us   380.0 TFLOPS
pass 1  hopper/standard/plan reused  b  16 s_q 2 s_k  4096 pieces  33:      91.0 us   400.0 TFLOPS
pass 1  hopper/standard/no-split     b 128 s_q 2 s_k  4096 pieces 128:     400.0 us   999.0 TFLOPS
pass 1  hopper/standard/varlen       b 256 s_q 2 s_k  4096 pieces 256:    1000.0 us   584.0 TFLOPS
pass 1  hopper/standard/varlen/plan reused b 256 s_q 2 s_k  4096 pieces 256:     900.0 us   642.0 TFLOPS
"""


def test_compare_takes_each_kernels_fastest_pass_as_a_fraction_of_flashmla(flashmla, tmp_path,
                                                                            capsys):
    log = tmp_path / "bench.log"
    log.write_text(BM_LOG)
    flashmla.compare({(128, 2, 4096, False): 725.0, (16, 2, 4096, False): 500.0,
                      (256, 2, 4096, True): 700.0}, str(log))
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| 128") or
            r.startswith("| 16") or r.startswith("| 256")]
    # The AMLA kernels' speeds as fractions of hopper/standard's to three places, the precision a
    # 0.95 target needs (522 / 580 = 0.9000, 551 / 580 = 0.9500).
    assert rows == [
        "| 128, 2, 4096 | 725 | 580 (0.80x) | 522 (0.72x) | 551 (0.76x) | - | - | 0.900 | 0.950 |",
        "| 16, 2, 4096 | 500 | 380 (0.76x) | - | - | 400 (0.80x) | - | - | - |",
        # A mixed batch: hopper/standard/varlen in index order and with the plan reused.
        "| 256, 2, 4096 (varlen) | 700 | 584 (0.83x) | - | - | 642 (0.92x) | - | - | - |",
    ]


def test_varlen_lengths_are_bench_cuda_cuh_s(flashmla):
    # The first lengths bench/cuda/bench_cuda.cuh's varlen_lengths(512, 1, 4096, 0) returns (the
    # C++ function compiled and run), so that both programs time the same mixed batch.
    lengths = flashmla.varlen_lengths(512, 1, 4096, 0)
    assert lengths[:5] == [5342, 3982, 815, 5256, 2194]
    assert len(lengths) == 512 and min(lengths) >= 1 and max(lengths) <= 8191
    assert flashmla.varlen_lengths(512, 1, 4096, 1) != lengths


def test_the_line_pattern_reads_names_with_spaces(flashmla):
    line = next(t for t in BM_LOG.splitlines() if "standard/plan reused  b  16" in t)
    m = flashmla.LINE.match(line)
    assert m is not None
    assert (m[1], m[2], m[3], m[4], m[5]) == ("hopper/standard/plan reused", "16", "2", "4096",
                                              "400.0")


def test_shapes_default_to_the_grid_then_the_mixed_batches(flashmla):
    shapes = flashmla.shapes_of(None, "", False)
    assert shapes == ([s + (False,) for s in flashmla.SHAPES] +
                      [s + (True,) for s in flashmla.VARLEN_SHAPES])


def test_a_filter_keeps_the_grids_order_then_other_shapes_and_mixed_batches_on_request(flashmla):
    text = "132,2,4096;128,2,4096;128,1,1024"
    assert flashmla.shapes_of(None, text, False) == [
        (128, 1, 1024, False), (128, 2, 4096, False), (132, 2, 4096, False)]
    assert flashmla.shapes_of(None, text, True)[3:] == [
        s + (True,) for s in flashmla.VARLEN_SHAPES]
    assert flashmla.shapes_of([4, 2, 64], text, True) == [(4, 2, 64, False)]


@pytest.mark.parametrize("text", ["128,2", "128,2,x", "0,2,4096", "128,2,4096;1,1,-5"])
def test_a_bad_filter_is_a_value_error_naming_it(flashmla, text):
    with pytest.raises(ValueError, match="--filter"):
        flashmla.shapes_of(None, text, False)


def test_a_bad_filter_is_refused_before_flashmla_is_imported(flashmla, monkeypatch):
    # Without torch or flash_mla installed the script would otherwise report the missing package.
    monkeypatch.setattr("sys.argv", ["flashmla.py", "--filter", "128,2"])
    with pytest.raises(ValueError, match="--filter"):
        flashmla.main()


def test_kernel_spans_times_each_kernel_of_a_launch_from_its_flush(flashmla):
    # Three launches, each a flush (a fill kernel) then the decode kernel and the combine, which
    # starts before the decode kernel ends; the third launch's combine is missing.
    events = []
    for at, decode_end, combine_end in [(0.0, 70.0, 75.0), (1000.0, 1072.0, 1079.0),
                                        (2000.0, 2068.0, None)]:
        events.append({"name": "vectorized_elementwise_kernel<FillFunctor>", "ts": at, "dur": 10.0})
        events.append({"name": "flash_fwd_splitkv_mla_kernel", "ts": at + 10.5,
                       "dur": decode_end - at - 10.5})
        if combine_end is not None:
            events.append({"name": "flash_fwd_mla_combine_kernel", "ts": decode_end - 3.0,
                           "dur": combine_end - decode_end + 3.0})
    spans = flashmla.kernel_spans(list(reversed(events)), "flash")
    assert [s[0] for s in spans] == ["flash_fwd_splitkv_mla_kernel", "flash_fwd_mla_combine_kernel"]
    name, start, end, dur = spans[0]
    assert (start, end) == (0.5, 60.0)  # the median of 60, 62 and 58 us after each flush's end
    assert dur == pytest.approx(59.5)
    name, start, end, dur = spans[1]
    assert (start, end) == (58.0, 67.0)  # the two launches that have one: (57, 65) and (59, 69)
    assert dur == pytest.approx(9.0)


def test_kernel_spans_refuses_a_trace_without_the_kernels(flashmla):
    with pytest.raises(ValueError, match="no kernel named with 'flash'"):
        flashmla.kernel_spans([{"name": "fill", "ts": 0.0, "dur": 1.0}], "flash")


@pytest.mark.parametrize("argv, message", [
    (["--kernels", "16", "0", "4096"],
     r"--kernels \(16, 0, 4096\): b, s_q and s_k must be positive"),
    (["--profile", "16", "2", "4096", "--kernels", "16", "2", "4096"],
     "--profile and --kernels: give one of them"),
])
def test_bad_kernels_arguments_are_refused_before_flashmla_is_imported(flashmla, monkeypatch,
                                                                         argv, message):
    monkeypatch.setattr("sys.argv", ["flashmla.py"] + argv)
    with pytest.raises(ValueError, match=message):
        flashmla.main()
