"""Nsight Compute loader on a small real H200 capture (ncu --csv --page raw, with preamble)."""

import sys
import types
from pathlib import Path

import pandas as pd
import pytest

from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.core.profiling import ncu

FIXTURES = Path(__file__).parent / "fixtures"
RAW = FIXTURES / "ncu_raw_h200_small.csv"


def test_raw_page_loads_one_row_per_kernel_with_units_applied():
    df = ncu.load_ncu(RAW)
    assert len(df) == 20 and list(df.kernel_id) == list(range(20))
    for col in (
        "kernel_name",
        "duration_us",
        "achieved_occupancy_pct",
        "theoretical_occupancy_pct",
        "registers_per_thread",
        "shared_mem_per_block_bytes",
        "block_size",
        "grid_size",
        "waves_per_sm",
        "limit_registers",
        "nvtx_range",
        "nvtx_path",
    ):
        assert col in df, col
    first = df.iloc[0]
    assert first.kernel_name.startswith("sm80_xmma_fprop_implicit_gemm")
    assert first.block_size == 128 and first.grid_size == 6400
    assert first.registers_per_thread == 106 and first.theoretical_occupancy_pct == 25.0
    assert first.duration_us == pytest.approx(55.776)  # 55,776 ns in the file
    assert first.nvtx_path == "profiled_forward/yolov8_w0.25_fp16_nhwc_b8"
    assert first.nvtx_range == "yolov8_w0.25_fp16_nhwc_b8"
    assert (df.achieved_occupancy_pct <= df.theoretical_occupancy_pct + 1e-9).all()


def test_long_form_keeps_every_metric():
    long = ncu.load_ncu(RAW, long=True)
    assert set(long.columns) >= {"kernel_id", "metric", "unit", "value", "value_text"}
    assert long.metric.nunique() > 50  # the raw page carries device attributes too
    units = long[long.metric == "gpu__time_duration.sum"].unit.unique()
    assert list(units) == ["ns"]


@pytest.mark.parametrize(
    "text, exc, match",
    [
        ("", UserError, "no ncu CSV rows"),
        (
            "==PROF== Connected\n==ERROR== ERR_NVGPUCTRPERM - no permission\n",
            NotAvailableError,
            "administrator",
        ),
    ],
)
def test_bad_files_give_one_clear_error(tmp_path, text, exc, match):
    p = tmp_path / "x.csv"
    p.write_text(text)
    with pytest.raises(exc, match=match):
        ncu.load_ncu(p)


def test_truncated_file_is_detected(tmp_path):
    text = RAW.read_text()
    p = tmp_path / "cut.csv"
    p.write_text(text[: int(len(text) * 0.6)])
    with pytest.raises(UserError, match="truncated|corrupt"):
        ncu.load_ncu(p)


def test_missing_file_and_tool(tmp_path, monkeypatch):
    with pytest.raises(UserError, match="does not exist"):
        ncu.load_ncu(tmp_path / "nope.csv")
    monkeypatch.setenv("YOLO_SM_NCU", str(tmp_path / "no-ncu"))
    with pytest.raises(NotAvailableError, match="ncu"):
        ncu.command(["python", "x.py"], tmp_path / "o.csv")
    with pytest.raises(UserError, match="metric set"):
        ncu.command(["python", "x.py"], tmp_path / "o.csv", metric_set="nope")


def test_command_scopes_to_nvtx_and_leaves_clocks_alone(tmp_path, monkeypatch):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\n")
    monkeypatch.setenv("YOLO_SM_NCU", str(fake))
    cmd = ncu.command(["python3", "t.py"], tmp_path / "o.csv")
    assert cmd[0] == str(fake) and cmd[-2:] == ["python3", "t.py"]
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--nvtx-include") + 1] == "profiled_forward/"
    assert set(cmd[cmd.index("--metrics") + 1].split(",")) == set(ncu.METRIC_SETS["occupancy"])


# --- the .ncu-rep loader, on a fake ncu_report module -----------------------------------------


class FakeMetric:
    """What ncu_report's IMetric offers the loader: kind(), as_string(), as_double(), unit();
    no metric_type()/metric_unit(), which the module does not have for this."""

    ValueKind_STRING, ValueKind_DOUBLE = 1, 3

    def __init__(self, text: str, unit: str, number):
        self.text, self._unit, self.number = text, unit, number

    def kind(self):
        return self.ValueKind_DOUBLE if self.number is not None else self.ValueKind_STRING

    def as_string(self):
        return self.text

    def as_double(self):
        return self.number

    def unit(self):
        return self._unit


class FakeDomain:
    def __init__(self, name, ranges):
        self._name, self.ranges = name, tuple(ranges)

    def name(self):
        return self._name

    def push_pop_ranges(self):
        return self.ranges


class FakeNvtx:
    def __init__(self, path: str):
        # another library's domain first: the path is the default domain's, as in the CSV
        self.by_id = {3: FakeDomain("NCCL", ["allreduce"]), 0: FakeDomain("", path.split("/"))}

    def domains(self):
        return list(self.by_id)

    def domain_by_id(self, i):
        return self.by_id[i]


class FakeAction:
    def __init__(self, name, nvtx, metrics):
        self._name, self.nvtx, self.metrics = name, nvtx, metrics

    def name(self):
        return self._name

    def nvtx_state(self):
        return FakeNvtx(self.nvtx)

    def metric_names(self):
        return tuple(self.metrics)

    def metric_by_name(self, name):
        return self.metrics.get(name)


class FakeRange:
    def __init__(self, actions):
        self.actions = actions

    def num_actions(self):
        return len(self.actions)

    def action_by_idx(self, i):
        return self.actions[i]


def _fake_report_module(long):
    """An ncu_report module whose report holds the kernels and metrics of the CSV fixture
    (split in two ranges), numbers as doubles and text as strings, units spelled as the
    report module spells them."""
    spelled = {"ns": "nsecond"}
    actions = []
    for _, k in long.groupby("kernel_id", sort=True):
        metrics = {
            r.metric: FakeMetric(r.value_text, spelled.get(r.unit, r.unit), r.value)
            if r.value == r.value
            else FakeMetric(r.value_text, r.unit, None)
            for r in k.itertuples()
        }
        actions.append(FakeAction(k.kernel_name.iloc[0], k.nvtx_path.iloc[0], metrics))
    ranges = [FakeRange(actions[:7]), FakeRange(actions[7:])]

    class Context:
        def num_ranges(self):
            return len(ranges)

        def range_by_idx(self, i):
            return ranges[i]

    mod = types.ModuleType("ncu_report")
    mod.load_report = lambda path: Context()
    return mod


def test_report_loads_like_its_csv(tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO_SM_NCU", str(tmp_path / "no-ncu"))  # no CLI: the module reads it
    long = ncu.load_ncu(RAW, long=True)
    monkeypatch.setitem(sys.modules, "ncu_report", _fake_report_module(long))
    rep = tmp_path / "n.ncu-rep"
    rep.write_bytes(b"")
    got, want = ncu.load_ncu(rep), ncu.load_ncu(RAW)
    cols = [
        "kernel_id",
        "kernel_name",
        "nvtx_path",
        "nvtx_range",
        "config",
        "duration_us",  # nsecond in the report, ns in the CSV: both scaled to us
        "block_size",
        "registers_per_thread",
        "shared_mem_per_block_bytes",
        "theoretical_occupancy_pct",
        "achieved_occupancy_pct",
    ]
    pd.testing.assert_frame_equal(got[cols], want[cols], check_dtype=False)
    text = ncu.load_ncu(rep, long=True)
    text = text[text.value.isna() & (text.value_text != "")]
    assert len(text) > 0  # text metrics come through as text


FAKE_NCU = """#!{python}
import shutil, sys
args = sys.argv[1:]
fixture, mode = {fixture!r}, {mode!r}
if "--import" in args:  # print the report's raw page
    sys.stdout.write(open(fixture).read())
    sys.exit(0)
log = args[args.index("--log-file") + 1]
rep = args[args.index("--export") + 1]
assert rep.endswith(".ncu-rep") and "--force-overwrite" in args
open(rep, "wb").write(b"report")
open(log, "w").write(open(fixture).read() if mode == "csv" else "==PROF== Report: " + rep)
"""


@pytest.mark.parametrize("mode", ["csv", "report only"])
def test_profile_keeps_the_report_beside_the_csv(tmp_path, monkeypatch, mode):
    """ncu writes the CSV and the report; where it exported the report and printed no CSV,
    the CSV is the report's raw page. Both end under their names, no temporary file left."""
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, fixture=str(RAW), mode=mode))
    fake.chmod(0o755)
    monkeypatch.setenv("YOLO_SM_NCU", str(fake))
    out = tmp_path / "out" / "n.ncu.csv"
    out.parent.mkdir()
    df = ncu.profile(["python3", "t.py"], out)
    assert len(df) == 20 and df.nvtx_path.iloc[0] == "profiled_forward/yolov8_w0.25_fp16_nhwc_b8"
    assert ncu.report_path(out) == out.parent / "n.ncu-rep"
    import gzip  # the report is kept compressed beside the CSV

    assert gzip.decompress((out.parent / "n.ncu-rep.gz").read_bytes()) == b"report"
    assert sorted(p.name for p in out.parent.iterdir()) == ["n.ncu-rep.gz", "n.ncu.csv"]
    assert ncu.report_path(tmp_path / "a.csv").name == "a.ncu-rep"


def test_report_is_read_through_ncu_import_where_ncu_is_installed(tmp_path, monkeypatch):
    """With the ncu CLI at hand, a .ncu-rep is read from ``ncu --import --csv --page raw``:
    the same table as the profiled CSV, and the ncu_report module is never imported."""
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, fixture=str(RAW), mode="csv"))
    fake.chmod(0o755)
    monkeypatch.setenv("YOLO_SM_NCU", str(fake))
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # importing it would fail
    rep = tmp_path / "n.ncu-rep"
    rep.write_bytes(b"report")
    pd.testing.assert_frame_equal(ncu.load_ncu(rep), ncu.load_ncu(RAW))


def test_the_compressed_report_is_listed_in_the_manifest(tmp_path):
    import gzip

    from yolo_sm.contract import manifest

    ncu.load_ncu(RAW).to_parquet(tmp_path / "n.parquet")
    entry = manifest.register(tmp_path, "n", "n.parquet", "ncu", "d", "cmd")
    assert "report" not in entry  # no report beside it
    (tmp_path / "n.ncu-rep.gz").write_bytes(gzip.compress(b"report"))
    entry = manifest.register(tmp_path, "n", "n.parquet", "ncu", "d", "cmd")
    assert entry["report"] == "n.ncu-rep.gz"
