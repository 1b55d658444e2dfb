"""The grid runner on fake units and a fake clock: skips held units, runs a group together,
skips a group that would not fit (a sample stops there), writes after every unit, frees memory
per group."""

import pandas as pd
import pytest

from yolo_sm.contract import values
from yolo_sm.contract.errors import UserError
from yolo_sm.core import grid

UNITS = [("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 1)]


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


@pytest.fixture
def setup(monkeypatch, tmp_path):
    clock, log = Clock(), []
    monkeypatch.setattr(grid, "free_memory", lambda collect=True: log.append("free"))
    out = tmp_path / "g.parquet"

    def measure(unit, state):
        log.append(("measure", unit, state))
        clock.t += 10.0
        if out.exists():  # the rows of the units before this one are already on disk
            log.append(("on disk", len(pd.read_parquet(out))))
        return [{"model": unit[0], "batch": unit[1], "value": 1.0}]

    def open_group(unit):
        log.append(("open", unit[0]))
        return f"model {unit[0]}"

    kw = dict(
        key=lambda u: u,
        row_key=lambda r: (r["model"], r["batch"]),
        group=lambda u: u[0],
        open_group=open_group,
        out=out,
        columns=("model", "batch"),
        kind="test",
        clock=clock,
        seconds_column="unit_s",
        progress=False,
    )
    return clock, log, out, measure, kw


def test_a_group_runs_together_and_one_that_does_not_fit_is_skipped(setup, capsys):
    clock, log, out, measure, kw = setup
    # a: 2 units of 10 s; b would need 2 x 10 s with 15 s left: skipped; c's one unit fits
    df = grid.run_grid(UNITS, measure, deadline=35.0, **kw)
    assert [(r["model"], r["batch"]) for r in df.to_dict("records")] == [*UNITS[:2], UNITS[4]]
    err = capsys.readouterr().err
    assert (
        "skipping ('b', 1): its 2 unit(s) need about 20 s and would end past the deadline "
        "(15 s left)" in err
    )
    assert [e for e in log if e[0] == "open"] == [("open", "a"), ("open", "c")]
    assert ("measure", ("a", 2), "model a") in log  # the group's state reaches each unit
    assert ("on disk", 1) in log  # written after the first unit, before the second ran
    assert log.count("free") == 2 and log[-1] == "free"
    assert (df.unit_s == 10.0).all()
    assert len(pd.read_parquet(out)) == 3
    # the next run, with time for it, measures the group that was skipped
    log.clear()
    df = grid.run_grid(UNITS, measure, deadline=clock.t + 30.0, **kw)
    assert [e[1] for e in log if e[0] == "measure"] == UNITS[2:4] and len(df) == len(UNITS)


def test_a_rerun_skips_held_units_and_writes_nothing_when_done(setup):
    clock, log, out, measure, kw = setup
    grid.run_grid(UNITS[:2], measure, **kw)
    log.clear()
    df = grid.run_grid(UNITS, measure, **kw)
    measured = [e[1] for e in log if e[0] == "measure"]
    assert measured == UNITS[2:] and len(df) == len(UNITS)
    assert not df.duplicated(["model", "batch"]).any()
    before = out.read_bytes()
    log.clear()
    grid.run_grid(UNITS, measure, **kw)
    assert [e for e in log if e != "free"] == [] and out.read_bytes() == before


def test_an_incomplete_unit_is_measured_again_and_its_rows_replaced(setup):
    clock, log, out, measure, kw = setup
    grid.run_grid(UNITS[:1], measure, **kw)
    log.clear()
    # a unit counts as done only with a value of 2.0: every unit runs again, no duplicates
    df = grid.run_grid(
        UNITS[:2], measure, complete=lambda u, rows: any(r["value"] == 2.0 for r in rows), **kw
    )
    assert [e[1] for e in log if e[0] == "measure"] == UNITS[:2]
    assert len(df) == 2


def test_no_time_for_the_first_group_writes_nothing(setup):
    clock, log, out, measure, kw = setup
    df = grid.run_grid(UNITS, measure, deadline=5.0, estimate=lambda u, pace: 10.0, **kw)
    assert df.empty and not out.exists() and log == []


def test_a_foreign_table_is_refused_and_left_alone(setup):
    clock, log, out, measure, kw = setup
    pd.DataFrame({"x": [1]}).to_parquet(out)
    before = out.read_bytes()
    with pytest.raises(UserError, match="not a yolo_sm test table"):
        grid.run_grid(UNITS, measure, **kw)
    assert out.read_bytes() == before and log == []


def test_a_table_of_another_gpu_model_is_not_resumed(setup, monkeypatch):
    """Rows measured on an H200 are not resumed on an H100 or a CPU (one sentence, the table
    as it was); the same model resumes them, and a CPU's table resumes on the CPU."""
    clock, log, out, measure, kw = setup
    on = {"name": "NVIDIA H200"}
    monkeypatch.setattr(grid, "gpu_name", lambda device: on["name"])

    def tagged(unit, state):
        return [{**r, "prov_gpu_name": on["name"]} for r in measure(unit, state)]

    grid.run_grid(UNITS[:2], tagged, device="cuda", **kw)
    before = out.read_bytes()
    on["name"] = "NVIDIA H100 80GB HBM3"
    log.clear()
    with pytest.raises(UserError, match="rows measured on NVIDIA H200 and this GPU is NVIDIA H100"):
        grid.run_grid(UNITS, tagged, device="cuda", **kw)
    assert out.read_bytes() == before and log == []
    on["name"] = "NVIDIA H200"
    assert len(grid.run_grid(UNITS[:3], tagged, device="cuda", **kw)) == 3
    on["name"] = None  # a CPU does not add to a GPU's table either
    with pytest.raises(UserError, match="NVIDIA H200 and this run is on cpu"):
        grid.run_grid(UNITS, measure, device="cpu", **kw)
    n = len(pd.read_parquet(out))  # a GPU that torch cannot name: nothing to compare
    assert len(grid.run_grid(UNITS[:4], tagged, device="cuda", **kw)) == n + 1
    out.unlink()  # a CPU's own table (rows without a GPU name) resumes on the CPU
    grid.run_grid(UNITS[:2], measure, device="cpu", **kw)
    assert len(grid.run_grid(UNITS, measure, device="cpu", **kw)) == len(UNITS)


@pytest.mark.parametrize(
    "fn, value, expected",
    [
        (values.flag, "Yes", True),
        (values.flag, "off", False),
        (values.whole, "8", 8),
        (values.whole, 2.0, 2),
        (values.number, "0.5", 0.5),
    ],
)
def test_spec_values(fn, value, expected):
    assert fn(value, "x") == expected


@pytest.mark.parametrize(
    "fn, value", [(values.flag, "maybe"), (values.whole, "1.5"), (values.number, "x")]
)
def test_bad_spec_values_are_one_sentence(fn, value):
    with pytest.raises(UserError, match="^x must be"):
        fn(value, "x")


def test_split_list():
    assert values.items("1, 2,,3", "x") == ["1", "2", "3"]
    assert values.items((1, 2), "x") == [1, 2] and values.items(4, "x") == [4]


@pytest.mark.parametrize(
    "seen, device, name, clash",
    [
        (["NVIDIA H200"], "cuda", "NVIDIA H200", None),  # the same model adds to its rows
        (["NVIDIA H200", ""], "cuda:1", "NVIDIA H200", None),  # a nameless row says nothing
        (["NVIDIA H200"], "cuda", "NVIDIA H100 80GB HBM3", "this GPU is NVIDIA H100 80GB HBM3"),
        (["NVIDIA H200"], "cpu", None, "this run is on cpu"),
        (["NVIDIA H200"], "cuda", None, None),  # a GPU torch cannot name: nothing to compare
        (["NVIDIA H200"], None, None, None),
        ([], "cuda", "NVIDIA H100 80GB HBM3", None),  # a fresh folder, or CPU rows only
        ([], "cpu", None, None),
    ],
)
def test_gpu_clash_names_what_differs(seen, device, name, clash):
    from yolo_sm.core.provenance import gpu_clash

    assert gpu_clash(seen, device, name) == clash
