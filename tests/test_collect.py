"""Collection plans: parsing, resumable and time-limited runs, manifest registration (CPU)."""

import json
import re
import shlex
from dataclasses import asdict, replace

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from yolo_sm.contract import datasets
from yolo_sm.contract import plans as contract_plans
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.plans import KINDS
from yolo_sm.contract.store import read_metadata, with_metadata, write_table_atomic
from yolo_sm.core import plan_runners
from yolo_sm.core import plans as collect

SWEEP = {
    "family": "yolov8",
    "widths": [0.0625],
    "precisions": ["fp32"],
    "layouts": ["nchw"],
    "backends": ["eager"],
    "batches": [1, 2],
    "imgsz": [64],
    "budget_ms": 20,
    "warmup_ms": 2,
}


def _plan(tmp_path, steps, device="cpu"):
    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "device": device, "steps": steps}))
    return contract_plans.load_plan(p)


def test_shipped_full_plan_parses_and_covers_every_step_kind():
    plan = contract_plans.load_plan("data/plans/full.yaml")
    kinds = {s.kind for s in plan.steps}
    assert kinds == set(KINDS)  # the reference plan uses every kind of step
    for s in plan.steps:
        if s.kind == "sweep":
            spec = plan_runners.sweep_spec(s, plan)
            assert spec.points(), s.name
    b = plan_runners.bench_spec(next(s for s in plan.steps if s.name == "bench_fast_engines"), plan)
    # every planned width, in priority order (widths 0.5, 1.0 and 2.0 first)
    assert sorted(w for _, w in b.models) == [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
    assert [w for _, w in b.models][:3] == [0.5, 1.0, 2.0]
    assert sorted(b.batches) == [1, 16, 64] and b.pipeline_streams == (1, 3) and b.device == "cuda"
    assert {"cudagraph/fp16/nhwc", "compile:reduce-overhead/fp16/nhwc"} <= set(b.variants())
    assert "cudagraph/fp8/nhwc" in b.variants()
    first_sweep = next(s for s in plan.steps if s.kind == "sweep")
    widths = plan_runners.sweep_spec(first_sweep, plan).widths
    assert widths == (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)


PLANS = contract_plans.PLANS_DIR


def test_plans_are_named_after_what_they_do_and_name_no_gpu():
    assert not (PLANS / "h200.yaml").exists()
    assert contract_plans.load_plan(PLANS / "full.yaml").name == "full"
    gpu = re.compile(r"\b(?:[ABHL]\d{2,3}|V100|T4|hopper|ampere|blackwell)\b", re.IGNORECASE)
    for f in sorted(PLANS.glob("*.yaml")):
        assert not gpu.search(f.read_text()), f.name  # descriptions and comments alike


def test_shipped_roots_name_plans_that_exist():
    repo = datasets.data_dir().parent
    named = set()
    for mf in datasets.data_dir().glob("**/manifest.json"):
        for e in json.loads(mf.read_text())["datasets"].values():
            cmd = shlex.split(str(e.get("command") or ""))
            if "--plan" in cmd:
                named.add(cmd[cmd.index("--plan") + 1])
    assert "data/plans/full.yaml" in named
    assert all((repo / p).is_file() for p in named), named
    assert datasets.open_root("h200").plan_file() == PLANS / "full.yaml"


def test_the_quick_plan_is_the_full_plans_datasets_at_fewer_points():
    from yolo_sm.core.sweep import SweepSpec

    def points(step, device):
        return set(SweepSpec.from_mapping({"device": device, **step.params}).points())

    quick = contract_plans.load_plan(PLANS / "quick.yaml")
    full = {s.name: s for s in contract_plans.load_plan(PLANS / "full.yaml").steps}
    assert quick.device == "cuda"
    for s in quick.steps:  # the same dataset names, kinds and files: every notebook reads them
        assert (s.kind, s.out) == (full[s.name].kind, full[s.name].out), s.name
        if s.kind == "sweep":
            mine, theirs = points(s, quick.device), points(full[s.name], quick.device)
            assert mine < theirs, s.name  # a subset of the full grid
    assert len(quick.steps) < len(full)


def test_the_quick_plan_collects_a_dataset_of_every_pages_first_headline():
    from yolo_sm.report.catalog import PAIR_SOURCES, all_rules
    from yolo_sm.report.site_results import HEADLINES

    steps = {s.name for s in contract_plans.load_plan(PLANS / "quick.yaml").steps}
    rules = {r.id: r for r in (*all_rules(), *(r for rs, _ in PAIR_SOURCES for r in rs))}
    for group, ids in HEADLINES.items():
        named = rules[ids[0]].datasets  # empty: the root's tables of a role (your model's)
        assert not named or set(named) & steps, group
    # what it leaves to the full plan: the rules of datasets only the full plan makes
    assert not {"sweep_bf16_nhwc", "ncu_batch_w1"} & steps


@pytest.mark.parametrize(
    "steps, match",
    [
        ([], "non-empty"),
        ([{"name": "a", "kind": "sweep"}], "name, kind and out"),
        ([{"name": "a", "kind": "magic", "out": "a.parquet"}], "unknown kind"),
        (
            [
                {"name": "a", "kind": "sweep", "out": "a"},
                {"name": "a", "kind": "sweep", "out": "b"},
            ],
            "twice",
        ),
        ([{"name": "a", "kind": "sweep", "out": "a", "colour": 1}], "unknown keys"),
    ],
)
def test_bad_plans_are_one_clear_error(tmp_path, steps, match):
    with pytest.raises(UserError, match=match):
        _plan(tmp_path, steps)


def test_sweep_step_runs_within_the_time_limit_then_resumes(tmp_path, monkeypatch):
    plan = _plan(
        tmp_path,
        [
            {
                "name": "s",
                "kind": "sweep",
                "out": "s.parquet",
                "params": SWEEP,
                "description": "tiny",
            }
        ],
    )
    out = tmp_path / "data"
    table = collect.run_plan(plan, out, max_minutes=1e-9, progress=False)
    assert table.state.tolist() == ["missing"]  # no time: nothing started, nothing written
    table = collect.run_plan(plan, out, progress=False)
    assert table.state.tolist() == ["done"]
    df = pd.read_parquet(out / "s.parquet")
    assert len(df) == 2 and (df.status == "ok").all()
    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path))
    loaded = datasets.load("data/s")
    assert len(loaded) == 2 and loaded.attrs["provenance"]["torch"]
    cmd = datasets.info("data/s")["command"]
    assert cmd.startswith("yolo-sm collect --plan ") and cmd.endswith("--only s")
    # a finished step is not run again
    monkeypatch.setattr(collect, "RUNNERS", {})
    assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done"]


def test_redo_errors_measures_fixed_error_rows_again(tmp_path):
    """--redo-errors drops matching error rows (never oom rows, never ok rows) and the step
    measures those points again; the table keeps its metadata; a non-matching text keeps them."""
    import pyarrow.parquet as pq

    plan = _plan(
        tmp_path,
        [{"name": "s", "kind": "sweep", "out": "s.parquet", "params": SWEEP, "description": "d"}],
    )
    out = tmp_path / "data"
    collect.run_plan(plan, out, progress=False)
    path = out / "s.parquet"
    meta = pq.read_schema(path).metadata
    df = pd.read_parquet(path)
    ok_b1 = df[df.batch == 1].median_ms.iloc[0]
    # pretend batch 2 failed its check and a third point ran out of memory
    bad = df.batch == 2
    df.loc[bad, "status"], df.loc[bad, "message"] = "error", "NumericalMismatch: on noise"
    df.loc[bad, "median_ms"] = float("nan")
    oom = df[bad].assign(batch=4, status="oom", message="OutOfMemoryError: CUDA")
    pq.write_table(
        pa_table(pd.concat([df, oom], ignore_index=True), meta), path, compression="zstd"
    )
    step = plan.steps[0]
    assert collect.redo_errors(step, out, "ImportError") == 0  # no match: nothing dropped
    table = collect.run_plan(plan, out, progress=False, redo="NumericalMismatch")
    assert table.state.tolist() == ["done"]
    again = pd.read_parquet(path).set_index("batch")
    assert again.status[2] == "ok" and again.median_ms[2] > 0  # measured again
    assert again.median_ms[1] == ok_b1  # the ok point untouched
    assert again.status[4] == "oom"  # oom rows are kept: they are results
    # the metadata is kept; only the registration's time moved
    assert _without_time(pq.read_schema(path).metadata) == _without_time(meta)


def _without_time(meta):
    m = json.loads(meta[b"yolo_sm"])
    for reg in m.get("registrations", {}).values():
        reg.pop("registered_utc", None)
    rest = {k: v for k, v in meta.items() if k != b"yolo_sm_digest"}  # a digest of the rest
    return {**rest, b"yolo_sm": m}


def pa_table(df, meta):
    import pyarrow as pa

    t = pa.Table.from_pandas(df, preserve_index=False)
    return t.replace_schema_metadata(meta)


def test_a_partial_sweep_is_registered_as_partial(tmp_path, monkeypatch):
    """A step cut short (here: a runner that measures one of the two points) is registered with
    what it holds, its description saying how much is missing; finishing it drops the note."""
    from yolo_sm.core.sweep import run_sweep

    plan = _plan(
        tmp_path,
        [{"name": "s", "kind": "sweep", "out": "s.parquet", "params": SWEEP, "description": "d"}],
    )
    out = tmp_path / "data"
    real = dict(plan_runners.RUNNERS)

    def one_point(step, plan, out_dir, deadline, progress):
        spec = plan_runners.sweep_spec(step, plan)
        run_sweep(replace(spec, batches=(1,)), out_dir / step.out, progress=False)

    monkeypatch.setitem(plan_runners.RUNNERS, "sweep", one_point)
    assert collect.run_plan(plan, out, progress=False).state.tolist() == ["partial"]
    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path))
    info = datasets.info("data/s")
    assert info["rows"] == 1 and info["description"].startswith("PARTIAL (1 of 2 points;")
    monkeypatch.setitem(plan_runners.RUNNERS, "sweep", real["sweep"])
    assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done"]
    info = datasets.info("data/s")
    assert info["rows"] == 2 and info["description"] == "d"


#: a trace step of the narrowest YOLOv8 at 64 px, one profiled forward
TRACE_STEP = {
    "name": "tr",
    "kind": "trace",
    "out": "tr.parquet",
    "params": {
        "widths": 0.0625,
        "precisions": "fp32",
        "layouts": "nchw",
        "batches": 1,
        "imgsz": 64,
        "iters": 1,
    },
}


def test_trace_step_on_cpu_writes_kernel_table_and_traces(tmp_path):
    plan = _plan(tmp_path, [TRACE_STEP])
    table = collect.run_plan(plan, tmp_path / "d", progress=False)
    assert table.state.tolist() == ["done"]
    assert list((tmp_path / "d" / "traces").glob("tr-*.json.gz"))
    assert "data/tr" not in set(datasets.manifests())  # registered in its own folder only


def test_a_trace_step_builds_its_engines_in_its_compile_mode(tmp_path, monkeypatch):
    """A trace step's compile_mode (with its rewrites) reaches the engines it profiles; a mode
    that does not exist stops the plan at load."""
    from yolo_sm.core.profiling import target, trace_units

    compiled = {"backend": "compile", "compile_mode": "default+sep-pool"}
    step = {**TRACE_STEP, "params": {**TRACE_STEP["params"], **compiled}}
    asked = []

    def engine_of(family, config, model, imgsz, device, backend="eager", compile_mode="default"):
        asked.append((backend, compile_mode))  # built eagerly here: compiling takes minutes
        return target.engine_of(family, config, model, imgsz, device)

    monkeypatch.setattr(trace_units, "engine_of", engine_of)
    table = collect.run_plan(_plan(tmp_path, [step]), tmp_path / "d", progress=False)
    assert table.state.tolist() == ["done"] and asked == [("compile", "default+sep-pool")]
    step["params"]["compile_mode"] = "default+fold-pool"
    with pytest.raises(UserError, match="unknown or repeated rewrite"):
        _plan(tmp_path, [step])


def test_a_trace_step_runs_config_by_config(tmp_path):
    """A trace step's configs are units: collect --status counts them, a run traces each (a
    CPU trace adds no row) and the step is done."""
    step = {**TRACE_STEP, "params": {**TRACE_STEP["params"], "widths": [0.0625, 0.125]}}
    plan = _plan(tmp_path, [step])
    out = tmp_path / "d"
    out.mkdir()
    assert collect.status(plan, out).todo.tolist() == ["2 of 2 configs"]
    table = collect.run_plan(plan, out, progress=False)
    assert table.state.tolist() == ["done"] and table.todo.tolist() == [""]
    assert len(list((out / "traces").glob("tr-*.json.gz"))) == 2
    df = pd.read_parquet(out / "tr.parquet")  # no GPU kernels: no rows, the kernel columns
    assert df.empty and {"config", "kernel_name", "unit_s", "prov_gpu_name"} <= set(df)
    assert read_metadata(out / "tr.parquet")["spec"]["name"] == "tr"  # the runner's metadata


def _fake_kernels(monkeypatch, captured):
    """kineto's capture writes a placeholder trace (noted in ``captured``) and load_kernels
    gives two kernel rows for any readable one: a GPU's trace, without a GPU."""
    from yolo_sm.core import provenance
    from yolo_sm.core.profiling import kineto, trace_units

    def capture(fn, path, **kw):
        captured.append(path.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("trace")
        provenance.write_sidecar(path, provenance.collect("cpu"), {"iters": 2, "warmup": 2})

    def load_kernels(path):
        if path.read_text() != "trace":
            raise UserError(f"{path} is not a readable trace")
        text = {"kernel_name", "limiter", "layer", "module_type", "stage", "kernel_class"}
        row = {c: "k" if c in text else "(1, 1, 1)" if c in ("grid", "block") else 1.0
               for c in kineto.KERNEL_COLUMNS}  # fmt: skip
        return pd.DataFrame([row, {**row, "duration_us": 2.0}])

    monkeypatch.setattr(kineto, "capture", capture)
    monkeypatch.setattr(trace_units.kineto, "load_kernels", load_kernels)


def test_a_trace_step_resumes_from_its_traces_and_times_its_configs(tmp_path, monkeypatch):
    """A config whose trace was written but whose rows were not (a run killed in between) is
    loaded from its trace, not traced again; a trace cut short is taken again. Every row
    carries its config's seconds, which estimate the configs left by width."""
    from yolo_sm.core.profiling import trace_units

    captured = []
    _fake_kernels(monkeypatch, captured)
    step = {**TRACE_STEP, "params": {**TRACE_STEP["params"], "widths": [0.0625, 0.125]}}
    plan = _plan(tmp_path, [step])
    out = tmp_path / "d"
    assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done"]
    assert len(captured) == 2
    df = pd.read_parquet(out / "tr.parquet")
    assert len(df) == 4 and df.unit_s.notna().all() and df.config.nunique() == 2
    (out / "tr.parquet").unlink()
    first, second = sorted((out / "traces").glob("tr-*.json.gz"))
    second.write_text("trunc")  # cut short
    assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done"]
    assert captured[2:] == [second.name] and len(pd.read_parquet(out / "tr.parquet")) == 4
    # a kept trace's rows carry the provenance it was taken under, not this run's; one taken
    # by other code, or without its provenance, is taken again
    (out / "tr.parquet").unlink()
    meta = first.with_name(first.name + ".metadata.json")
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "gpu_uuid": "GPU-then"}))
    assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done"]

    def uuids():
        return set(pd.read_parquet(out / "tr.parquet").prov_gpu_uuid)

    assert len(captured) == 3 and "GPU-then" in uuids()
    for taken, code in enumerate(({"yolo_sm_source": "0123456789ab", "gpu_uuid": "x"}, None), 4):
        (out / "tr.parquet").unlink()
        if code is None:
            meta.unlink()
        else:
            meta.write_text(json.dumps({**json.loads(meta.read_text()), **code}))
        assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done"]
        assert len(captured) == taken and captured[-1] == first.name
        assert not {"GPU-then", "x"} & uuids()
    wider = {**step, "params": {**step["params"], "widths": [0.0625, 0.125, 0.25]}}
    spec = plan_runners.trace_spec(_plan(tmp_path, [wider]).steps[0], _plan(tmp_path, [wider]))
    assert [trace_units.TraceSpec.label(spec, u) for u in trace_units.missing_units(
        spec, out / "tr.parquet")] == ["yolov8_w0.25_fp32_nchw_b1"]  # fmt: skip
    held = pd.read_parquet(out / "tr.parquet").groupby("config").unit_s.max()
    assert trace_units.missing_seconds(spec, out / "tr.parquet") >= held.max()


def test_unknown_only_step_is_an_error(tmp_path):
    plan = _plan(tmp_path, [{"name": "s", "kind": "sweep", "out": "s.parquet", "params": SWEEP}])
    with pytest.raises(UserError, match="no step"):
        collect.run_plan(plan, tmp_path / "d", only=["nope"])


def test_config_labels_round_trip():
    from yolo_sm.contract.labels import config_label, parse_config, with_config

    label = config_label("yolov8", 1.5, "fp16", "nhwc", 8)
    assert parse_config(label) == {
        "family": "yolov8",
        "width": 1.5,
        "precision": "fp16",
        "layout": "nhwc",
        "batch": 8,
    }
    assert parse_config("wide_w2_fp16_nhwc_b8")["family"] == "wide"
    with pytest.raises(ValueError, match="config label"):
        parse_config("")
    df = with_config(pd.DataFrame({"config": [label, ""]}))
    assert df.width.iloc[0] == 1.5 and pd.isna(df.width.iloc[1])


def test_ceilings_step_runs_on_cpu_and_registers(tmp_path):
    plan_file = tmp_path / "p.yaml"
    step = {
        "name": "ceilings",
        "kind": "ceilings",
        "out": "ceilings.parquet",
        "params": {"n": 64, "budget_ms": 5},
    }
    plan_file.write_text(yaml.safe_dump({"name": "t", "device": "cpu", "steps": [step]}))
    plan = contract_plans.load_plan(plan_file)
    table = collect.run_plan(plan, tmp_path / "out", progress=False)
    assert table.state.tolist() == ["done"]
    df = pd.read_parquet(tmp_path / "out" / "ceilings.parquet")
    assert set(df.ceiling) >= {"matmul_fp32", "matmul_fp16"} and (df.value > 0).all()
    assert df.prov_device.eq("cpu").all()
    assert not df.ceiling.str.contains("_n64").any()  # one size: no per-size rows


def test_ceilings_take_the_best_of_several_sizes():
    from yolo_sm.topics.roofline.collect import measure_ceilings

    df = measure_ceilings("cpu", n=(32, 64), budget_ms=5, precisions=("fp32", "fp16"))
    assert set(df.regime) == {"burst", "sustained"}
    for regime, part in df.groupby("regime"):
        v = part.set_index("ceiling")
        for prec in ("fp32", "fp16"):
            sizes = v.loc[[f"matmul_{prec}_n32", f"matmul_{prec}_n64"], "value"]
            assert v.loc[f"matmul_{prec}", "value"] == sizes.max(), regime
            big = 32 if sizes.iloc[0] > sizes.iloc[1] else 64
            assert v.loc[f"matmul_{prec}", "size"] == f"{big}^3"
    # fp32 (SIMT) stops at simt_max_n, the smallest size always runs
    df = measure_ceilings("cpu", n=(32, 64), budget_ms=5, precisions=("fp32",), simt_max_n=32)
    assert set(df.ceiling) == {"matmul_fp32_n32", "matmul_fp32"}
    assert (df.fill == "randn").all() and df.sm_clock_end_mhz.isna().all()  # no NVML clock on a CPU
    assert (df.kernel == "torch.matmul").all()  # the kernel that ran each matmul
    assert df.power_mean_w.isna().all() and (df.nvml_samples == 0).all()


def test_ceilings_with_zero_operands_and_a_bad_fill():
    from yolo_sm.topics.roofline.collect import measure_ceilings

    df = measure_ceilings("cpu", n=32, budget_ms=5, precisions=("fp32",), fill="zeros")
    assert df.fill.tolist() == ["zeros"] * 2 and (df.value > 0).all()
    with pytest.raises(UserError, match="unknown matmul fill 'ones'"):
        measure_ceilings("cpu", n=32, budget_ms=5, fill="ones")


def test_probe_step_runs_on_cpu_and_registers(tmp_path, monkeypatch):
    """The pipeline probe through collect on a CPU (small model, 160 px): every stage is a
    row with a positive wall time, the candidates are counted, and the table loads as a
    ``probe`` dataset with provenance."""
    from yolo_sm.contract import datasets
    from yolo_sm.topics.deploy.collect_probe import GPU_STAGES, STAGES

    params = {"width": 0.125, "batch": 2, "reps": 2, "imgsz": 160, "frames": "alternate"}
    step = {"name": "p", "kind": "probe", "out": "p.parquet", "params": params}
    plan = _plan(tmp_path, [step])
    out = tmp_path / "data"
    assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done"]
    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path))
    df = datasets.load("data/p")
    assert datasets.info("data/p")["kind"] == "probe"
    assert df.stage.tolist() == [s for s in STAGES if s not in GPU_STAGES]
    assert (df.wall_ms > 0).all() and df.gpu_ms.isna().all()  # CPU: no CUDA events
    assert (df.candidates_per_frame > 0).all() and (df.frames == "alternate").all()
    assert df.engine.eq("eager/fp32/nhwc").all() and df.prov_device.eq("cpu").all()


def test_probe_closes_its_engine_when_a_stage_fails(monkeypatch):
    """A stage that fails (here a simulated CUDA out of memory) propagates, and the engine built
    for the probe is closed first (its CUDA graph and buffers released)."""
    from yolo_sm.core.engines.base import Engine
    from yolo_sm.topics.deploy import collect_probe as probe

    closed = []
    monkeypatch.setattr(Engine, "close", lambda self: closed.append(self))

    def fail(*args, **kwargs):
        raise RuntimeError("CUDA out of memory (simulated)")

    monkeypatch.setattr(probe, "_probe", fail)
    with pytest.raises(RuntimeError, match="out of memory"):
        probe.probe_pipeline(width=0.0625, batch=1, reps=1, device="cpu", imgsz=64)
    assert len(closed) == 1


def test_probe_rejects_bad_frames():
    from yolo_sm.contract.errors import UserError
    from yolo_sm.topics.deploy.collect_probe import probe_pipeline

    with pytest.raises(UserError, match="frames"):
        probe_pipeline(width=0.0625, batch=1, device="cpu", frames="cat")


def test_bench_step_runs_on_cpu_resumes_and_registers(tmp_path, monkeypatch):
    """A tiny bench through collect: every variant of every (model, batch) is a row, the one
    that cannot run on a CPU (a CUDA graph) an error row with its reason; the finished table is
    registered with the command that re-runs the step and loads as a ``bench`` dataset."""
    from yolo_sm.core import bench

    params = {
        "family": "yolov8",
        "widths": [0.0625],
        "batches": [1, 2],
        "engines": ["eager/fp32/nchw", "cudagraph/fp16/nhwc"],
        "pipeline_streams": [1, 2],
        "imgsz": 64,
        "seconds": 0.2,
        "budget_ms": 20,
        "warmup_ms": 2,
        "est_unit_s": 30,
    }
    step = {"name": "b", "kind": "bench", "out": "b.parquet", "params": params}
    plan = _plan(tmp_path, [step])
    out = tmp_path / "data"
    assert collect.run_plan(plan, out, max_minutes=0.1, progress=False).state.tolist() == [
        "missing"  # a unit is guessed at 30 s: none fits in 6 s
    ]
    st = collect.status(plan, out).set_index("step")
    assert st.loc["b", "todo"] == "2 of 2 (model, batch) units"
    assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done"]
    df = pd.read_parquet(out / "b.parquet")
    spec = plan_runners.bench_spec(plan.steps[0], plan)
    assert len(df) == 2 * len(spec.variants())
    assert set(df.variant) == set(spec.variants())
    bad = df[df.variant == "cudagraph/fp16/nhwc"]
    assert (bad.status == "error").all() and bad.message.str.contains("CUDA").all()
    ok = df[df.variant != "cudagraph/fp16/nhwc"]
    assert (ok.status == "ok").all() and (ok.img_per_s > 0).all()
    assert (df[df.variant == "eager/fp16/nhwc"].vs_baseline == 1.0).all()
    pipe = df[df.variant.str.startswith("pipeline/")]
    assert sorted(pipe.streams.unique()) == [1, 2] and (pipe.pipeline_vs_model_only > 0).all()
    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path))
    loaded = datasets.load("data/b")
    assert datasets.info("data/b")["kind"] == "bench" and len(loaded) == len(df)
    assert datasets.info("data/b")["command"].endswith("--only b")
    # done: a rerun measures nothing
    monkeypatch.setattr(bench, "bench_unit", None)
    assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done"]


def test_a_step_that_needs_more_than_the_time_left_is_not_started_and_says_how_long(
    tmp_path, capsys
):
    """A step that does not stop at a deadline itself starts only if its estimate fits the
    time left; otherwise nothing is written and the message names the seconds it needs."""
    plan = _plan(tmp_path, [{"name": "c", "kind": "ceilings", "out": "c.parquet", "est_s": 600}])
    out = tmp_path / "out"
    assert collect.run_plan(plan, out, max_minutes=1, progress=False).state.tolist() == ["missing"]
    err = capsys.readouterr().err
    assert "collect: c needs about 600 s and does not fit in the time left (" in err
    assert not (out / "c.parquet").exists()


def test_status_says_what_is_done_and_what_is_left(tmp_path):
    """Per step its state, what is left of a step measured in units, and the rows its table
    holds; an unreadable table is one sentence."""
    plan = _plan(
        tmp_path,
        [
            {"name": "s", "kind": "sweep", "out": "s.parquet", "params": SWEEP},
            {"name": "c", "kind": "ceilings", "out": "c.parquet", "est_s": 42},
        ],
    )
    out = tmp_path / "out"
    out.mkdir()
    st = collect.status(plan, out).set_index("step")
    assert st.loc["s", "todo"] == "2 of 2 points" and st.loc["c", "todo"] == ""
    assert st.state.tolist() == ["missing", "missing"] and st.rows.isna().all()
    assert list(st.reset_index().columns) == ["step", "kind", "state", "todo", "rows"]
    p = plan_runners.sweep_spec(plan.steps[0], plan).points()[0]
    pd.DataFrame([{**asdict(p), "status": "ok", "median_ms": 1.0}]).to_parquet(out / "s.parquet")
    st = collect.status(plan, out).set_index("step")
    assert st.loc["s", "state"] == "partial" and st.loc["s", "todo"] == "1 of 2 points"
    assert st.loc["s", "rows"] == 1
    (out / "s.parquet").write_bytes(b"PAR1 truncated")
    with pytest.raises(UserError, match="not a readable parquet file"):
        collect.status(plan, out)


def test_an_edited_step_that_runs_whole_is_changed_and_runs_again(tmp_path):
    """The manifest records the params a table was made with; a plan whose step now has other
    params says ``changed`` and collect makes the table again. A sweep's params are its points:
    an edit there shows as missing points, not as ``changed``."""
    step = {
        "name": "c",
        "kind": "ceilings",
        "out": "c.parquet",
        "params": {"n": 32, "budget_ms": 2},
    }
    sweep_step = {"name": "s", "kind": "sweep", "out": "s.parquet", "params": SWEEP}
    out = tmp_path / "out"
    plan = _plan(tmp_path, [step, sweep_step])
    assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done", "done"]
    manifest = yaml.safe_load((out / "manifest.json").read_text())["datasets"]
    assert manifest["c"]["params"] == {"n": 32, "budget_ms": 2}
    edited = _plan(
        tmp_path,
        [
            {**step, "params": {"n": [32, 64], "budget_ms": 2}},
            {**sweep_step, "params": {**SWEEP, "budget_ms": 5}},  # not a point of the grid
        ],
    )
    assert collect.status(edited, out).state.tolist() == ["changed", "done"]
    assert collect.run_plan(edited, out, progress=False).state.tolist() == ["done", "done"]
    df = pd.read_parquet(out / "c.parquet")
    assert {"matmul_fp32_n32", "matmul_fp32_n64"} <= set(df.ceiling)  # made again, new params
    # a table registered without params (before collect recorded them): taken as done
    import json

    manifest = json.loads((out / "manifest.json").read_text())
    assert collect.status(plan, out).state.tolist()[0] == "changed"  # plan: n 32, table: 32+64
    del manifest["datasets"]["c"]["params"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert collect.status(plan, out).state.tolist()[0] == "done"


def test_burst_and_sustained_regimes_from_a_fake_timer():
    """The burst is the calls after the rest; the sustained figure keeps the second half of the
    back-to-back run (here the calls slow down as a power-limited GPU's would)."""
    from yolo_sm.core.timing import Timer
    from yolo_sm.topics.roofline.collect import time_regimes

    class Slowing(Timer):
        def __init__(self):
            self.i, self.calls = 0, []

        def time_calls(self, fn, n, before=None):
            self.calls.append(n)
            out = [1.0 + 0.01 * (self.i + k) for k in range(n)]
            self.i += n
            return out

    class NoNvml:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def stats(self):
            return {"nvml_samples": 0}

    rests = []
    timer = Slowing()
    out = time_regimes(
        lambda: None,
        "cpu",
        burst_ms=5,
        sustain_ms=20,
        rest_s=0.5,
        timer=timer,
        sampler=NoNvml(),
        sleep=rests.append,
    )
    # warm, estimate, burst, sustained (estimate ~1.02 ms per call)
    assert rests == [0.5] and timer.calls == [1, 3, 5, 20]
    burst, sustained = out["burst"][0], out["sustained"][0]
    assert len(burst) == 5 and len(sustained) == 10
    assert max(burst) < min(sustained)  # the burst ran before the GPU slowed


def test_collect_refuses_to_add_another_gpu_models_rows_to_a_folder(tmp_path, monkeypatch):
    """A folder whose tables were measured on one GPU model takes no rows of another: the run
    stops before measuring, with one sentence, and the table is left as it was. The same model
    (another card) resumes it, and a step already done is no reason to stop."""
    from yolo_sm.contract import manifest
    from yolo_sm.core import provenance

    two = {**SWEEP, "widths": [0.0625, 0.125], "batches": [1]}
    steps = [{"name": "s", "kind": "sweep", "out": "s.parquet", "params": two, "description": "t"}]
    one = {**two, "widths": [0.0625]}  # the first model of the sweep: it stays partial
    collect.run_plan(_plan(tmp_path, [{**steps[0], "params": one}]), out := tmp_path / "data",
                     progress=False)  # fmt: skip
    plan = _plan(tmp_path, steps)
    mf = json.loads((out / "manifest.json").read_text())
    mf["machine"] = {"gpu_name": ["NVIDIA H200"]}  # as a GPU's rows would record it
    (out / "manifest.json").write_text(json.dumps(mf))
    assert manifest.root_gpus(out) == ["NVIDIA H200"]
    monkeypatch.setattr(provenance, "gpu_name", lambda device: "NVIDIA H100 80GB HBM3")
    with pytest.raises(UserError, match="measured on NVIDIA H200 and this GPU is NVIDIA H100"):
        collect.run_plan(plan, out, progress=False)
    with pytest.raises(UserError, match="another folder"):
        collect.run_plan(plan, out, progress=False, redo="")
    assert len(pd.read_parquet(out / "s.parquet")) == 1
    monkeypatch.setattr(provenance, "gpu_name", lambda device: "NVIDIA H200")
    assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done"]
    assert len(pd.read_parquet(out / "s.parquet")) == 2
    mf = json.loads((out / "manifest.json").read_text())
    mf["machine"] = {"gpu_name": ["NVIDIA H200"]}
    (out / "manifest.json").write_text(json.dumps(mf))
    monkeypatch.setattr(provenance, "gpu_name", lambda device: "NVIDIA H100 80GB HBM3")
    assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done"]
    # a CPU adds no rows to a GPU's folder either, not even a whole step the folder lacks
    monkeypatch.setattr(provenance, "gpu_name", lambda device: None)
    with pytest.raises(UserError, match="NVIDIA H200 and this run is on cpu: collect into"):
        collect.check_gpu_model(out, "cpu")
    whole = [*steps, {"name": "m", "kind": "model_tables", "out": "m.parquet", "params": {}}]
    with pytest.raises(UserError, match="this run is on cpu"):
        collect.run_plan(_plan(tmp_path, whole), out, progress=False, only=["m"])
    assert not (out / "m.parquet").exists()
    # a GPU that torch cannot name (a driver-only host) and a fresh folder check nothing
    collect.check_gpu_model(out, "cuda")
    monkeypatch.setattr(provenance, "gpu_name", lambda device: "NVIDIA H100 80GB HBM3")
    collect.check_gpu_model(tmp_path / "fresh", "cuda")


def test_root_gpus_reads_the_datasets_where_the_manifest_has_no_machine_entry(tmp_path):
    from yolo_sm.contract import manifest

    entry = {
        "file": "a.parquet",
        "kind": "sweep",
        "provenance": {"gpu_name": "NVIDIA H200", "sm_count": 132.0},
    }
    (tmp_path / "manifest.json").write_text(json.dumps({"datasets": {"a": entry}}))
    assert manifest.root_gpus(tmp_path) == ["NVIDIA H200"]
    assert manifest.root_gpus(tmp_path / "none") == []
    other = {"kind": "bench", "provenance": {"gpu_name": "NVIDIA H200", "sm_count": 132}}
    machine = manifest.machine_of({"a": entry, "b": other})
    assert machine["sm_count"] == ["132"]  # 132.0 and 132 are one SM count


def test_the_gpu_model_check_reads_an_unreadable_manifest_from_the_tables(tmp_path, monkeypatch):
    """A damaged manifest does not stop the check (collect repairs it from the tables): the
    GPU models come from the tables' own registrations, and the run goes on."""
    from yolo_sm.contract import manifest
    from yolo_sm.core import provenance

    two = {**SWEEP, "widths": [0.0625, 0.125], "batches": [1]}
    steps = [{"name": "s", "kind": "sweep", "out": "s.parquet", "params": two, "description": "t"}]
    one = {**two, "widths": [0.0625]}  # the first model of the sweep: it stays partial
    collect.run_plan(_plan(tmp_path, [{**steps[0], "params": one}]), out := tmp_path / "data",
                     progress=False)  # fmt: skip
    plan = _plan(tmp_path, steps)
    (out / "manifest.json").write_bytes(b'{"datasets": \x00\xff')
    assert manifest.root_gpus(out) == []  # CPU rows: no GPU model to hold to
    monkeypatch.setattr(provenance, "gpu_name", lambda device: "NVIDIA H100 80GB HBM3")
    path, table = out / "s.parquet", pq.read_table(out / "s.parquet")
    meta = read_metadata(path)
    reg = meta["registrations"]["s"]  # the rows and their registration as an H200's would be
    reg["provenance"] = {**reg.get("provenance", {}), "gpu_name": "NVIDIA H200"}
    named = table.drop_columns([c for c in ["prov_gpu_name"] if c in table.column_names])
    named = named.append_column("prov_gpu_name", pa.array(["NVIDIA H200"] * table.num_rows))
    write_table_atomic(with_metadata(named, meta), path)
    assert manifest.root_gpus(out) == ["NVIDIA H200"]
    with pytest.raises(UserError, match="measured on NVIDIA H200"):
        collect.run_plan(plan, out, progress=False)
    write_table_atomic(table, path)
    with pytest.warns(UserWarning, match="unreadable"):
        assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done"]
    assert len(pd.read_parquet(out / "s.parquet")) == 2
