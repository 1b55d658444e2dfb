"""manifest.register under concurrent writers: several processes registering into one folder
at once lose no entry and leave no temporary file."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from yolo_sm.contract import manifest, store

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


def test_embedding_drops_a_hand_written_key_the_entry_no_longer_holds(tmp_path):
    """A column text written by hand into the manifest is embedded in the table; once the entry
    says the schema's text again, embedding again drops it, and a rebuilt manifest says the
    schema's text."""
    _table(tmp_path)
    schema_text = manifest.register(tmp_path, "a", "c.parquet", "ceilings", "d", "cmd")["columns"]
    mf = tmp_path / "manifest.json"
    data = json.loads(mf.read_text())
    data["datasets"]["a"]["columns"] = {**schema_text, "value": "by hand"}
    mf.write_text(json.dumps(data))
    assert manifest.embed_registrations(tmp_path) == ["a"]
    assert manifest.rebuild(tmp_path)["a"]["columns"]["value"] == "by hand"
    data["datasets"]["a"]["columns"] = schema_text
    mf.write_text(json.dumps(data))
    assert manifest.embed_registrations(tmp_path) == ["a"]
    assert manifest.rebuild(tmp_path)["a"]["columns"] == schema_text
    assert manifest.embed_registrations(tmp_path) == []  # nothing left to rewrite


# --- schema: types and rows -----------------------------------------------------------------

from yolo_sm.contract import scrub  # noqa: E402
from yolo_sm.contract.errors import UserError  # noqa: E402
from yolo_sm.contract.schema import problems, validate  # noqa: E402

CEILING = {"ceiling": ["matmul_fp16"], "value": [1.0], "unit": ["TFLOP/s"], "median_ms": [2.0]}


def test_wrong_column_types_and_empty_tables_are_refused():
    ok = pd.DataFrame(CEILING)
    assert problems(ok, "ceilings") == []
    for col, bad in (("value", ["fast"]), ("median_ms", [True]), ("ceiling", [3.0])):
        df = ok.assign(**{col: bad})
        with pytest.raises(UserError, match=col) as err:
            validate(df, "ceilings", "c", source="c.parquet")
        assert "c.parquet" in str(err.value) and len(str(err.value).splitlines()) == 1
    with pytest.raises(UserError, match="no rows"):
        validate(ok.iloc[:0], "ceilings", "c")


def test_a_cpu_trace_may_hold_no_kernels_and_empty_columns_pass():
    from yolo_sm.contract.schema import REQUIRED

    empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in REQUIRED["kernels"]})
    assert problems(empty, "kernels") == []
    nulls = pd.DataFrame({**CEILING, "value": [None]})
    assert problems(nulls, "ceilings") == []  # an all-empty column is no type error


# --- provenance as a user would type it ------------------------------------------------------


def test_user_argv_names_the_program_and_relativises_paths(tmp_path):
    argv = ["/home/someone/venv/bin/yolo-sm", "collect", "--plan", f"{tmp_path}/p.yaml",
            f"--out={tmp_path}/data/cpu", "--only", "a"]  # fmt: skip
    assert scrub.user_argv(argv, cwd=tmp_path) == [
        "yolo-sm", "collect", "--plan", "p.yaml", "--out=data/cpu", "--only", "a",
    ]  # fmt: skip
    assert scrub.user_argv(["/x/yolo_sm/__main__.py", "sweep"], cwd="/")[0] == "yolo-sm"
    cmd = "/root/x/__main__.py collect --out /root/out/h200 --plan data/plans/full.yaml"
    assert scrub.scrub_command(cmd) == "yolo-sm collect --out h200 --plan data/plans/full.yaml"


def test_record_host_only_when_asked(monkeypatch):
    monkeypatch.delenv(scrub.RECORD_HOST_ENV, raising=False)
    assert not scrub.record_host()
    monkeypatch.setenv(scrub.RECORD_HOST_ENV, "1")
    assert scrub.record_host()


def test_scrub_root_keeps_every_value_and_drops_host_and_paths(tmp_path):
    cmd = "/home/u/yolo_sm/__main__.py collect --out /home/u/r"
    df = pd.DataFrame({**CEILING, "prov_hostname": ["box"], "prov_command": [cmd]})
    meta = {"argv": ["/home/u/m.py", "--out", "/home/u/x"], "provenance": {"hostname": "box"}}
    store.write_atomic(df, tmp_path / "c.parquet", meta)
    (tmp_path / "t.json.gz.metadata.json").write_text(json.dumps({"hostname": "box", "a": 1}))
    changed = scrub.scrub_root(tmp_path)
    assert len(changed) == 2 and scrub.scrub_root(tmp_path) == []  # a second run: nothing
    back = store.read_frame(tmp_path / "c.parquet")
    pd.testing.assert_frame_equal(back[list(CEILING)], df[list(CEILING)], check_exact=True)
    assert "prov_hostname" not in back and back.prov_command[0] == "yolo-sm collect --out r"
    text = json.dumps(store.read_metadata(tmp_path / "c.parquet"))
    text += (tmp_path / "t.json.gz.metadata.json").read_text()
    assert "/home" not in text and "box" not in text


def test_the_shipped_roots_hold_no_host_name_or_absolute_path():
    import re

    data = ROOT / "data"
    bad = re.compile(r"/home/|/root/|/work/|/Users/|\"hostname\"")
    for path in sorted(data.rglob("*")):
        if path.suffix == ".parquet":
            assert "prov_hostname" not in store.read_frame(path), path
            cmds = store.read_frame(path).get("prov_command", pd.Series(dtype=str))
            text = json.dumps(store.read_metadata(path)) + " ".join(map(str, cmds.unique()))
        elif path.suffix == ".json":
            text = path.read_text()
        else:
            continue
        assert not bad.search(text), (path, bad.search(text))


def test_a_shipped_manifest_is_rebuilt_from_its_tables_exactly(tmp_path):
    import shutil

    for root in ("h200", "cpu"):
        copy = tmp_path / root
        shutil.copytree(ROOT / "data" / root, copy)
        want = json.loads((copy / "manifest.json").read_text())["datasets"]
        (copy / "manifest.json").write_text("{ not json")
        with pytest.warns(UserWarning, match="rebuilt"):
            got = manifest.read_manifest(copy, repair=True)["datasets"]
        assert json.loads(json.dumps(got, default=str)) == want
