"""The diagnostic tools in tools/ that have a CPU dry run."""

import importlib.util
import json
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def _tool(name):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_eager_lottery_dry_run_on_the_cpu(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(TOOLS.parent))
    lot = _tool("eager_lottery")
    out = tmp_path / "lottery.jsonl"
    argv = ["--width", "0.25", "--imgsz", "64", "--procs", "2", "--device", "cpu"]
    assert lot.main([*argv, "--budget-ms", "20", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["proc"] for r in rows] == [0, 1] and len({r["pid"] for r in rows}) == 2
    assert all(r["median_ms"] > 0 and r["kernels_per_forward"] == 0 for r in rows)  # no GPU
    assert "2 processes, 1 distinct kernel sets" in capsys.readouterr().out
    # a bad request fails in the child and ends in one line and a non-zero exit
    assert lot.main(["--width", "0.25", "--imgsz", "65", "--procs", "1", "--device", "cpu",
                     "--out", str(tmp_path / "x.jsonl")]) == 1  # fmt: skip
    assert "process 0 failed" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()  # nothing half-written
