"""analyse.compare and report.verdicts on tiny frames: one-root-only rows kept, the spread
split by host-bound points, and each pair rule moved across its threshold."""

import json
import math

import pandas as pd
import pytest

from yolo_sm.contract.datasets import open_root
from yolo_sm.report.rules import FAILS, HOLDS, NOT_TESTED, PARTLY, evaluate, topic_rules
from yolo_sm.topics.compare import analyse as compare
from yolo_sm.topics.compare import report as findings


def _pt(backend="cudagraph", batch=16, img=100.0, width=0.25, precision="fp16", tflops=1.0):
    keys = {k: "" for k in compare.POINT_KEYS}
    keys.update(
        family="yolov8",
        width=str(width),
        precision=precision,
        layout="nhwc",
        backend=backend,
        batch=str(batch),
        imgsz="640",
    )
    return {
        **keys,
        "img_per_s": img,
        "median_ms": 1.0,
        "tflops": tflops,
        "flops_per_img": 1e9,
        "dataset": "s",
    }


def test_join_keeps_points_of_one_root_only():
    a = pd.DataFrame([_pt(batch=1), _pt(batch=16), _pt(batch=64)])
    b = pd.DataFrame([_pt(batch=16, img=110.0), _pt(batch=128)])
    m = compare.join_points(a, b, {"fp16": 100.0}, {"fp16": 50.0})
    assert len(m) == 4  # 3 of a, 2 of b, one shared
    assert m.present.value_counts().to_dict() == {"only a": 2, "both": 1, "only b": 1}
    shared = m[m.present == "both"].iloc[0]
    assert shared.ratio == pytest.approx(1.1)
    assert shared.pct_of_ceiling_a == pytest.approx(1.0)  # 1 TFLOP/s of 100
    assert shared.pct_of_ceiling_b == pytest.approx(2.0)  # each machine's own ceiling
    only_b = m[m.present == "only b"].iloc[0]
    assert math.isnan(only_b.img_per_s_a) and only_b.img_per_s_b == 100.0


def test_no_ceiling_gives_nan_share():
    a = pd.DataFrame([_pt()])
    m = compare.join_points(a, a, {"fp16": 100.0}, {})
    assert math.isnan(m.pct_of_ceiling_b.iloc[0]) and m.pct_of_ceiling_a.iloc[0] == 1.0


def test_spread_splits_host_bound_points():
    a = pd.DataFrame([_pt("eager", 1), _pt("eager", 64), _pt("cudagraph", 1)])
    b = pd.DataFrame([_pt("eager", 1, 150.0), _pt("eager", 64, 105.0), _pt("cudagraph", 1, 98.0)])
    s = compare.spread(compare.join_points(a, b)).set_index("launch_bound")
    assert s.loc[True, "points"] == 1 and s.loc[True, "max_dev_pct"] == pytest.approx(50.0)
    assert s.loc[False, "points"] == 2 and s.loc[False, "max_dev_pct"] == pytest.approx(5.0)
    assert s.loc[False, "within_10pct"] == 2


class _Root:
    """What compare.facts reads of a root: its name and its machine."""

    def __init__(self, name, gpu):
        self.name, self._gpu = name, gpu

    def machine(self):
        return {"gpu_name": self._gpu} if self._gpu else {}


def _verdicts(ratios_gpu, ratios_host=(), gpu_a="G", gpu_b="G", only_a=0):
    rows_a, rows_b = [], []
    for i, r in enumerate(ratios_gpu):
        rows_a.append(_pt("cudagraph", 2**i))
        rows_b.append(_pt("cudagraph", 2**i, 100.0 * r))
    for i, r in enumerate(ratios_host):
        rows_a.append(_pt("eager", 2**i))
        rows_b.append(_pt("eager", 2**i, 100.0 * r))
    rows_a += [_pt("compile", 2**i) for i in range(only_a)]
    m = compare.join_points(pd.DataFrame(rows_a), pd.DataFrame(rows_b))
    f = compare.facts(_Root("a", gpu_a), _Root("b", gpu_b), m)
    return evaluate(topic_rules("compare"), f).set_index("id").verdict


def test_agree_rule_flips_at_ten_percent():
    assert _verdicts([1.05] * 20)["compare_gpu_bound_agree"] == HOLDS
    assert _verdicts([1.05] * 19 + [1.5])["compare_gpu_bound_agree"] == HOLDS  # 95 % within
    assert _verdicts([1.05] * 17 + [1.5] * 3)["compare_gpu_bound_agree"] == PARTLY
    assert _verdicts([1.2] * 20)["compare_gpu_bound_agree"] == FAILS
    # host-bound points are judged apart: they do not move the GPU-bound verdict
    v = _verdicts([1.0] * 4, ratios_host=[1.5, 1.6])
    assert v["compare_gpu_bound_agree"] == HOLDS


def test_host_bound_gpu_work_rule_flips_at_ten_percent():
    def v(busy_ratio):
        a = [_pt("eager", 1) | {"gpu_busy_ms": 1.0}, _pt("eager", 2) | {"gpu_busy_ms": 2.0}]
        b = [_pt("eager", 1, 300.0) | {"gpu_busy_ms": busy_ratio},
             _pt("eager", 2, 40.0) | {"gpu_busy_ms": 2.0 * busy_ratio}]  # fmt: skip
        m = compare.join_points(pd.DataFrame(a), pd.DataFrame(b))
        f = compare.facts(_Root("a", "G"), _Root("b", "G"), m)
        return evaluate(topic_rules("compare"), f).set_index("id").verdict

    # the host's pace moved 3x and 0.4x; the GPU's work did not
    assert v(1.03)["compare_host_bound_gpu_work_agree"] == HOLDS
    assert v(1.2)["compare_host_bound_gpu_work_agree"] == FAILS
    assert _verdicts([1.0], ratios_host=[1.0])["compare_host_bound_gpu_work_agree"] == NOT_TESTED


def test_faster_rule_flips():
    assert _verdicts([1.5, 2.0])["compare_b_faster"] == HOLDS
    assert _verdicts([1.5, 0.5])["compare_b_faster"] == PARTLY
    assert _verdicts([0.5, 0.5])["compare_b_faster"] == FAILS


def test_no_shared_point_reads_not_tested():
    v = _verdicts([], only_a=3)
    assert v["compare_gpu_bound_agree"] == NOT_TESTED and v["compare_b_faster"] == NOT_TESTED


def test_layers_leave_out_an_ncu_table_without_occupancy(make_root):
    alone = open_root(make_root("tp", ["ncu_throughput_w1"]))  # throughput metrics only
    assert compare.layers(alone).empty
    both = open_root(make_root("both", ["ncu_throughput_w1", "ncu_batch_w1"]))
    assert set(compare.layers(both).dataset) == {"ncu_batch_w1"}


def test_join_layers_keeps_layers_of_one_root():
    la = pd.DataFrame(
        {
            "config": ["c", "c"],
            "layer": ["model.0", "model.1"],
            "layer_idx": [0, 1],
            "module_type": ["Conv", "Conv"],
            "time_us": [1.0, 2.0],
            "achieved_occupancy_tw_pct": [40.0, 50.0],
            "theoretical_occupancy_tw_pct": [50.0, 60.0],
            "main_limiter": ["grid", "warps"],
            "dataset": ["n", "n"],
        }
    )
    lb = la.iloc[[1]].assign(achieved_occupancy_tw_pct=55.0)
    m = compare.join_layers(la, lb)
    assert m.set_index("layer").present.to_dict() == {"model.0": "only a", "model.1": "both"}
    assert m.set_index("layer").achieved_minus_pct_points["model.1"] == pytest.approx(5.0)


def test_side_by_side_marks_rules_one_root_lacks():
    cols = ["id", "statement", "unit", "measured", "verdict"]
    va = pd.DataFrame(
        [
            ["r1", "s1", "%", 1.0, HOLDS],
            ["r2", "s2", "%", math.nan, NOT_TESTED],
            ["r3", "s3", "%", 2.0, FAILS],
        ],
        columns=cols,
    )
    vb = pd.DataFrame(
        [["r1", "s1", "%", 1.0, FAILS], ["r2", "s2", "%", math.nan, NOT_TESTED]], columns=cols
    )
    t = findings.side_by_side(va, vb, "x", "y")
    assert list(t.index) == ["r1", "r3"] and t.attrs["dropped"] == 1
    assert t.loc["r3", "verdict b (y)"] == "absent" and not t.loc["r1", "agree"]
    same = findings.side_by_side(va, va, "x", "x")  # a root against itself
    assert same["agree"].all() and len(same) == 2


def test_provenance_table_names_both_machines():
    t = compare.provenance_table(open_root("h200"), open_root("cpu"))
    assert t.loc["gpu_name", "a: h200"] == open_root("h200").device_name()
    assert t.loc["gpu_name", "b: cpu"] == "" and not t.loc["gpu_name", "same"]
    assert {"sm_count", "driver", "cuda", "torch", "sm_clock_max_mhz"} <= set(t.index)


def test_h200_against_cpu_shares_no_point_and_drops_none(tmp_path):
    a, b = open_root("h200"), open_root("cpu")
    m = compare.compare_points(a, b)
    n_b = sum(len(b.load(n).query("status == 'ok'")) for n in b.find_all("sweep"))
    assert (m.present == "only b").sum() == n_b  # every CPU point is listed


def test_find_prefers_the_manifest_role(tmp_path, make_root):
    root = make_root("r", ["sweep_fp16_nhwc", "sweep_1280", "ncu_width_b8"])
    r = open_root(root)
    assert r.find("sweep") == "sweep_fp16_nhwc" and r.find("trace") is None
    mf = json.loads((root / "manifest.json").read_text())
    mf["datasets"]["sweep_1280"]["role"] = "sweep"
    (root / "manifest.json").write_text(json.dumps(mf))
    assert open_root(root).find_all("sweep") == ["sweep_1280", "sweep_fp16_nhwc"]
    with pytest.raises(Exception, match="unknown dataset role"):
        r.find("nothing")


def test_pair_rules_are_registered_apart_from_the_root_rules():
    from yolo_sm.report import catalog

    t = catalog.pair_verdict_table(open_root("h200"), open_root("h200")).set_index("id")
    pair_rules = topic_rules("compare") + topic_rules("batch", "pair_rules.toml")
    assert set(t.index) == {r.id for r in pair_rules}
    assert t.verdict["multi_gpu_scales"] == NOT_TESTED  # no run on several GPUs
    assert t.verdict["compare_gpu_bound_agree"] == HOLDS
    assert t.measured["compare_gpu_bound_agree"] == 100.0  # a root against itself: ratio 1
    assert not {r.id for r in catalog.all_rules()} & set(t.index)


def test_key_text_reads_ints_floats_and_missing_alike():
    got = compare.key_text(pd.Series([1, 1.0, "1", None, "None", float("nan"), "eager", 0.25]))
    assert list(got) == ["1", "1", "1", "", "", "", "eager", "0.25"]


def test_the_shipped_h100_and_h200_differ_where_the_same_gpu_control_does_not():
    """Notebook 12's default pair: the H200 root against the H100 root names two GPUs, and at
    least one rule reads otherwise than it does for the H200 against its same-GPU control
    (recomputed here from the sweep's points with plain pandas)."""
    h200, h100, control = open_root("h200"), open_root("h100"), open_root("h200_repeat")
    assert h200.device_name() != h100.device_name()
    assert h200.device_name() == control.device_name()
    two = findings.verdicts(h200, h100, compare.compare_points(h200, h100)).set_index("id")
    same = findings.verdicts(h200, control, compare.compare_points(h200, control)).set_index("id")
    differ = [i for i in two.index if two.loc[i, "verdict"] != same.loc[i, "verdict"]]
    assert differ, "no rule tells the two GPUs apart from two runs of one"
    # the GPU-bound agreement, by hand: share of shared GPU-bound points within 10 %
    shared = sorted(set(h200.find_all("sweep")) & set(h100.find_all("sweep")))
    a, b = (pd.concat([r.load(n) for n in shared]) for r in (h200, h100))
    keys = ["family", "width", "precision", "layout", "backend", "batch", "imgsz"]
    ok = lambda d: d[(d.status == "ok") & ~d.host_bound.fillna(False).astype(bool)]  # noqa: E731
    m = ok(a)[[*keys, "img_per_s"]].merge(ok(b)[[*keys, "img_per_s"]], on=keys)
    within = ((m.img_per_s_y / m.img_per_s_x - 1).abs() <= 0.10).mean() * 100
    assert len(m) and within >= 95  # the same SM count and clocks: GPU-bound points agree
    assert two.loc["compare_gpu_bound_agree", "measured"] == pytest.approx(within)
    faster = (m.img_per_s_y > m.img_per_s_x).mean() * 100  # b (H100) faster: a minority
    assert two.loc["compare_b_faster", "measured"] == pytest.approx(faster)
