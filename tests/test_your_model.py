"""analyse.your_model and report.verdicts: model labels, the view of one model in a root
of any naming, and the per-layer occupancy rules moved across their thresholds."""

import pandas as pd
import pytest

from tests.fixtures.one_model import one_model_root
from yolo_sm.analyse.facts import facts_table
from yolo_sm.contract.datasets import open_root
from yolo_sm.contract.errors import UserError
from yolo_sm.report.rules import FAILS, HOLDS, NOT_TESTED, PARTLY, evaluate, topic_rules
from yolo_sm.topics.your_model import analyse as your_model
from yolo_sm.topics.your_model import report as findings


def test_model_labels():
    cfg = pd.DataFrame({"config": ["yolov8_w0.25_fp16_nhwc_b8", "best_fp16_nchw_b1", "x"]})
    assert list(your_model.model_labels(cfg)) == ["yolov8_w0.25", "best", ""]
    sweep = pd.DataFrame({"family": ["yolov8", "yolo11"], "scale": ["", "n"], "width": [0.5, 0.25]})
    assert list(your_model.model_labels(sweep)) == ["yolov8_w0.5", "yolo11n"]
    layers = pd.DataFrame({"model": ["resnet101"], "width": [float("nan")]})
    assert list(your_model.model_labels(layers)) == ["resnet101"]


def test_view_of_a_one_model_root_finds_every_role(tmp_path):
    v = your_model.view(open_root(one_model_root(tmp_path / "mine")))
    assert v.model == "yolov8_w0.25" and v.others == ()
    assert v.sources == {
        "sweep": "my_sweep",
        "trace": "my_trace",
        "ncu": "my_ncu",
        "model_layers": "my_layers",
    }
    s = v.load("sweep")
    assert (
        set(s.width) == {0.25} and s.batch.max() == 64 and s.attrs["dataset"].endswith("my_sweep")
    )


def test_view_of_a_many_model_root_narrows_to_the_model():
    h = open_root("h200")
    v = your_model.view(h, "yolov8_w1")
    assert set(your_model.model_labels(v.load("ncu"))) == {"yolov8_w1"}
    assert set(v.load("sweep").precision) == {"fp16"} and len(v.others) > 3
    with pytest.raises(UserError, match="no model 'nope'"):
        your_model.view(h, "nope")


def test_a_root_that_names_no_model_is_a_view_of_none_whose_sections_say_so(make_root):
    from yolo_sm.report import plots
    from yolo_sm.topics.your_model import report as sections

    bench = open_root(make_root("bench_only", ["bench_autotune"]))  # a table, but no model role
    for root in (bench, open_root(make_root("empty"))):
        v = your_model.view(root)
        assert v.model == "" and v.sources == {} and v.others == ()
        assert "holds no table that names a model" in sections.about(v)
        for role in your_model.ROLES:  # every section: one sentence naming what it lacks
            line = plots.lacks(v, role)
            assert line == v.missing(role) and f"no {role} table of any model" in line
        assert set(findings.verdicts(v)["verdict"]) == {NOT_TESTED}
        with pytest.raises(UserError, match="names a model"):  # a model asked for by name
            your_model.view(root, "yolov8_w1")
    # a root that names a model is read as before
    assert your_model.view(open_root(make_root("one", ["sweep_fp16_nhwc"]))).model


def test_an_ncu_table_without_occupancy_does_not_play_the_ncu_role(make_root):
    # ncu_throughput_w1 measured throughput metrics only: no achieved occupancy
    alone = open_root(make_root("tp", ["ncu_throughput_w1"]))
    assert your_model.view(alone).model == ""  # no table left that names a model
    both = open_root(make_root("both", ["ncu_throughput_w1", "ncu_batch_w1"]))
    v = your_model.view(both)
    assert v.sources == {"ncu": "ncu_batch_w1"} and v.model == "yolov8_w1"


def test_channel_table_units(tmp_path):
    v = your_model.view(open_root(one_model_root(tmp_path / "mine")))
    raw, t = v.load("model_layers"), your_model.channel_table(v.load("model_layers"))
    assert t.activation_mb.iloc[0] == pytest.approx(raw.out_bytes.iloc[0] / 1e6)
    assert t.gflops.sum() == pytest.approx(raw.flops.sum() / 1e9)


def _verdict(key, value):
    f = facts_table(
        [
            {
                "key": your_model.PREFIX + key,
                "value": value,
                "unit": "%",
                "scope": "",
                "datasets": (),
                "note": "",
            }
        ]
    )
    return evaluate(topic_rules("your_model"), f).set_index("id").verdict


@pytest.mark.parametrize(
    "rule, key, values",
    [
        ("your_model_half_idle_warps", "achieved_occupancy_tw_pct", (40, 55, 70)),
        ("your_model_low_layers_dominate", "time_share_below_50_pct", (60, 30, 10)),
        ("your_model_one_layer_dominates", "slowest_layer_time_share_pct", (30, 20, 10)),
    ],
)
def test_layer_rules_flip(rule, key, values):
    got = [_verdict(key, v)[rule] for v in values]
    assert got == [HOLDS, PARTLY, FAILS]


def test_layer_facts_from_real_ncu(tmp_path):
    v = your_model.view(open_root(one_model_root(tmp_path / "mine")))
    f = your_model.facts(v).set_index("key").value
    occ = f[your_model.PREFIX + "achieved_occupancy_tw_pct"]
    assert 0 < occ < 100
    ncu = v.load("ncu")
    w = ncu.duration_us / ncu.duration_us.sum()
    assert occ == pytest.approx((ncu.achieved_occupancy_pct * w).sum(), rel=0.02)


def test_verdicts_name_the_found_datasets_and_skip_what_the_plan_lacks(tmp_path):
    v = your_model.view(open_root(one_model_root(tmp_path / "mine")))
    t = findings.verdicts(v).set_index("id")
    assert t.loc["batch_pays", "datasets"] == "mine/my_sweep"
    assert t.loc["your_model_half_idle_warps", "datasets"] == "mine/my_ncu"
    assert not any("gpm" in i for i in t.index)  # no GPM table in a one-model plan
    cpu = findings.verdicts(your_model.view(open_root("cpu"))).set_index("id")
    assert cpu.loc["your_model_half_idle_warps", "verdict"] == NOT_TESTED


def test_rule_ids_do_not_clash_with_the_catalog():
    from yolo_sm.report import catalog

    ids = {r.id for r in catalog.all_rules()}
    assert {r.id for r in topic_rules("your_model")} <= ids  # validated and decided like every rule
    assert not ids & {r.id for r in topic_rules("compare")}


def test_live_plan_names_its_steps_by_role(tmp_path):
    from yolo_sm.core.live import LiveRoot
    from yolo_sm.topics.your_model import collect as collect_model

    plan = collect_model.plan_for("yolov8_w0.25")
    assert [s.name for s in plan.steps] == list(your_model.ROLES)
    sweep = plan.steps[0].params
    assert sweep["family"] == "yolov8" and sweep["widths"] == [0.25]
    assert max(sweep["batches"]) == 64 and sweep["precisions"] == ["fp16"]
    live = LiveRoot(tmp_path, "live", plan=plan)  # nothing collected yet
    assert {r: live.find(r) for r in your_model.ROLES} == {r: r for r in your_model.ROLES}
    assert collect_model.model_params("yolov8n") == {"family": "yolov8", "widths": ["n"]}
    assert collect_model.model_params("runs/best.pt") == {"model": "runs/best.pt"}
    assert collect_model.slug("runs/train 3/best.pt") == "best"
    with pytest.raises(UserError, match="set MODEL"):
        collect_model.model_params(None)


def test_a_one_model_root_is_read_whole_whatever_its_tables_call_the_model(tmp_path):
    from yolo_sm.contract.store import write_atomic

    root = one_model_root(tmp_path / "ckpt")
    s = pd.read_parquet(root / "my_sweep.parquet")
    s = s.assign(family="best", width=float("nan"))  # a checkpoint's sweep rows
    write_atomic(s, root / "my_sweep.parquet")
    v = your_model.view(open_root(root))
    assert v.model == "best" and set(v.sources) == set(your_model.ROLES) and not v.narrow
    assert len(v.load("ncu")) == len(pd.read_parquet(root / "my_ncu.parquet"))
    assert len(v.load("sweep")) == len(s)


def test_trace_layers_per_forward():
    tr = pd.DataFrame(
        {
            "config": ["c"] * 4,
            "layer": ["model.0", "model.0", "model.10", ""],
            "iteration": [0, 1, 0, 0],
            "duration_us": [10.0, 10.0, 30.0, 5.0],
            "theoretical_occupancy_pct": [50.0, 50.0, 100.0, 10.0],
            "est_occupancy_pct": [40.0, 40.0, 20.0, 10.0],
        }
    )
    t = your_model.trace_layers(tr).set_index("layer")
    assert list(t.index) == ["model.0", "model.10"]  # model order, no unattributed kernel
    assert t.kernels["model.0"] == 1 and t.time_us["model.0"] == 10.0  # per forward
    assert t.theoretical_occupancy_tw_pct["model.10"] == 100.0


def test_the_shipped_example_is_one_model_found_by_role():
    v = your_model.view(open_root("examples/yolov8n_calibrated"))
    assert not v.narrow and {"sweep", "trace", "model_layers"} <= set(v.sources)
    t = findings.verdicts(v).set_index("id")
    assert t.verdict["batch_pays"] != NOT_TESTED  # decided from the example's own sweep
