"""What collecting a root costs: the collection_time snapshot (collect --status --save), its
facts, the build-share finding and speed goal 4 (a collection against a baseline's)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from yolo_sm.analyse import collection_time as ct
from yolo_sm.cli.main import main
from yolo_sm.contract.datasets import open_root
from yolo_sm.contract.schema import COLLECTION_TIME, validate
from yolo_sm.report import goals
from yolo_sm.report.findings import fast as findings
from yolo_sm.report.rules import FAILS, HOLDS, NOT_TESTED

PLAN = "data/plans/full.yaml"


def _snapshot(rows):
    """A snapshot from (step, spent_s, left_s, build_s or None) tuples; recorded where build_s
    is given (its other phases zero, the rest of spent_s in other_s)."""
    out = []
    for step, spent, left, build in rows:
        rec = build is not None
        out.append(
            {
                "step": step, "kind": "sweep", "state": "done" if not left else "partial",
                "rows": 10, "spent_s": spent, "spent_source": "recorded" if rec else
                "estimated (rows)", "left_s": left, "left_source": "measured" if left else "",
                "plan_s": spent + left, "build_s": build if rec else None,
                "warmup_s": 0.0 if rec else None, "timed_s": 0.0 if rec else None,
                "profile_s": 0.0 if rec else None, "other_s": spent - build if rec else None,
                "runs": 1 if rec else None,
            }
        )  # fmt: skip
    return pd.DataFrame(out)


def _root(make_root, name, df):
    folder = make_root(name, [COLLECTION_TIME])
    df.to_parquet(folder / f"{COLLECTION_TIME}.parquet", index=False)
    return open_root(str(folder))


BASE = [("a", 100.0, 0.0, 80.0), ("b", 300.0, 100.0, None), ("c", 50.0, 0.0, 10.0)]


def test_the_shipped_snapshot_is_one_row_per_plan_step_and_adds_up():
    from yolo_sm.contract.plans import load_yaml

    df = open_root("h200").load(COLLECTION_TIME)
    steps = [s["name"] for s in load_yaml(PLAN)["steps"]]
    assert list(df.step) == steps
    assert (df.plan_s - df.spent_s - df.left_s).abs().max() < 1e-9
    rec = df[df.spent_source == "recorded"]
    phases = rec[[f"{p}_s" for p in ("build", "warmup", "timed", "profile", "other")]].sum(axis=1)
    assert (phases - rec.spent_s).abs().max() < 0.005  # a record's phases sum to its total
    assert df[df.spent_source != "recorded"].build_s.isna().all()
    # what the records hold beyond the rows is apart, never negative, only where recorded
    assert (rec.superseded_s >= 0).all() and df[
        df.spent_source != "recorded"
    ].superseded_s.isna().all()
    f = ct.facts(open_root("h200")).set_index("key")["value"]
    assert f["collection.superseded_s"] == pytest.approx(rec.superseded_s.sum())
    # each step's params as the plan names them, which the tables are held against
    plan = {s["name"]: s.get("params") or {} for s in load_yaml(PLAN)["steps"]}
    for step, text in zip(df.step, df.plan_params, strict=True):
        assert json.loads(text).get("engines") == plan[step].get("engines"), step


def test_phases_and_facts_read_the_recorded_steps_only(make_root):
    root = _root(make_root, "r", _snapshot(BASE))
    ph = ct.phases(ct.snapshot(root)).set_index("phase")
    assert ph.loc["build", "seconds"] == 90.0
    assert ph.loc["build", "share_pct"] == pytest.approx(100 * 90 / 150)
    assert ph.loc["other", "seconds"] == 60.0
    f = ct.facts(root).set_index("key").value
    assert f["collection.plan_s"] == 550.0 and f["collection.left_s"] == 100.0
    assert f["collection.recorded_share_pct"] == pytest.approx(100 * 150 / 450)


@pytest.mark.parametrize("build, verdict", [(80.0, HOLDS), (40.0, "partly"), (10.0, FAILS)])
def test_the_build_share_finding_flips(make_root, build, verdict):
    root = _root(make_root, "r", _snapshot([("a", 100.0, 0.0, build)]))
    v = findings.collection_verdicts(root).set_index("id").verdict
    assert v["fast_collection_build_dominates"] == verdict


@pytest.mark.parametrize(
    "guessed, left_source, verdict",
    [
        (5.0, "plan est_s", HOLDS),
        (20.0, "plan est_unit_s", "partly"),
        (40.0, "default", FAILS),
        (40.0, "measured", HOLDS),  # paced by measured units: no guess
        (40.0, "measured units, mode_est_s", HOLDS),  # beside measured units: counted measured
    ],
)
def test_the_share_of_guessed_seconds_finding_flips(make_root, guessed, left_source, verdict):
    """A plan's seconds that no measurement paced: a step the plan's est_s stands for and the
    seconds left by the plan's own figures, out of the whole plan's 100 s."""
    df = _snapshot([("a", 60.0, guessed, 50.0), ("b", 100.0 - 60.0 - guessed, 0.0, None)])
    df.loc[0, "left_source"] = left_source
    root = _root(make_root, "r", df)
    f = ct.facts(root).set_index("key").value
    measured = guessed if left_source in ("plan est_s", "plan est_unit_s", "default") else 0.0
    assert f["collection.guessed_share_pct"] == pytest.approx(measured)
    v = findings.collection_verdicts(root).set_index("id").verdict
    assert v["fast_collection_mostly_measured"] == verdict
    # the same seconds as a step estimated by the plan's est_s: guessed as well
    df.loc[0, "left_source"], df.loc[1, "spent_source"] = "measured", "estimated (plan est_s)"
    root = _root(make_root, "r2", df)
    share = ct.facts(root).set_index("key").value["collection.guessed_share_pct"]
    assert share == pytest.approx(100.0 - 60.0 - guessed)


@pytest.mark.parametrize("scale, verdict", [(0.5, HOLDS), (0.45, HOLDS), (0.6, FAILS)])
def test_speed_goal_4_flips_with_the_candidates_seconds(make_root, scale, verdict):
    base = _root(make_root, "base", _snapshot(BASE))
    cand = [(s, spent * scale, left * scale, None) for s, spent, left, _ in BASE]
    cand = _root(make_root, "cand", _snapshot(cand + [("new", 999.0, 0.0, None)]))
    v = goals.collection_verdicts(cand, base).set_index("id")
    assert v.loc["speed_4", "verdict"] == verdict
    assert v.loc["speed_4", "measured"] == pytest.approx(scale)  # over the steps both hold
    facts = ct.pair_facts(base, cand).set_index("key").value
    assert facts["collection.steps_compared"] == 3


def test_speed_goal_4_needs_two_roots_with_snapshots(make_root):
    base = _root(make_root, "base", _snapshot(BASE))
    other = open_root(str(make_root("plain", ["ceilings"])))
    waits = {
        None: "a baseline root (BASELINE) to compare with",
        "same": "a baseline root other than this one",
        "other": f"a {COLLECTION_TIME} snapshot in plain",
    }
    for cand, b, why in (
        (base, None, None), (base, base, "same"), (other, base, "other"), (base, other, "other"),
    ):  # fmt: skip
        verdicts = goals.collection_verdicts(cand, b).verdict.tolist()
        assert verdicts == [NOT_TESTED] * len(goals.COLLECTION_RULES)
        found = goals.waiting(cand, b).set_index("id").waits_for
        assert found["speed_4"] == waits[why]


def _sampled(make_root, name, scale, steps=("bench_pipeline", "sweep_bf16_nhwc")):
    """A root holding the shipped ``steps`` and snapshot, each table's unit seconds (a bench's
    unit_s, a sweep's phases) times ``scale``, and for a sample only its first half of rows."""
    folder = make_root(name, [*steps, COLLECTION_TIME])
    root = open_root(str(folder))
    for step in steps:
        df = root.load(step)
        cols = [c for c in ("unit_s", *ct.ROW_PHASES) if c in df]
        df[cols] = df[cols] * scale
        df.iloc[: len(df) // 2].to_parquet(folder / root.info(step)["file"], index=False)
    return open_root(str(folder))


@pytest.mark.parametrize("scale, verdict", [(0.4, HOLDS), (0.8, FAILS)])
def test_the_same_units_check_compares_only_what_both_roots_measured(make_root, scale, verdict):
    """A candidate holding half of each table's units, each taking ``scale`` x the baseline's
    seconds: per step the units in common, their ratio exactly ``scale`` whatever the units
    left out, and the same-units rule flips at 0.5."""
    base = open_root(str(make_root("base", ["bench_pipeline", "sweep_bf16_nhwc", COLLECTION_TIME])))
    cand = _sampled(make_root, "cand", scale)
    same = ct.same_units(base, cand).set_index("step")
    assert list(same.index) == ["sweep_bf16_nhwc", "bench_pipeline"]  # snapshot (plan) order
    assert same.loc["bench_pipeline", "seconds_of"] == "unit_s"
    assert same.loc["sweep_bf16_nhwc", "seconds_of"] == "build_s, warmup_s, timed_s, profile_s"
    assert same.loc["sweep_bf16_nhwc", "units"] == len(cand.load("sweep_bf16_nhwc"))
    assert 0 < same.loc["bench_pipeline", "units"] < 8  # (width, batch) units in common
    assert same.ratio.to_numpy() == pytest.approx([scale, scale])
    v = goals.collection_verdicts(cand, base).set_index("id")
    assert v.loc["speed_4_same_units", "verdict"] == verdict
    named = v.loc["speed_4_same_units", "datasets"].split(", ")
    assert {"base/bench_pipeline", "cand/bench_pipeline", "base/sweep_bf16_nhwc"} <= set(named)
    assert all(n.count("/") == 1 for n in named)  # each name once prefixed with its root
    assert ct.same_units(base, base).empty  # a root against itself is no comparison


def test_side_by_side_keeps_steps_of_either_snapshot():
    cand = _snapshot([("b", 100.0, 0.0, None), ("z", 5.0, 0.0, None)])
    m = ct.side_by_side(_snapshot(BASE[:2]), cand)
    assert list(m.step) == ["a", "b", "z"]
    assert m.set_index("step").ratio.loc["b"] == pytest.approx(0.25)
    assert m.ratio.isna().tolist() == [True, False, True]


def test_status_save_writes_and_registers_the_snapshot(make_root, capsys):
    folder = make_root("r", ["sweep_1280", "ceilings", "techniques"])
    assert main(["collect", "--plan", PLAN, "--out", str(folder), "--status", "--save"]) == 0
    out = capsys.readouterr().out
    assert "saved" in out
    manifest = json.loads((folder / "manifest.json").read_text())
    entry = manifest["datasets"][COLLECTION_TIME]
    assert entry["kind"] == COLLECTION_TIME and "--status --save" in entry["command"]
    # the provenance of the steps' own datasets (the GPU they ran on), not this host's
    assert entry["provenance"]["gpu_name"] == "NVIDIA H200" and entry["provenance"]["torch"]
    df = validate(pd.read_parquet(folder / entry["file"]), COLLECTION_TIME)
    by = df.set_index("step")
    src = open_root("h200").info("sweep_1280")["gpu_seconds"]
    assert by.loc["sweep_1280", "spent_s"] == pytest.approx(src["total"])
    assert by.loc["sweep_1280", "build_s"] == pytest.approx(src["build"])
    assert by.loc["sweep_fp16_nhwc", "state"] == "missing"
    assert by.loc["sweep_fp16_nhwc", "spent_s"] == 0 and by.loc["sweep_fp16_nhwc", "left_s"] > 0
    # the status line of the whole plan is the snapshot's sum (rounded per step for display)
    whole = float(out.split("whole plan: about ")[1].split(" s ")[0])
    assert whole == pytest.approx(df.plan_s.sum(), abs=0.05 * len(df))


def test_status_with_sample_projects_what_a_sample_costs(make_root, capsys):
    """--status --sample N: each sampled step at N of its groups' share of its whole seconds,
    a step that runs whole at its whole; the total line is the column's sum; --sample is
    checked before anything is read."""
    from yolo_sm.analyse import collection_time as analysed
    from yolo_sm.collect import collection_time
    from yolo_sm.contract.plans import load_plan

    folder = make_root("r", ["sweep_1280", "ceilings", "bench_8bit"])
    plan = load_plan(PLAN)
    cost = collection_time.sample_table(plan, folder, 1).set_index("step")
    src = open_root("h200").info("sweep_1280")["gpu_seconds"]["total"]
    assert cost.loc["sweep_1280", "groups"] == 3 and cost.loc["sweep_1280", "sampled"] == 1
    assert cost.loc["sweep_1280", "sample_s"] == pytest.approx(src / 3)
    assert cost.loc["bench_8bit", "groups"] == 4  # its widths, every batch of one a group
    assert cost.loc["int8_kernels", "groups"] == 6  # (width, scope) units
    assert cost.loc["bench_compile_cache", "groups"] == 11  # (width, mode) units
    assert pd.isna(cost.loc["ceilings", "groups"])
    assert cost.loc["ceilings", "sample_s"] == cost.loc["ceilings", "whole_s"] > 0
    # the piece one run must hold: a sampled step's group at its mean, another step whole
    assert cost.loc["sweep_1280", "group_s"] == pytest.approx(src / 3)
    assert cost.loc["ceilings", "group_s"] == cost.loc["ceilings", "whole_s"]
    longest = cost.group_s.max()
    assert set(analysed.too_long(cost, longest - 1).index) == set(
        cost.index[cost.group_s == longest]
    )
    assert analysed.too_long(cost, longest).empty
    everything = collection_time.sample_table(plan, folder, 100).set_index("step")
    assert (everything.sample_s == everything.whole_s).all()  # N above every step's groups
    assert (everything.group_s == cost.group_s).all()  # the piece does not grow with N
    assert main(["collect", "--plan", PLAN, "--out", str(folder), "--status", "--sample", "1"]) == 0
    out = capsys.readouterr().out
    total = float(out.split("collect --sample 1 into an empty folder): about ")[1].split(" s ")[0])
    assert total == pytest.approx(cost.sample_s.sum(), abs=0.5)
    # --max-minutes: the steps whose group no run of that length holds
    args = ["collect", "--plan", PLAN, "--out", str(folder), "--status", "--sample", "1"]
    assert main([*args, "--max-minutes", str(cost.loc["sweep_1280", "group_s"] / 120)]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("in runs of --max-minutes") and "sweep_1280 (about" in line
    assert main([*args, "--max-minutes", "10000"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("every one fits")
    rc = main(["collect", "--plan", PLAN, "--out", str(folder), "--status", "--sample", "0"])
    assert rc == 2 and "--sample" in capsys.readouterr().err


def test_status_sample_and_save_read_the_root_once(make_root, capsys, monkeypatch):
    """--status --sample N --save: the cost and the saved snapshot come from one per-step
    snapshot of the root, and the saved table is the one the cost was projected from."""
    from yolo_sm.collect import collection_time

    folder = make_root("r", ["sweep_1280", "ceilings", "bench_8bit"])
    made = []
    real = collection_time.table
    monkeypatch.setattr(collection_time, "table", lambda *a, **k: made.append(1) or real(*a, **k))
    argv = ["collect", "--plan", PLAN, "--out", str(folder), "--status", "--sample", "1", "--save"]
    assert main(argv) == 0
    assert len(made) == 1 and "saved" in capsys.readouterr().out
    saved = pd.read_parquet(folder / collection_time.FILE).set_index("step")
    assert saved.loc["sweep_1280", "spent_s"] > 0


def test_save_without_status_is_one_sentence(tmp_path, capsys):
    rc = main(["collect", "--plan", PLAN, "--out", str(tmp_path / "r"), "--save"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--save goes with --status" in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_a_snapshot_names_no_machine_of_its_own():
    from yolo_sm.contract.manifest import machine_of

    datasets = {
        "s": {"kind": "sweep", "provenance": {"gpu_name": "G", "gpu_uuid": "X"}},
        COLLECTION_TIME: {
            "kind": COLLECTION_TIME,
            "provenance": {"gpu_name": "G", "gpu_uuid": ["X", "X, Y"]},
        },
    }
    assert machine_of(datasets)["gpu_uuid"] == ["X"]
    manifest = json.loads((open_root("h200").path / "manifest.json").read_text())
    assert not any(", " in u for u in manifest["machine"]["gpu_uuid"])


def test_a_snapshot_leaves_the_roots_machine_line_as_it_was(make_root):
    names = ["ncu_width_b8", "model_layers"]
    without = open_root(str(make_root("a", names))).machine()
    with_it = open_root(str(make_root("b", [*names, COLLECTION_TIME]))).machine()
    assert with_it == without  # the snapshot's union of steps' versions is no machine


def test_parts_stack_to_each_steps_whole(make_root):
    df = _snapshot(BASE)
    p = ct.parts(df)
    assert list(p.part.unique()) == list(ct.PARTS)
    whole = p.groupby("step", sort=False).seconds.sum()
    assert whole.to_dict() == df.set_index("step").plan_s.to_dict()
    rec = p[p.part == ct.PARTS[0]].set_index("step").seconds
    assert rec.to_dict() == {"a": 100.0, "b": 0.0, "c": 50.0}  # b's seconds are estimated


def test_a_root_without_a_snapshot_says_so_once(make_root):
    from yolo_sm.report import fast_plots

    root = open_root(str(make_root("plain", ["ceilings"])))
    note = fast_plots.collection_steps(root)
    assert "--status --save" in str(note)
    assert fast_plots.collection_figure(root) is None and fast_plots.collection_phases(root) is None


def test_build_seconds_per_engine_add_up_to_the_tables_and_name_cold_and_warm_compiles(make_root):
    """build_by_engine: every recorded build of the root's bench and sweep tables once, by
    engine kind; a failed engine's row counted as unrecorded; compile builds split by cache."""
    folder = make_root("r", ["bench_8bit", "sweep_1280", "ceilings"])
    root = open_root(str(folder))
    b = ct.build_by_engine(root).set_index("engine")
    bench, sweep = root.load("bench_8bit"), root.load("sweep_1280")
    assert b.build_s.sum() == pytest.approx(bench.build_s.sum() + sweep.build_s.sum())
    assert b.share_pct.sum() == pytest.approx(100.0)
    assert list(b.build_s.dropna()) == sorted(b.build_s.dropna(), reverse=True)
    failed = bench[(bench.variant == "cudagraph/fp8/nhwc") & bench.build_s.isna()]
    assert b.loc["cudagraph/fp8", "unrecorded_rows"] == len(failed) > 0
    cold = bench[(bench.variant == "compile/fp16/nhwc") & (bench.compile_cache == "cold")]
    assert b.loc["compile/fp16 [cold]", "rows"] == len(cold)
    assert "pipeline cudagraph/fp16" in b.index and "ceilings" not in b.datasets.str.cat()
    label = ct._engine_label(
        pd.DataFrame(
            {
                "backend": ["compile", "ultralytics"],
                "precision": ["fp16", "fp16"],
                "compile_mode": ["reduce-overhead", None],
                "compile_cache": ["warm", None],
                "scope": ["model_only", "frames_to_boxes"],
            }
        )  # fmt: skip
    )
    assert list(label) == ["compile:reduce-overhead/fp16 [warm]", "YOLO.predict"]
    no_mode = pd.DataFrame({"backend": ["compile", "eager"], "precision": ["fp16", "fp32"]})
    assert list(ct._engine_label(no_mode)) == ["compile/fp16", "eager/fp32"]  # default mode
    assert ct.build_by_engine(open_root(str(make_root("e", ["ceilings"])))).empty


def test_a_snapshot_names_the_plans_params_without_this_hosts_folders(tmp_path, monkeypatch):
    """plan_params: each step's params as the plan names them, a model given by an absolute
    path shown as the user would type it from the working folder."""
    from yolo_sm.collect import collection_time as collect_ct
    from yolo_sm.contract.plans import load_plan

    model = tmp_path / "models" / "best.pt"
    model.parent.mkdir()
    model.write_bytes(b"")  # the plan checks that it exists
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(
        "name: t\ndevice: cpu\nsteps:\n  - name: b\n    kind: bench\n    out: b.parquet\n"
        f"    params: {{models: [{model}], batches: [1], engines: [cudagraph/fp16/nhwc]}}\n"
    )
    monkeypatch.chdir(tmp_path)
    plan = load_plan(plan_file)
    text = collect_ct._plan_params(plan.steps[0], plan)  # the column table() writes
    params = json.loads(text)
    assert params["engines"] == ["cudagraph/fp16/nhwc"] and params["models"] == ["models/best.pt"]
    assert str(tmp_path) not in text


@pytest.mark.parametrize("warmer, verdict", [(False, HOLDS), (True, FAILS)])
def test_builds_that_read_a_cache_the_baseline_compiled_afresh_are_named(
    make_root, warmer, verdict
):
    """A candidate whose compiled builds read inductor's cache where the baseline's were cold:
    counted per step over the builds both made, named by engine, and the explaining rule
    speed_4_no_warmer_builds flips; the builds the baseline made warm are no warmer."""
    base = open_root(str(make_root("base", ["bench_pipeline", "sweep_bf16_nhwc", COLLECTION_TIME])))
    cand = _sampled(make_root, "cand", 0.4)
    if warmer:
        df = cand.load("bench_pipeline")
        df.loc[df["compile_cache"].notna(), "compile_cache"] = "warm"
        df.to_parquet(cand.path / cand.info("bench_pipeline")["file"], index=False)
        cand = open_root(str(cand.path))
    got = ct.warmer_builds(base, cand).set_index("step")
    assert list(got.index) == ["bench_pipeline"]  # the sweep step compiles nothing
    key = ["family", "width", "batch", "variant"]
    old, new = base.load("bench_pipeline"), cand.load("bench_pipeline")
    common = old.dropna(subset=["compile_cache"]).merge(
        new.dropna(subset=["compile_cache"])[key], on=key
    )
    assert 0 < got.loc["bench_pipeline", "builds"] == len(common) < old.compile_cache.notna().sum()
    want = int((common.compile_cache == "cold").sum()) if warmer else 0
    assert got.loc["bench_pipeline", "warmer"] == want and (want > 0) == warmer
    names = got.loc["bench_pipeline", "warmer_engines"]
    assert (names == "") != warmer and ("compile/fp16/nhwc" in names) == warmer
    v = goals.collection_verdicts(cand, base).set_index("id")
    assert v.loc["speed_4_no_warmer_builds", "verdict"] == verdict
    assert goals.collection_verdicts(cand, cand).set_index("id").loc[
        "speed_4_no_warmer_builds", "verdict"] == NOT_TESTED  # fmt: skip


def test_notebook_10s_two_root_tables_say_why_they_are_empty(make_root):
    """fast_plots.same_units and warmer_builds: a one-line note without another root or where
    the roots share nothing, else the analysis table."""
    from yolo_sm.report import fast_plots
    from yolo_sm.report.sections import Note

    base = open_root(str(make_root("base", ["bench_pipeline", "sweep_bf16_nhwc", COLLECTION_TIME])))
    cand = _sampled(make_root, "cand", 0.4)
    bare = open_root(str(make_root("bare", [COLLECTION_TIME])))
    for show, none in ((fast_plots.same_units, "no bench"), (fast_plots.warmer_builds, "no torch")):
        assert isinstance(show(cand), Note) and "BASELINE" in show(cand)
        assert isinstance(show(cand, cand), Note)  # a root against itself
        empty = show(bare, base)
        assert isinstance(empty, Note) and none in empty and "`base`" in empty
        assert not isinstance(show(cand, base), Note)
