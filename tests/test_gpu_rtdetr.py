"""GPU test (marker ``gpu``): rtdetr-l.yaml, a model ultralytics ships by name, swept at fp16.
With random weights its query selection is discrete, so fp16 output differs from fp32 by design:
the default check fails every point in one sentence naming the check and --check off, the error
rows kept; with --check off the points are timed and say the check was off."""

import pandas as pd
import pytest

from yolo_sm.cli.main import main

pytestmark = pytest.mark.gpu
ARGS = ["--model", "rtdetr-l.yaml", "--precisions", "fp16", "--batches", "1,2", "-q"]


def test_rtdetr_sweep_fails_its_check_in_one_sentence_and_times_with_check_off(tmp_path, capsys):
    out = tmp_path / "checked.parquet"
    rc = main(["sweep", *ARGS, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    df = pd.read_parquet(out)
    if (df.status == "ok").any():  # the check passed on this GPU: nothing to relax
        assert rc == 0
    else:
        assert rc == 2 and len(err) == 1, err
        assert "NumericalMismatch" in err[0] and "--check off" in err[0]
        assert len(df) == 2 and (df.status == "error").all()
    off = tmp_path / "off.parquet"
    assert main(["sweep", *ARGS, "--check", "off", "--out", str(off)]) == 0
    df = pd.read_parquet(off)
    assert (df.status == "ok").all() and (df.check_input == "off").all()
    assert (df.median_ms > 0).all() and df.rel_err.isna().all()
