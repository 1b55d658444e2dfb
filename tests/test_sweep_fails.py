"""A sweep none of whose points was timed: one sentence naming the commonest failure and the
flag that relaxes a failed check, its error rows kept and registered; --check off times it."""

import json

import pandas as pd
import pytest

from yolo_sm.cli.main import main
from yolo_sm.core.sweep import all_failed

pytest.importorskip("torch")
MODEL = "tests.fixtures.user_model:discrete"
ARGS = ["--model", MODEL, "--input-shape", "3,64,64", "--device", "cpu", "--precisions",
        "bf16", "--batches", "1,2", "--budget-ms", "20", "--warmup-ms", "5", "-q"]  # fmt: skip


def test_all_failed_names_the_commonest_reason_and_the_flag():
    df = pd.DataFrame(
        {
            "status": ["error", "error", "oom"],
            "message": ["NumericalMismatch: a 0.6", "NumericalMismatch: b 0.7", "OOM"],
        }
    )
    text = all_failed(df)
    assert "2 failed with NumericalMismatch: a 0.6" in text and "--check off" in text
    assert all_failed(df.assign(status=["ok", "error", "oom"])) is None  # one point timed
    assert "--check off" not in all_failed(df.assign(message="RuntimeError: x"))


def test_a_sweep_whose_every_check_fails_keeps_its_rows_and_says_what_to_do(tmp_path, capsys):
    out = tmp_path / "s.parquet"
    assert main(["sweep", *ARGS, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NumericalMismatch" in err[0] and "--check off" in err[0]
    df = pd.read_parquet(out)
    assert len(df) == 2 and (df.status == "error").all() and "median_ms" in df
    off = tmp_path / "off.parquet"
    assert main(["sweep", *ARGS, "--check", "off", "--out", str(off)]) == 0
    df = pd.read_parquet(off)
    assert (df.status == "ok").all() and (df.check_input == "off").all()
    assert "timed, of which" in capsys.readouterr().out


def test_collect_registers_the_error_rows_before_the_sentence(tmp_path, capsys):
    import yaml

    plan = {
        "name": "one",
        "device": "cpu",
        "steps": [
            {
                "name": "s",
                "kind": "sweep",
                "out": "s.parquet",
                "params": {
                    "precisions": "bf16",
                    "batches": [1],
                    "budget_ms": 20,
                    "warmup_ms": 5,
                    "input_shape": [3, 64, 64],
                },  # fmt: skip
            }
        ],
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    root = tmp_path / "root"
    argv = ["collect", "--plan", str(path), "--model", MODEL, "--out", str(root), "-q"]
    assert main(argv) == 2
    assert "--check off" in capsys.readouterr().err
    entry = json.loads((root / "manifest.json").read_text())["datasets"]["s"]
    assert entry["rows"] == 1


def test_the_summary_counts_noisy_and_host_bound_points():
    from yolo_sm.cli.measure import worth

    df = pd.DataFrame(
        {
            "status": ["ok"] * 4 + ["error"],
            "noisy": [True, True, False, False, None],
            "host_bound": [False, True, True, False, None],
        }
    )
    text = worth(df)
    assert "4 timed, of which 1 steady, 2 noisy" in text and "2 host-bound" in text
    assert "1 error" in text
    steady = worth(df.assign(noisy=False, host_bound=False))
    assert "of which 4 steady, 0 noisy" in steady and "0 host-bound" in steady
