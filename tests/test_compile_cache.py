"""torch.compile's disk caches: the folder chosen (a user's own kept), the cache state of a
build, the cold/warm collector with its plan step, and the findings it decides (CPU)."""

import os
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch._inductor.config as icfg
import yaml

from yolo_sm.analyse.facts import facts_table
from yolo_sm.contract import plans as contract_plans
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.manifest import read_manifest
from yolo_sm.contract.plans import check_params
from yolo_sm.contract.schema import validate
from yolo_sm.contract.vocab import COMPILE_MODES
from yolo_sm.core import plans as collect
from yolo_sm.core.engines import compile_cache as cc
from yolo_sm.report.rules import FAILS, HOLDS, PARTLY, evaluate, topic_rules
from yolo_sm.topics.deploy import CacheStep
from yolo_sm.topics.deploy import analyse as analyse_cache
from yolo_sm.topics.deploy import collect as cache_builds


def test_a_users_cache_folder_is_kept_and_ours_is_under_the_package_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(icfg, "fx_graph_cache", False)
    env = {"TORCHINDUCTOR_CACHE_DIR": "/their/own", "TORCHINDUCTOR_FX_GRAPH_CACHE": "0"}
    got = cc.setup(str(tmp_path / "cfg"), environ=env)
    assert got["dir"] == "/their/own" and got["dir_source"] == "user"
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/their/own"
    assert icfg.fx_graph_cache is False  # the user's environment switched it off: left so
    env = {"YOLO_SM_CACHE": str(tmp_path / "root")}
    monkeypatch.setenv("YOLO_SM_CACHE", str(tmp_path / "root"))
    got = cc.setup(None, environ=env)
    assert Path(got["dir"]) == tmp_path / "root" / "inductor" and got["dir_source"] == "yolo_sm"
    assert env["TORCHINDUCTOR_CACHE_DIR"] == got["dir"] and Path(got["dir"]).is_dir()
    assert icfg.fx_graph_cache is True and got["fx_graph_cache"] is True
    # an engine config's cache_dir comes before $YOLO_SM_CACHE
    got = cc.setup(str(tmp_path / "cfg"), environ={})
    assert Path(got["dir"]) == tmp_path / "cfg" / "inductor"


def test_torchs_own_default_folder_is_not_taken_for_the_users(tmp_path, monkeypatch):
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv("YOLO_SM_CACHE", str(tmp_path / "root"))
    env = {"TORCHINDUCTOR_CACHE_DIR": default_cache_dir()}
    got = cc.setup(None, environ=env)
    assert Path(got["dir"]) == tmp_path / "root" / "inductor" and got["dir_source"] == "yolo_sm"
    assert env["TORCHINDUCTOR_CACHE_DIR"] == got["dir"]
    assert cc._torch_default(default_cache_dir()) and not cc._torch_default(str(tmp_path))


_FRESH_PROCESS = """
import json, os, torch._dynamo  # writes torch's default folder into the environment
seen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
from torch._inductor.runtime.cache_dir_utils import cache_dir
from yolo_sm.core.engines import compile_cache
got = compile_cache.setup()
print(json.dumps({"seen": seen, "dir": got["dir"], "source": got["dir_source"],
                  "inductor_reads": cache_dir()}))
"""


@pytest.mark.parametrize("users", [False, True])
def test_a_fresh_process_that_imported_dynamo_compiles_into_the_folder_chosen(tmp_path, users):
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    env["YOLO_SM_CACHE"] = str(tmp_path / "root")
    if users:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "theirs")
    run = subprocess.run([sys.executable, "-c", _FRESH_PROCESS], env=env, capture_output=True,
                         text=True, timeout=300, check=True)  # fmt: skip
    got = json.loads(run.stdout.strip().splitlines()[-1])
    want = tmp_path / ("theirs" if users else "root/inductor")
    assert got["seen"]  # set by the import whether or not the user set it
    assert Path(got["dir"]) == want and Path(got["inductor_reads"]) == want
    assert got["source"] == ("user" if users else "yolo_sm")


@pytest.mark.parametrize(
    "hits, misses, before, after, want",
    [
        (0, 3, 0, 50, "cold"),
        (3, 0, 50, 50, "warm"),
        (2, 1, 50, 60, "partial"),
        (0, 0, 0, 10, "cold"),  # no lookups counted: from the files
        (0, 0, 40, 40, "warm"),
        (0, 0, 40, 45, "partial"),
    ],
)
def test_cache_state_from_counters_then_files(hits, misses, before, after, want):
    assert cc.state(hits, misses, before, after) == want


@pytest.mark.parametrize(
    "hits, misses, before, tuned, want",
    [
        (0, 3, 40, 12, "cold"),  # graphs and autotuning afresh
        (0, 3, 40, 0, "partial"),  # graphs afresh, every autotuning read from disk
        (0, 3, 0, 0, "cold"),  # an empty folder: nothing there to autotune from
        (0, 3, 40, None, "cold"),  # a mode that does not autotune
        (3, 0, 40, 0, "warm"),
        (2, 1, 40, None, "partial"),
    ],
)
def test_a_max_autotune_build_that_autotuned_nothing_is_not_cold(hits, misses, before, tuned, want):
    assert cc.state(hits, misses, before, before + 10, tuned) == want


def test_only_the_max_autotune_modes_autotune():
    assert cc.autotunes("max-autotune") and cc.autotunes("max-autotune-no-cudagraphs+sep-pool")
    assert not cc.autotunes("reduce-overhead+sep-pool") and not cc.autotunes("default")
    assert not cc.autotunes(None)


def test_probe_counts_the_ops_autotuned_only_for_a_mode_that_autotunes(tmp_path):
    from torch._dynamo.utils import counters

    for mode, want in (("max-autotune", 4), ("default", None)):
        with cc.Probe(tmp_path, mode) as p:
            counters["inductor"]["fxgraph_cache_miss"] += 2
            counters["inductor"]["select_algorithm_autotune"] += 4
        info = p.info()
        assert info["autotuned_ops"] == want and info["compile_cache"] == "cold"
    with cc.Probe(tmp_path, "max-autotune") as p:  # an empty folder: cold
        counters["inductor"]["fxgraph_cache_miss"] += 2
    assert p.info()["autotuned_ops"] == 0 and p.info()["compile_cache"] == "cold"
    (tmp_path / "autotune-results").write_text("x")  # a folder that holds autotuning
    with cc.Probe(tmp_path, "max-autotune") as p:
        counters["inductor"]["fxgraph_cache_miss"] += 2
    assert p.info()["autotuned_ops"] == 0 and p.info()["compile_cache"] == "partial"
    with cc.Probe(tmp_path, "max-autotune") as p:  # a graph read replays its counters
        counters["inductor"]["fxgraph_cache_hit"] += 1
        counters["inductor"]["select_algorithm_autotune"] += 3
    assert p.info()["autotuned_ops"] == 0 and p.info()["compile_cache"] == "warm"


@pytest.mark.parametrize(
    "hits, misses, before, tuned, reads, want",
    [
        (0, 3, 40, 16, 29, "partial"),  # some autotuning read from disk, some benchmarked
        (0, 3, 40, 16, 0, "cold"),
        (0, 3, 40, 16, None, "cold"),  # reads not counted: from the autotune counter alone
        (0, 3, 0, 0, 0, "cold"),  # nothing to autotune in an empty folder
        (3, 0, 40, 0, 0, "warm"),
    ],
)
def test_a_build_that_read_some_autotuning_from_disk_is_partial(
    hits, misses, before, tuned, reads, want
):
    assert cc.state(hits, misses, before, before + 10, tuned, reads) == want


class _Choice:
    def __init__(self, name):
        self.name = name

    def hash_key(self):
        return self.name


def test_autotune_reads_counts_lookups_answered_from_disk(tmp_path, monkeypatch):
    """Through torch's own PersistentCache.lookup on a local cache in a new folder: a lookup
    that benchmarks (inductor's autotune counter moves) is not a read, one answered from the
    cache is, one that may not benchmark is neither; the method is restored after."""
    from torch._dynamo.utils import counters
    from torch._inductor import codecache
    from torch._inductor.utils import clear_caches

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    clear_caches()  # the local cache's path is cached per folder
    original = codecache.PersistentCache.__dict__["lookup"]
    choices = [_Choice("a"), _Choice("b")]

    def benchmark(cs):  # AlgorithmSelectorCache.benchmark moves the counter so
        counters["inductor"]["select_algorithm_autotune"] += 1
        return {c: float(i + 1) for i, c in enumerate(cs)}

    try:
        cache = codecache.PersistentCache()
        with cc.AutotuneReads() as reads:
            first = cache.lookup(choices, "conv", "64x3x8x8", benchmark)
            assert reads.n == 0 and set(first.values()) == {1.0, 2.0}
            again = cache.lookup(choices, "conv", "64x3x8x8", benchmark)
            cache.lookup(choices, "conv", "64x3x8x8", benchmark=benchmark)
            cache.lookup([_Choice("c")], "conv", "64x3x8x8", None)  # may not benchmark
            assert again == first and reads.n == 0  # what this build benchmarked itself
        with cc.AutotuneReads() as reads:  # the next build finds it on disk
            cache.lookup(choices, "conv", "64x3x8x8", benchmark)
            cache.lookup(choices, "conv", "64x3x8x8", benchmark=benchmark, hint_override=None)
            cache.lookup([_Choice("c")], "conv", "64x3x8x8", None)
            assert reads.n == 2
        assert codecache.PersistentCache.__dict__["lookup"] is original
    finally:
        monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
        clear_caches()


def test_probe_counts_autotune_reads_only_for_a_mode_that_autotunes(tmp_path):
    from torch._dynamo.utils import counters

    (tmp_path / "f").write_text("x")
    with cc.Probe(tmp_path, "max-autotune") as p:
        counters["inductor"]["fxgraph_cache_miss"] += 2
        counters["inductor"]["select_algorithm_autotune"] += 4
    info = p.info()
    assert info["autotune_reads"] == 0 and info["compile_cache"] == "cold"
    with cc.Probe(tmp_path, "default") as p:
        counters["inductor"]["fxgraph_cache_miss"] += 2
    assert p.info()["autotune_reads"] is None


@pytest.mark.parametrize(
    "delta, hits, misses, tunes, want",
    [
        (5, 0, 2, True, 5),  # every graph compiled: the counter is the build's own
        (3, 1, 0, True, 0),  # every graph read: its counters replayed, nothing autotuned
        (3, 1, 1, True, None),  # some read, some compiled: not told apart
        (5, 0, 2, False, None),  # a mode that does not autotune
    ],
)
def test_the_autotune_counter_counts_only_where_no_graph_was_read(delta, hits, misses, tunes, want):
    assert cc.tuned_here(delta, hits, misses, tunes) == want


def test_probe_counts_the_files_a_build_writes(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "old").write_text("x")
    with cc.Probe(tmp_path) as p:
        (tmp_path / "a" / "new1").write_text("x")
        (tmp_path / "new2").write_text("x")
    info = p.info()
    assert info["cache_files_before"] == 1 and info["cache_files_after"] == 3
    assert info["compile_cache"] == "partial"  # no compile ran: no counted lookups


def test_build_processes_get_their_own_cache_and_the_package(tmp_path):
    env = cache_builds.child_env(str(tmp_path), {"PATH": "/bin", "PYTHONPATH": "/x"})
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path) and env["PATH"] == "/bin"
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "triton")
    roots = env["PYTHONPATH"].split(os.pathsep)
    assert (Path(roots[0]) / "yolo_sm" / "__init__.py").exists() and roots[1] == "/x"


def _fake_runner(cold_s=40.0, warm_s=8.0, calls=None):
    """Stands for the build process: a cold build when the folder is empty, and it fills it."""

    def run(args, env, timeout_s):
        folder = Path(env["TORCHINDUCTOR_CACHE_DIR"])
        cold = not any(folder.iterdir())
        (folder / f"graph-{len(list(folder.iterdir()))}").write_text("x")
        if calls is not None:
            calls.append((args["compile_mode"], str(folder), cold, args["width"]))
        s = cold_s if cold else warm_s
        return {"status": "ok", "message": "", "compile_s": s, "build_s": s + 1.0,
                "compile_cache": "cold" if cold else "warm", "img_per_s": 1000.0,
                "median_ms": 64.0, "warmup_s": 0.1, "timed_s": 0.3}  # fmt: skip

    return run


def test_collector_runs_a_cold_then_a_warm_build_per_mode_in_one_new_folder(tmp_path):
    calls = []
    spec = cache_builds.CacheStep(
        modes=("default", "max-autotune-no-cudagraphs"), device="cpu", widths=(0.25,), batch=1
    )
    df = cache_builds.run_cache_builds(spec, tmp_path / "c.parquet", _fake_runner(calls=calls))
    assert df.cache.tolist() == ["cold", "warm", "cold", "warm"]
    assert df.compile_cache.tolist() == ["cold", "warm", "cold", "warm"]
    assert [c[2] for c in calls] == [True, False, True, False]
    assert calls[0][1] == calls[1][1] != calls[2][1] == calls[3][1]  # one folder per mode
    assert not Path(calls[0][1]).exists()  # removed afterwards
    assert (df.process_s >= 0).all() and df.run.tolist() == [1, 2, 1, 2]
    validate(pd.read_parquet(tmp_path / "c.parquet"), "compile_cache")


def test_the_plan_step_runs_through_collect(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_builds, "run_child", _fake_runner())
    p = tmp_path / "plan.yaml"
    params = {"widths": [0.25], "batch": 1, "modes": ["default"], "imgsz": 64}
    step = {"name": "cache", "kind": "compile_cache", "out": "cache.parquet", "est_s": 80,
            "params": params}  # fmt: skip
    p.write_text(yaml.safe_dump({"name": "t", "device": "cpu", "steps": [step]}))
    plan = contract_plans.load_plan(p)
    table = collect.run_plan(plan, tmp_path / "out", progress=False)
    assert table.state.tolist() == ["done"] and table.rows.tolist() == [2]
    assert read_manifest(tmp_path / "out")["datasets"]["cache"]["rows"] == 2


def test_a_mode_added_to_the_step_is_measured_alone_and_the_done_ones_are_kept(tmp_path):
    """A rerun measures the units the table lacks (both builds of each) and keeps the rows of
    the units it holds; a unit built with another batch counts as missing."""
    out, calls = tmp_path / "c.parquet", []
    one = cache_builds.CacheStep(modes=("default",), device="cpu", widths=(0.25,), batch=1)
    cache_builds.run_cache_builds(one, out, _fake_runner(calls=calls), progress=False)
    two = replace(one, modes=("default", "max-autotune"))
    assert cache_builds.missing_units(two, out) == [(0.25, "max-autotune")]
    df = cache_builds.run_cache_builds(two, out, _fake_runner(calls=calls), progress=False)
    assert [c[0] for c in calls] == ["default", "default", "max-autotune", "max-autotune"]
    assert df.compile_mode.tolist() == ["default"] * 2 + ["max-autotune"] * 2
    assert cache_builds.missing_units(two, out) == []
    bigger = replace(two, batch=2)
    assert cache_builds.missing_units(bigger, out) == [(0.25, "default"), (0.25, "max-autotune")]
    calls.clear()
    df = cache_builds.run_cache_builds(bigger, out, _fake_runner(calls=calls), progress=False)
    assert len(calls) == 4 and len(df) == 4 and set(df.batch) == {2}  # the old rows replaced
    validate(pd.read_parquet(out), "compile_cache")


def test_modes_per_width_are_units_built_in_the_plans_order_and_a_width_added_keeps_the_rest(
    tmp_path,
):
    """A plan's modes mapping: each (width, mode) pair is a unit, built in the mapping's order
    at its own width; a width added later is measured alone."""
    spec = cache_builds.CacheStep.from_mapping(
        {"modes": {1.0: ["reduce-overhead"], 0.5: ["default", "max-autotune"]},
         "device": "cpu", "batch": 1}
    )  # fmt: skip
    assert spec.units() == [(1.0, "reduce-overhead"), (0.5, "default"), (0.5, "max-autotune")]
    out, calls = tmp_path / "c.parquet", []
    df = cache_builds.run_cache_builds(spec, out, _fake_runner(calls=calls), progress=False)
    assert [(c[3], c[0]) for c in calls] == [
        (1.0, "reduce-overhead"), (1.0, "reduce-overhead"), (0.5, "default"), (0.5, "default"),
        (0.5, "max-autotune"), (0.5, "max-autotune"),
    ]  # fmt: skip
    assert df.width.tolist() == [1.0, 1.0, 0.5, 0.5, 0.5, 0.5]
    assert analyse_cache.cache_builds(df).width.tolist()[:4] == [0.5] * 4  # sorted by width
    wider = cache_builds.CacheStep.from_mapping(
        {"modes": {1.0: ["reduce-overhead"], 2.0: ["reduce-overhead"],
                   0.5: ["default", "max-autotune"]}, "device": "cpu", "batch": 1}
    )  # fmt: skip
    assert cache_builds.missing_units(wider, out) == [(2.0, "reduce-overhead")]
    calls.clear()
    df = cache_builds.run_cache_builds(wider, out, _fake_runner(calls=calls), progress=False)
    assert [(c[3], c[0]) for c in calls] == [(2.0, "reduce-overhead")] * 2 and len(df) == 8
    # the same modes at every width: widths times modes
    both = cache_builds.CacheStep.from_mapping({"widths": [0.5, 1], "modes": "default"})
    assert both.units() == [(0.5, "default"), (1.0, "default")]


def test_a_modes_mapping_with_widths_beside_it_or_a_width_without_modes_stops():
    with pytest.raises(UserError, match="leave widths out"):
        cache_builds.CacheStep.from_mapping({"widths": [1.0], "modes": {1.0: ["default"]}})
    with pytest.raises(UserError, match="names no width"):
        cache_builds.CacheStep.from_mapping({"modes": {}})
    with pytest.raises(UserError, match="at width 1.0 needs at least one"):
        cache_builds.CacheStep.from_mapping({"modes": {1.0: [], 0.5: ["default"]}})
    # a comma string is read as the plan check reads it: two modes, at every width or one
    both = cache_builds.CacheStep.from_mapping(
        {"widths": "0.5, 1", "modes": "default,max-autotune"}
    )
    assert both.units() == [(w, m) for w in (0.5, 1.0) for m in ("default", "max-autotune")]
    per = cache_builds.CacheStep.from_mapping({"modes": {2: "reduce-overhead, default"}})
    assert per.units() == [(2.0, "reduce-overhead"), (2.0, "default")]
    check_params("compile_cache", {"modes": "default,max-autotune"}, "step")
    with pytest.raises(UserError, match="unknown"):
        cache_builds.CacheStep.from_mapping({"width_modes": [[1.0, ["default"]]]})
    check_params("compile_cache", {"modes": {1.0: ["default"], 2: "reduce-overhead"}}, "step")
    with pytest.raises(UserError, match="at width 1.0"):
        check_params("compile_cache", {"modes": {1.0: ["fastest"]}}, "step")
    with pytest.raises(UserError, match="width"):
        check_params("compile_cache", {"modes": {-1: ["default"]}}, "step")
    with pytest.raises(UserError, match="names no width"):
        check_params("compile_cache", {"modes": {}}, "step")


def test_a_unit_starts_only_where_its_width_scaled_pace_fits_the_deadline(tmp_path):
    """After a unit at width 1, a unit at width 2 is estimated at up to 4x its seconds: it
    does not start where that would end past the deadline; a unit at width 1 would."""
    clock = {"t": 0.0}

    def runner(args, env, timeout_s):
        clock["t"] += 50.0
        return _fake_runner()(args, env, timeout_s)

    spec = cache_builds.CacheStep.from_mapping(
        {"modes": {1.0: ["default"], 2.0: ["default"]}, "device": "cpu", "batch": 1}
    )
    out = tmp_path / "c.parquet"
    run = cache_builds.run_cache_builds
    df = run(spec, out, runner, progress=False, deadline=300.0, est_unit_s=100.0,
             clock=lambda: clock["t"])  # fmt: skip
    assert set(df.width) == {1.0}  # width 1: 100 s; width 2 at (2/1)^2 x 100 s ends past 300
    assert cache_builds.missing_units(spec, out) == [(2.0, "default")]
    assert df.unit_s.tolist() == [100.0, 100.0]  # both builds of the unit: its seconds
    # a new run goes by the units the table holds, not est_unit_s: width 2 at up to 400 s
    clock["t"] = 0.0
    df = run(spec, out, runner, progress=False, deadline=150.0, est_unit_s=10.0,
             clock=lambda: clock["t"])  # fmt: skip
    assert set(df.width) == {1.0}
    df = run(spec, out, runner, progress=False, deadline=500.0, est_unit_s=10.0,
             clock=lambda: clock["t"])  # fmt: skip
    assert set(df.width) == {1.0, 2.0}


def test_unit_seconds_come_from_the_unit_or_its_processes_and_go_by_the_same_mode_first():
    spec = cache_builds.CacheStep(widths=(0.5, 1.0), modes=("default", "max-autotune"))
    head = {"batch": 64, "imgsz": 640, "precision": "fp16", "layout": "nhwc", "family": "yolov8"}
    rows = [  # a table written before unit_s: the unit's two processes summed
        {**head, "width": 0.5, "compile_mode": "default", "process_s": 20.0},
        {**head, "width": 0.5, "compile_mode": "default", "process_s": 10.0},
        {**head, "width": 0.5, "compile_mode": "max-autotune", "unit_s": 300.0, "process_s": 1.0},
        {**head, "width": 0.5, "compile_mode": "max-autotune", "unit_s": 300.0, "process_s": 1.0},
        {**head, "batch": 1, "width": 1.0, "compile_mode": "default", "unit_s": 5.0},
    ]
    got = cache_builds.with_unit_seconds(rows)
    assert [r["unit_s"] for r in got[:4]] == [30.0, 30.0, 300.0, 300.0]
    pace = cache_builds.Pace(rows=rows)
    est = cache_builds.unit_estimate
    assert est(spec, (0.5, "default"), pace) == 30.0  # its own mode, not max-autotune's
    assert est(spec, (1.0, "default"), pace) >= 60.0  # wider: scaled up; batch 1 not counted
    assert est(spec, (0.5, "reduce-overhead"), pace) == 300.0  # no rows of its mode: any mode
    assert est(cache_builds.CacheStep(batch=8), (0.5, "default"), pace) is None


def test_a_mode_with_one_build_only_is_measured_again_whole(tmp_path):
    out, calls = tmp_path / "c.parquet", []
    spec = cache_builds.CacheStep(modes=("default",), device="cpu", widths=(0.25,), batch=1)
    cache_builds.run_cache_builds(spec, out, _fake_runner(), progress=False)
    pd.read_parquet(out).iloc[:1].to_parquet(out)  # the warm build's row lost
    assert cache_builds.missing_units(spec, out) == [(0.25, "default")]
    df = cache_builds.run_cache_builds(spec, out, _fake_runner(calls=calls), progress=False)
    assert [c[2] for c in calls] == [True, False] and df.cache.tolist() == ["cold", "warm"]


def test_collect_status_counts_the_compile_modes_left_and_a_rerun_adds_them(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_builds, "run_child", _fake_runner())
    p = tmp_path / "plan.yaml"
    params = {"widths": [0.25], "batch": 1, "modes": ["default"], "imgsz": 64}
    step = {"name": "cache", "kind": "compile_cache", "out": "cache.parquet", "est_s": 80,
            "params": params}  # fmt: skip
    p.write_text(yaml.safe_dump({"name": "t", "device": "cpu", "steps": [step]}))
    collect.run_plan(contract_plans.load_plan(p), tmp_path / "out", progress=False)
    params["modes"] = ["default", "max-autotune"]
    p.write_text(yaml.safe_dump({"name": "t", "device": "cpu", "steps": [step]}))
    plan = contract_plans.load_plan(p)
    status = collect.status(plan, tmp_path / "out").set_index("step")
    assert status.loc["cache", "state"] == "partial"
    assert status.loc["cache", "todo"] == "1 of 2 (width, mode) units"
    # the missing unit goes by the measured one (no max-autotune unit yet: the default's)
    took = pd.read_parquet(tmp_path / "out" / "cache.parquet").unit_s.max()
    need = collect.need_s(plan.steps[0], plan, tmp_path / "out", "partial")
    assert need == pytest.approx(took)
    table = collect.run_plan(plan, tmp_path / "out", progress=False)
    assert table.state.tolist() == ["done"]
    df = pd.read_parquet(tmp_path / "out" / "cache.parquet")
    assert df.compile_mode.tolist() == ["default"] * 2 + ["max-autotune"] * 2


def test_compile_modes_include_max_autotune_without_cudagraphs_and_bad_modes_fail():
    assert "max-autotune-no-cudagraphs" in COMPILE_MODES
    check_params("compile_cache", {"modes": ["max-autotune-no-cudagraphs"]}, "step")
    with pytest.raises(UserError, match="modes"):
        check_params("compile_cache", {"modes": ["fastest"]}, "step")
    with pytest.raises(UserError, match="compile mode"):
        cache_builds.CacheStep.from_mapping({"modes": ["fastest"]})


def _builds(cold_s, warm_s):
    return pd.DataFrame(
        {
            "family": "yolov8", "width": 0.5, "batch": 64, "compile_mode": "default",
            "run": [1, 2], "cache": ["cold", "warm"], "status": "ok", "message": "",
            "compile_s": [cold_s, warm_s], "img_per_s": [5000.0, 5050.0],
        }
    )  # fmt: skip


@pytest.mark.parametrize(
    "cold_s, warm_s, speeds", [(90.0, 12.0, HOLDS), (90.0, 61.0, PARTLY), (30.0, 29.0, FAILS)]
)
def test_the_cache_rule_flips_with_the_cold_warm_ratio(cold_s, warm_s, speeds):
    facts = facts_table(analyse_cache.cache_facts(_builds(cold_s, warm_s)))
    (rule,) = [r for r in topic_rules("deploy") if r.id == "fast_cache_speeds_compile"]
    v = evaluate([rule], facts).iloc[0]
    assert v.measured == pytest.approx(cold_s / warm_s) and v.verdict == speeds


def test_no_fact_without_an_ok_warm_build():
    t = _builds(90.0, 10.0)
    t.loc[1, "status"] = "error"
    assert analyse_cache.cache_facts(t) == []


def test_a_build_process_result_keeps_numbers_numbers(tmp_path):
    import json

    import numpy as np

    row = {"rel_err": np.float32(0.5), "n": np.int64(3), "when": object}
    text = json.dumps(row, default=cache_builds.plain_value)
    back = json.loads(text)
    assert back["rel_err"] == 0.5 and back["n"] == 3 and isinstance(back["when"], str)


def test_a_time_limited_collect_builds_the_units_that_fit_and_a_slow_mode_goes_by_the_plan(
    tmp_path, monkeypatch
):
    """collect runs the step unit by unit to its deadline (the whole step need not fit): the
    first unit at its share of est_s, the next at the measured one's seconds; a mode the
    table has not built goes by the plan's ``mode_est_s`` before the other modes' seconds."""
    import time

    clock = {"t": 0.0}
    monkeypatch.setattr(time, "monotonic", lambda: clock["t"])
    calls = []
    fake = _fake_runner(calls=calls)

    def runner(args, env, timeout_s):
        clock["t"] += 30.0  # each build process: 30 s, a unit 60 s
        return fake(args, env, timeout_s)

    monkeypatch.setattr(cache_builds, "run_child", runner)
    p = tmp_path / "plan.yaml"
    params = {"widths": [0.25], "batch": 1, "imgsz": 64,
              "modes": ["default", "reduce-overhead", "max-autotune"],
              "mode_est_s": {"max-autotune": 500}}  # fmt: skip
    step = {"name": "cache", "kind": "compile_cache", "out": "cache.parquet", "est_s": 180,
            "params": params}  # fmt: skip
    p.write_text(yaml.safe_dump({"name": "t", "device": "cpu", "steps": [step]}))
    plan = contract_plans.load_plan(p)
    out = tmp_path / "out"
    collect.run_plan(plan, out, max_minutes=1.5, progress=False)  # 90 s of the step's 180
    assert [c[0] for c in calls] == ["default"] * 2  # the second unit by the first's 60 s
    status = collect.status(plan, out).set_index("step").loc["cache"]
    assert status.state == "partial"
    assert collect.need_s(plan.steps[0], plan, out, "partial") == pytest.approx(60 + 500)
    calls.clear()
    collect.run_plan(plan, out, max_minutes=5, progress=False)  # max-autotune's 500 s: later
    assert [c[0] for c in calls] == ["reduce-overhead"] * 2
    calls.clear()
    collect.run_plan(plan, out, max_minutes=9, progress=False)
    assert [c[0] for c in calls] == ["max-autotune"] * 2
    assert collect.status(plan, out).state.tolist() == ["done"]
    # mode_est_s schedules, it does not change what is measured: editing it keeps the table
    params["mode_est_s"] = {"max-autotune": 900}
    p.write_text(yaml.safe_dump({"name": "t", "device": "cpu", "steps": [step]}))
    assert collect.status(contract_plans.load_plan(p), out).state.tolist() == ["done"]
    params["budget_ms"] = 100  # a measurement's param does
    p.write_text(yaml.safe_dump({"name": "t", "device": "cpu", "steps": [step]}))
    assert collect.status(contract_plans.load_plan(p), out).state.tolist() == ["changed"]


def test_mode_est_s_names_compile_modes_and_seconds():
    check = CacheStep.params()["mode_est_s"].metadata["check"]
    assert check({"max-autotune": 560}, "mode_est_s") == (("max-autotune", 560.0),)
    for bad in ({"fastest": 5}, {"max-autotune": 0}, {}, [560]):
        with pytest.raises(UserError):
            check(bad, "mode_est_s")
    spec = cache_builds.CacheStep.from_mapping({"mode_est_s": {"max-autotune": 560}})
    assert spec.mode_est_s == (("max-autotune", 560.0),)
    assert cache_builds.unit_estimate(spec, (0.5, "max-autotune"), cache_builds.Pace()) == 560.0
    assert cache_builds.unit_estimate(spec, (0.5, "default"), cache_builds.Pace()) is None
