"""python -m amla case: the files it writes read back to the case and its outputs."""

import json
import subprocess
import sys

import numpy as np
import pytest

import amla
from amla.__main__ import main


def test_case_files_read_back(tmp_path):
    out = tmp_path / "case"
    rc = main(["case", "--out", str(out), "--batch", "2", "--h-q", "8", "--d-qk", "64",
               "--d-v", "32", "--page-size", "16", "--seqlens", "50,0", "--seed", "4",
               "--causal", "--s-q", "2", "--empty-lse", "+inf", "--recurrence", "amla"])
    assert rc == 0
    meta = json.loads((out / "case.json").read_text())
    assert meta["shape"]["batch"] == 2 and meta["options"]["causal"]
    assert meta["conventions"]["empty_lse"] == "+inf"
    files = meta["files"]
    for name, f in files.items():
        npy = np.load(out / f["npy"])
        raw = np.fromfile(out / f["bin"], dtype=f["npy_dtype"]).reshape(f["shape"])
        np.testing.assert_array_equal(npy, raw)
    assert files["q"]["dtype"] == "bfloat16"
    c = amla.cases.build(batch=2, s_q=2, h_q=8, d_qk=64, d_v=32, page_size=16, seqlens=[50, 0],
                         seed=4, causal=True)
    q = np.load(out / "q.npy").view(amla.BF16)
    np.testing.assert_array_equal(q, c.q)
    g = amla.golden(**c.inputs(), empty_lse="+inf")
    np.testing.assert_array_equal(np.load(out / "golden_out_f64.npy"), g.out)
    np.testing.assert_array_equal(np.load(out / "golden_lse.npy"), g.lse.astype(np.float32))
    e = amla.amla(**c.inputs(), empty_lse="+inf")
    np.testing.assert_array_equal(np.load(out / "emulated_out.npy"), e.out)
    assert np.isposinf(np.load(out / "emulated_lse.npy")[1]).all()


def test_flashinfer_layout(tmp_path):
    out = tmp_path / "fi"
    assert main(["case", "--out", str(out), "--layout", "flashinfer", "--h-q", "4", "--d-qk",
                 "48", "--d-v", "32", "--seqlens", "30", "--lse-base", "2"]) == 0
    meta = json.loads((out / "case.json").read_text())
    assert {"q_nope", "q_pe", "ckv", "kpe", "kv_indptr", "kv_indices"} <= set(meta["files"])
    assert meta["files"]["emulated_lse"]["shape"] == [1, 4]


def test_module_entry_point_and_errors(tmp_path):
    r = subprocess.run([sys.executable, "-m", "amla", "case", "--out", str(tmp_path / "x"),
                        "--h-q", "6", "--h-kv", "4", "--seqlens", "3"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "argument 'shape.h_kv'" in r.stderr
    with pytest.raises(SystemExit):
        main(["case"])


def test_batch_follows_seqlens(tmp_path):
    assert main(["case", "--out", str(tmp_path), "--h-q", "4", "--d-qk", "48", "--d-v", "32",
                 "--seqlens", "5,6,0"]) == 0
    meta = json.loads((tmp_path / "case.json").read_text())
    assert meta["shape"]["batch"] == 3 and meta["seqlens"] == [5, 6, 0]
