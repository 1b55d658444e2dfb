"""manifest.register under concurrent writers: several processes registering into one folder
at once lose no entry and leave no temporary file."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from yolo_sm.contract import manifest

ROOT = Path(__file__).resolve().parents[1]
WRITERS, EACH = 8, 12

CHILD = """
import sys, time
from pathlib import Path
from yolo_sm.contract.manifest import register
folder, me, each = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
while not (folder / "go").exists():  # start together
    time.sleep(0.001)
for k in range(each):
    register(folder, f"{me}_{k}", "c.parquet", "ceilings", "d", "cmd", params={"k": k})
"""


def _table(folder: Path) -> None:
    pd.DataFrame(
        {"ceiling": ["matmul_fp16"], "value": [1.0], "unit": ["TFLOP/s"], "median_ms": [2.0]}
    ).to_parquet(folder / "c.parquet")


def test_concurrent_writers_lose_no_entry(tmp_path):
    _table(tmp_path)
    manifest.register(tmp_path, "first", "c.parquet", "ceilings", "d", "cmd")
    env = {"PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path), f"w{i}", str(EACH)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(WRITERS)
    ]
    time.sleep(1.0)  # let every writer import and wait at the start line
    (tmp_path / "go").touch()
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * WRITERS, errors
    names = set(json.loads((tmp_path / "manifest.json").read_text())["datasets"])
    expected = {"first"} | {f"w{i}_{k}" for i in range(WRITERS) for k in range(EACH)}
    assert names == expected
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".partial"))
    assert left == []


def test_register_replaces_an_entry_and_keeps_the_others(tmp_path):
    _table(tmp_path)
    manifest.register(tmp_path, "a", "c.parquet", "ceilings", "one", "cmd")
    manifest.register(tmp_path, "b", "c.parquet", "ceilings", "two", "cmd")
    entry = manifest.register(tmp_path, "a", "c.parquet", "ceilings", "three", "cmd", {"n": 1})
    data = json.loads((tmp_path / "manifest.json").read_text())["datasets"]
    assert data["a"] == json.loads(json.dumps(entry)) and data["a"]["description"] == "three"
    assert data["b"]["description"] == "two" and data["a"]["rows"] == 1
