"""A real ``.ncu-rep`` captured on the H200 (a tiny model, a few kernels) read through the
``ncu_report`` module of the ``ncu-report`` package (extra ``ncu``) gives the rows of the CSV
that Nsight Compute printed in the same run. Skipped where the fixture pair or the module is
missing."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from yolo_sm.core.profiling import ncu

FIXTURES = Path(__file__).parent / "fixtures"
REPORT = FIXTURES / "ncu_tiny_h200.ncu-rep"
TWIN = FIXTURES / "ncu_tiny_h200.csv"

pytestmark = pytest.mark.skipif(
    not (REPORT.exists() and TWIN.exists()), reason="the .ncu-rep fixture pair is not in the tree"
)


def test_real_report_loads_to_the_rows_of_its_csv(tmp_path, monkeypatch):
    pytest.importorskip("ncu_report")
    monkeypatch.setenv("YOLO_SM_NCU", str(tmp_path / "no-ncu"))  # no CLI: the module reads it
    got, want = ncu.load_ncu(REPORT), ncu.load_ncu(TWIN)
    assert len(got) == len(want) > 0
    for col in ("kernel_id", "kernel_name", "nvtx_path", "nvtx_range"):
        assert got[col].tolist() == want[col].tolist(), col
    numeric = [
        c
        for c in want.columns
        if c in got and pd.api.types.is_numeric_dtype(want[c]) and c != "kernel_id"
    ]
    assert "duration_us" in numeric
    for col in numeric:
        a, b = got[col].astype(float).to_numpy(), want[col].astype(float).to_numpy()
        # the CSV prints each value rounded (two decimals, or four significant digits)
        assert np.allclose(a, b, rtol=5e-3, atol=1e-2, equal_nan=True), (col, a, b)
