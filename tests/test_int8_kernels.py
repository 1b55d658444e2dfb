"""yolo_sm's own int8 convolutions on CPU: the Triton implicit-GEMM kernel and the epilogue run
by Triton's interpreter against the exact emulation, the kernel choice, and the int8_kernels
step's spec and plan parameters."""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from yolo_sm.contract.errors import NotAvailableError, UserError


def test_triton_kernels_under_the_interpreter():
    """The Triton convolution and epilogue against the exact emulation, on CPU tensors
    (tests/fixtures/triton_int8_checks.py in a process with TRITON_INTERPRET=1)."""
    pytest.importorskip("triton")
    checks = Path(__file__).parent / "fixtures" / "triton_int8_checks.py"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(checks)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"\b5 passed\b", done.stdout), done.stdout[-2000:]


def test_kernel_choice_on_a_cpu():
    from yolo_sm.core.engines import EngineConfig, int8

    assert int8.choose_kernel("cpu") == "emulate"
    assert int8.choose_kernel("cpu", "emulate") == "emulate"
    with pytest.raises(NotAvailableError, match="triton needs a CUDA device"):
        int8.choose_kernel("cpu", "triton")
    assert EngineConfig(precision="int8", int8_kernel="triton").int8_kernel == "triton"
    with pytest.raises(UserError, match="unknown int8 kernel 'cublas'"):
        EngineConfig(precision="int8", int8_kernel="cublas")


def test_conv_rows_time_each_convolution_without_hand_off(monkeypatch):
    """Each convolution is timed alone on the fp16 input it sees: the engine whose forward
    captures those inputs hands nothing over in int8."""
    from yolo_sm.topics.precision import collect as int8_kernels

    seen = []

    def build(model, cfg):
        seen.append(cfg)
        raise RuntimeError("stop")

    monkeypatch.setattr(int8_kernels, "build_engine", build)
    spec = int8_kernels.Int8KernelSpec.from_mapping({"widths": [0.25]})
    with pytest.raises(RuntimeError, match="stop"):
        int8_kernels.conv_rows(spec, 0.25, torch.nn.Identity(), {})
    assert seen and seen[0].int8_handoff is False and seen[0].precision.value == "int8"


def test_int8_kernels_spec_and_plan_params():
    from yolo_sm.contract.plans import check_params
    from yolo_sm.topics.precision.collect import Int8KernelSpec

    spec = Int8KernelSpec.from_mapping({"widths": [1, 0.5], "model_kernels": "triton"})
    assert spec.widths == (1.0, 0.5) and spec.model_kernels == ("triton",)
    assert spec.units() == [(1.0, "conv"), (1.0, "model"), (0.5, "conv"), (0.5, "model")]
    assert Int8KernelSpec(model_kernels=()).units() == [(w, "conv") for w in (0.5, 1.0, 2.0)]
    with pytest.raises(UserError, match="conv_kernels must be one of"):
        Int8KernelSpec.from_mapping({"conv_kernels": ["cublas"]})
    with pytest.raises(UserError, match="device must be cuda"):
        Int8KernelSpec(device="cpu").validated()
    with pytest.raises(UserError, match="conv_kernels or model_kernels"):
        Int8KernelSpec.from_mapping({"conv_kernels": [], "model_kernels": []})
    check_params("int8_kernels", {"widths": [0.5], "conv_kernels": ["triton"]}, "step")
    with pytest.raises(UserError, match="int8_kernels"):
        check_params("int8_kernels", {"kernels": ["triton"]}, "step")


# --- the int8_kernels table: analysis, rules, notebook section (a real H200 table) ----------

FIXTURE = Path(__file__).parent / "fixtures" / "int8_kernels_h200.parquet"


@pytest.fixture
def table():
    import pandas as pd

    return pd.read_parquet(FIXTURE)


def _root(tmp_path, make_root, df):
    from yolo_sm.contract import manifest
    from yolo_sm.contract.datasets import open_root

    folder = make_root("k", ["ceilings"])
    df.to_parquet(folder / "int8_kernels.parquet")
    cmd = "yolo-sm collect --plan data/plans/full.yaml --out k --only int8_kernels"
    manifest.register(folder, "int8_kernels", "int8_kernels.parquet", "int8_kernels", "t", cmd)
    return open_root(folder)


def test_conv_times_pair_kernels_on_the_same_convolutions(table):
    from yolo_sm.topics.precision import int8_kernels as ik

    t = ik.conv_times(table)
    assert len(t) == table[(table.scope == "conv")].groupby(["width", "index"]).ngroups
    one = t[t.conv_class == "1x1"]
    assert one.intmm_ms.notna().all() and t[t.conv_class != "1x1"].intmm_ms.isna().all()
    row = t.iloc[0]
    int8 = [row[f"{k}_ms"] for k in ik.INT8 if not math.isnan(row[f"{k}_ms"])]
    assert row.best_ms == min(int8) and row[f"{row.best_int8}_ms"] == row.best_ms
    totals = ik.kernel_totals(t).set_index(["width", "kernel"])
    w = t.width.iloc[0]
    sub = t[t.width == w]
    # intmm against cuDNN only over the 1x1 convolutions it ran
    both = sub[sub.intmm_ms.notna()]
    assert totals.loc[(w, "intmm"), "cudnn_over"] == pytest.approx(
        both.cudnn_ms.sum() / both.intmm_ms.sum()
    )
    fastest = totals.xs(w)["fastest_of"].dropna()
    assert fastest.sum() == len(sub)


def test_facts_and_verdicts_flip_with_the_times(table):
    from yolo_sm.analyse.facts import facts_table
    from yolo_sm.report import rules
    from yolo_sm.report.rules import topic_rules
    from yolo_sm.topics.precision import int8_kernels as ik

    def verdict(df, rule_id):
        v = rules.evaluate(topic_rules("precision"), facts_table(ik.facts_of(df)), "t").set_index(
            "id"
        )
        return v.loc[f"int8_kernels_{rule_id}", "verdict"], v.loc[f"int8_kernels_{rule_id}"]

    base = {k: verdict(table, k)[0] for k in ("triton_beats_cudnn", "correct")}
    # make the Triton kernel 10x faster per convolution and per model: the verdicts flip
    fast = table.copy()
    tri = fast.kernel.eq("triton")
    fast.loc[tri, "median_ms"] /= 10
    fast.loc[tri & fast.scope.eq("model"), "img_per_s"] *= 10
    assert base["triton_beats_cudnn"] != verdict(fast, "triton_beats_cudnn")[0]
    assert verdict(fast, "triton_beats_cudnn")[0] == "holds"
    assert verdict(fast, "model_triton_beats_cudnn")[0] == "holds"
    # a kernel far off the emulation breaks correctness
    bad = table.copy()
    bad.loc[bad.kernel.eq("intmm") & bad.scope.eq("conv"), "rel_err"] = 0.2
    assert base["correct"] == "holds" and verdict(bad, "correct")[0] == "does not hold"


def test_ceiling_shares_need_the_ceilings_table(tmp_path, make_root, table):
    from yolo_sm.contract.hardware import ceiling
    from yolo_sm.topics.precision import int8_kernels as ik

    root = _root(tmp_path, make_root, table)
    rates = ik.kernel_rates(table, root)
    top = ceiling(root, "matmul_int8")[0]
    peak = rates[rates.kernel == "cudnn"].peak_tops.max()
    got = {f["key"]: f["value"] for f in ik.facts_of(table, root)}
    assert got["int8_kernels.cudnn_peak_of_int8_ceiling_pct"] == pytest.approx(100 * peak / top)
    assert not any(k.endswith("ceiling_pct") for k in (f["key"] for f in ik.facts_of(table)))


def test_model_speed_is_relative_to_the_same_width(table):
    from yolo_sm.topics.precision import int8_kernels as ik

    m = ik.model_speed(table).set_index(["width", "kernel"])
    for w in table.width.unique():
        assert m.loc[(w, "fp16"), "vs_fp16"] == 1.0 and m.loc[(w, "cudnn"), "vs_cudnn"] == 1.0
        ratio = m.loc[(w, "triton"), "img_per_s"] / m.loc[(w, "cudnn"), "img_per_s"]
        assert m.loc[(w, "triton"), "vs_cudnn"] == pytest.approx(ratio)


def test_the_notebook_section_renders_from_a_root_and_says_when_it_lacks_the_table(
    tmp_path, make_root, table
):
    from yolo_sm.contract import manifest
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.topics.precision import report as eight_bit_plots

    root = _root(tmp_path, make_root, table)
    out = eight_bit_plots.kernels_section(root)
    assert isinstance(out, tuple) and len(out) == 6
    assert out[-1].layout.title.text.startswith("Convolution time per class and kernel, batch 64")
    assert root.partial("int8_kernels") == "" and "partial" not in out[0]
    assert out[0].startswith("`k/int8_kernels` holds widths 0.5, 1.")
    # a step registered part-way says so (core.plans.progress_note's prefix)
    desc = "PARTIAL (4 of 6 (width, scope) units; the same command resumes it): t"
    info = root.info("int8_kernels")
    manifest.register(root.path, "int8_kernels", info["file"], "int8_kernels", desc, "c")
    assert root.partial("int8_kernels") == "4 of 6 (width, scope) units"
    out = eight_bit_plots.kernels_section(root)
    assert "partial (4 of 6 (width, scope) units of its plan step measured)" in out[0]
    lacking = eight_bit_plots.kernels_section(open_root(make_root("none", ["ceilings"])))
    assert isinstance(lacking, str) and "int8_kernels" in lacking


def _fake_measurements(monkeypatch, conv_rows, model_rows):
    """The step's measurements replaced by ``conv_rows`` / ``model_rows``, on a pretend GPU
    whose provenance is ``gpu_name`` "a GPU"."""
    from yolo_sm.core import provenance
    from yolo_sm.topics.precision import collect as step

    monkeypatch.setattr(step, "conv_rows", conv_rows)
    monkeypatch.setattr(step, "model_rows", model_rows)
    monkeypatch.setattr(step, "build_yolo", lambda family, width: torch.nn.Identity())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(provenance, "collect", lambda device: {"gpu_name": "a GPU", "sm_count": 2})


def test_the_step_runs_units_with_provenance_and_resumes(tmp_path, monkeypatch):
    from yolo_sm.topics.precision import collect as step

    calls = []

    def conv_rows(spec, width, model, convs):
        calls.append((width, "conv"))
        return [{"width": width, "batch": spec.batch, "scope": "conv", "layer": "a.conv",
                 "kernel": k, "status": "ok", "message": "", "median_ms": 1.0}
                for k in spec.conv_kernels]  # fmt: skip

    def model_rows(spec, width, model):
        calls.append((width, "model"))
        return [{"width": width, "batch": spec.batch, "scope": "model", "layer": "",
                 "kernel": k, "status": "ok", "message": "", "median_ms": 2.0}
                for k in spec.model_kernels]  # fmt: skip

    _fake_measurements(monkeypatch, conv_rows, model_rows)
    spec = step.Int8KernelSpec(widths=(0.5, 1.0), model_kernels=("fp16", "triton"))
    out = tmp_path / "k.parquet"
    df = step.run_int8_kernels(spec, out, progress=False)
    assert calls == [(0.5, "conv"), (0.5, "model"), (1.0, "conv"), (1.0, "model")]
    assert len(df) == 2 * (len(spec.conv_kernels) + 2)
    assert (df.prov_gpu_name == "a GPU").all() and df.unit_s.notna().all()
    calls.clear()
    again = step.run_int8_kernels(spec, out, progress=False)
    assert calls == [] and len(again) == len(df)  # every unit was there: nothing re-measured


def test_a_unit_that_fails_is_one_row_and_the_others_run(tmp_path, monkeypatch):
    from yolo_sm.topics.precision import collect as step

    def conv_rows(spec, width, model, convs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    def model_rows(spec, width, model):
        return [{"width": width, "batch": spec.batch, "scope": "model", "layer": "",
                 "kernel": "fp16", "status": "ok", "message": "", "median_ms": 2.0}]  # fmt: skip

    _fake_measurements(monkeypatch, conv_rows, model_rows)
    spec = step.Int8KernelSpec(widths=(2.0,), model_kernels=("fp16",))
    df = step.run_int8_kernels(spec, tmp_path / "k.parquet", progress=False).set_index("scope")
    assert df.loc["conv", "status"] == "oom" and "out of memory" in df.loc["conv", "message"]
    assert df.loc["model", "status"] == "ok"


def test_status_and_a_rerun_see_the_units_a_cut_run_left(tmp_path):
    """A table holding some (width, scope) units is partial, not unregistered: collect would
    otherwise register it as it is and never measure the missing widths."""
    import pandas as pd
    import yaml

    from yolo_sm.contract import plans as contract_plans
    from yolo_sm.core import plans
    from yolo_sm.topics.precision.collect import Int8KernelSpec, missing_units

    out = tmp_path / "data"
    out.mkdir()
    pd.read_parquet(FIXTURE).to_parquet(out / "k.parquet")  # widths 0.5 and 1.0
    step = {"name": "k", "kind": "int8_kernels", "out": "k.parquet", "est_s": 300,
            "params": {"widths": [1.0, 0.5, 2.0]}}  # fmt: skip
    (tmp_path / "plan.yaml").write_text(
        yaml.safe_dump({"name": "t", "device": "cuda", "steps": [step]})
    )
    plan = contract_plans.load_plan(tmp_path / "plan.yaml")
    spec = Int8KernelSpec(widths=(1.0, 0.5, 2.0))
    assert missing_units(spec, out / "k.parquet") == [(2.0, "conv"), (2.0, "model")]
    assert missing_units(spec, tmp_path / "none.parquet") == spec.units()
    row = plans.status(plan, out).set_index("step").loc["k"]
    assert row.state == "partial" and row.todo == "2 of 6 (width, scope) units"
    assert plans.need_s(plan.steps[0], plan, out, row.state) == 100
    note = plans.progress_note(plan.steps[0], plan, out)
    assert note.startswith("PARTIAL (4 of 6 (width, scope) units")
    full = Int8KernelSpec(widths=(1.0, 0.5))
    assert missing_units(full, out / "k.parquet") == []


def test_a_time_limited_run_measures_the_units_that_fit_and_the_next_resumes(tmp_path, monkeypatch):
    """The step runs to the deadline unit by unit, as a sweep or bench does: a run whose time
    left holds one unit but not the whole step measures that unit, and the next run goes on.
    Before any unit of a scope is measured a unit is estimated at its share of est_s (300 s
    over 6 units: 50 s); after, at the table's own seconds. Ends written to the plan's table
    and registered as partial."""
    import pandas as pd
    import yaml

    from yolo_sm.contract import plans as contract_plans
    from yolo_sm.core import plans as collect

    clock = {"t": 0.0}
    monkeypatch.setattr(collect.time, "monotonic", lambda: clock["t"])
    monkeypatch.setattr("yolo_sm.core.grid.time.monotonic", lambda: clock["t"])
    calls = []

    def rows(scope, took):
        def measure(spec, width, *model):
            calls.append((width, scope))
            clock["t"] += took * (width / 0.5) ** 2  # a unit's seconds grow as width^2
            head = {"width": width, "batch": spec.batch, "scope": scope, "layer": ""}
            return [{**head, "kernel": "fp16", "status": "ok", "message": "", "median_ms": 1.0}]

        return measure

    _fake_measurements(monkeypatch, rows("conv", 40.0), rows("model", 10.0))
    out = tmp_path / "data"
    step = {"name": "k", "kind": "int8_kernels", "out": "k.parquet", "est_s": 300,
            "params": {"widths": [0.5, 1.0, 2.0]}}  # fmt: skip
    (tmp_path / "plan.yaml").write_text(
        yaml.safe_dump({"name": "t", "device": "cuda", "steps": [step]})
    )
    plan = contract_plans.load_plan(tmp_path / "plan.yaml")
    collect.run_plan(plan, out, max_minutes=0.5, progress=False)
    assert calls == []  # 30 s do not hold a first unit's 50 s
    collect.run_plan(plan, out, max_minutes=2, progress=False)  # 120 s, not the whole 300 s
    # width 0.5's units at 50 s each estimated (40 s and 10 s taken); width 1.0's convolutions,
    # 40 s x 4, end late and are skipped; its model unit, 10 s x 4, fits in the 70 s left
    assert calls == [(0.5, "conv"), (0.5, "model"), (1.0, "model")]
    row = collect.status(plan, out).set_index("step").loc["k"]
    assert row.state == "partial" and row.todo == "3 of 6 (width, scope) units"
    calls.clear()
    # width 1.0's convolutions by width 0.5's 40 s scaled up (x4): 160 s do not fit in 150 s;
    # width 2.0's units (640 s, 160 s) neither
    collect.run_plan(plan, out, max_minutes=2.5, progress=False)
    assert calls == []
    collect.run_plan(plan, out, max_minutes=4, progress=False)
    assert calls == [(1.0, "conv")]  # 160 s; then 80 s left: width 2.0's units end late
    assert len(pd.read_parquet(out / "k.parquet")) == 4


def test_a_wider_unit_is_estimated_long_so_a_run_stops_before_its_deadline():
    from yolo_sm.core.grid import Pace
    from yolo_sm.topics.precision.collect import unit_estimate

    rows = [{"width": 1.0, "scope": "conv", "unit_s": 192.0},
            {"width": 1.0, "scope": "conv", "unit_s": 190.0},
            {"width": 0.5, "scope": "conv", "unit_s": 73.0},
            {"width": 0.5, "scope": "conv", "unit_s": float("nan")},
            {"width": 1.0, "scope": "model", "unit_s": 24.0}]  # fmt: skip
    pace = Pace(rows=rows)
    # two widths of the scope measured: the power of the width fitted through them
    power = math.log(192.0 / 73.0) / math.log(2.0)
    assert unit_estimate((2.0, "conv"), pace) == pytest.approx(192.0 * 2**power)
    assert unit_estimate((0.5, "conv"), pace) == 73.0
    assert unit_estimate((0.25, "conv"), pace) == 73.0  # narrower: not scaled down
    assert unit_estimate((2.0, "model"), pace) == 4 * 24.0  # one width: the square
    # a fitted power outside [1, 2] is bounded: times that barely grow still grow linearly
    flat = Pace(rows=[{"width": 0.5, "scope": "conv", "unit_s": 100.0},
                      {"width": 1.0, "scope": "conv", "unit_s": 101.0}])  # fmt: skip
    assert unit_estimate((2.0, "conv"), flat) == 2 * 101.0
    assert unit_estimate((2.0, "model"), Pace(rows=[], seconds=[10.0, 20.0])) == 15.0


def test_the_step_stops_before_a_unit_its_deadline_cannot_hold(tmp_path, monkeypatch):
    import time

    import pandas as pd

    from yolo_sm.topics.precision import collect as step

    calls = []

    def conv_rows(spec, width, model, convs):
        calls.append((width, "conv"))
        return [{"width": width, "batch": spec.batch, "scope": "conv", "layer": "a.conv",
                 "kernel": "fp16", "status": "ok", "message": "", "median_ms": 1.0}]  # fmt: skip

    def model_rows(spec, width, model):
        calls.append((width, "model"))
        return [{"width": width, "batch": spec.batch, "scope": "model", "layer": "",
                 "kernel": "fp16", "status": "ok", "message": "", "median_ms": 2.0}]  # fmt: skip

    _fake_measurements(monkeypatch, conv_rows, model_rows)
    out = tmp_path / "k.parquet"
    step.run_int8_kernels(step.Int8KernelSpec(widths=(1.0,)), out, progress=False)
    pd.read_parquet(out).assign(unit_s=300.0).to_parquet(out)  # width 1.0 took 300 s a unit
    calls.clear()
    spec = step.Int8KernelSpec(widths=(1.0, 2.0))
    step.run_int8_kernels(spec, out, progress=False, deadline=time.monotonic() + 600)
    assert calls == []  # width 2.0's convolutions, ~1,200 s, would end past the deadline
    step.run_int8_kernels(spec, out, progress=False, deadline=time.monotonic() + 3000)
    assert calls == [(2.0, "conv"), (2.0, "model")]
