"""Activation lifetimes (a hand-made model with a known skip, a real YOLOv8 forward on the CPU),
the lifetime-reuse arena, the allocator-pool run's plumbing, the facts and the rules' flips."""

import math

import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tests.figure_checks import problems as figure_problems
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.plans import load_plan
from yolo_sm.contract.schema import problems
from yolo_sm.report.rules import evaluate, topic_rules
from yolo_sm.topics.memory import analyse as am
from yolo_sm.topics.memory import report as mp
from yolo_sm.topics.memory.collect import (
    batch_sequence,
    lifetime_rows,
    lifetimes_frame,
    memory_layers,
    pool_table,
    trace_lifetimes,
)


class Add(nn.Module):
    def forward(self, a, b):
        return a + b


class Concat(nn.Module):
    def forward(self, a, b):
        return torch.cat((a, b), 1)


class Skip(nn.Module):
    """c0 -> c1 -> c2 -> add(c0's output, c2's output): c0's output waits two layers."""

    def __init__(self):
        super().__init__()
        self.c0 = nn.Conv2d(3, 4, 3, padding=1)
        self.c1 = nn.Conv2d(4, 4, 3, padding=1)
        self.c2 = nn.Conv2d(4, 4, 1)
        self.add = Add()

    def forward(self, x):
        y0 = self.c0(x)
        y1 = self.c1(y0)
        y2 = self.c2(y1)
        return self.add(y0, y2)


def _trace(model, side=8, **labels):
    model.eval()
    x = torch.rand(1, 3, side, side)

    def run(t):
        with torch.inference_mode():
            return model(t)

    labels = {"model": "yolov8", "family": "yolov8", "width": 1.0, "batch": 1, "imgsz": side}
    labels.update(precision="fp32", layout="nchw", device="cpu")
    return lifetimes_frame(trace_lifetimes(run, x, model, device="cpu"), **labels)


def test_a_skip_lives_until_its_consumer():
    df = _trace(Skip())
    assert not problems(df, "memory_lifetimes")
    lay = am.level(df, "layer").set_index("layer")
    one = 4 * 8 * 8 * 4  # 4 channels of 8x8 fp32
    assert (lay.out_bytes == one).all()
    assert lay.freed_after_step.tolist() == [3, 2, 3, 3]
    assert lay.lifetime_steps.tolist() == [3, 1, 1, 0]
    assert lay.live_bytes_after.tolist() == [one, 2 * one, 2 * one, 0]
    # eager Python keeps y0, y1, y2 in the forward's locals until it returns
    assert lay.held_until_step.tolist() == [3, 3, 3, 3]
    assert lay.held_bytes_after.tolist() == [one, 2 * one, 3 * one, 0]
    t = am.level(df, "tensor")
    assert len(t) == 4 and (t.out_bytes == one).all()
    first = t.iloc[0]
    assert first.freed_after_step == t.iloc[3].created_at_step  # read last by the add
    held = am.held_past_last_use(df)  # only y1 outlives its last use (until the return)
    assert held.layer.tolist() == ["c1"] and held.held_ops.tolist() == [1]
    assert held.last_use_in.tolist() == ["c2"]
    m = am.level(df, "model").iloc[0]
    assert m.weight_bytes == 4 * (4 * 3 * 9 + 4 + 4 * 4 * 9 + 4 + 4 * 4 + 4)
    assert m.input_bytes == 3 * 8 * 8 * 4 and m.out_bytes == 4 * one
    assert math.isnan(m.measured_peak_bytes)


def test_peak_table_of_the_skip_model():
    df = _trace(Skip())
    p = am.peak_table(df).iloc[0]
    one = 4 * 8 * 8 * 4
    assert p.planned_activation_peak_bytes == 3 * one
    assert p.eager_activation_peak_bytes == 4 * one  # the output beside three held locals
    assert p.reuse_arena_bytes == 3 * one
    assert p.reuse_saving_pct == pytest.approx(25.0)
    assert p.eager_excess_pct == pytest.approx(100 / 3)
    assert math.isnan(p.eager_vs_measured) and math.isnan(p.measured_activation_peak_bytes)


def test_reuse_arena_of_known_intervals():
    arena, offsets = am.reuse_arena([(0, 1, 100), (1, 2, 50), (2, 3, 100)])
    assert arena == 150 and offsets == [0, 100, 0]
    arena, _ = am.reuse_arena([(0, 0, 10), (1, 1, 20), (2, 2, 30)])
    assert arena == 30  # nothing overlaps in time: one buffer of the largest


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 20), st.integers(0, 6), st.integers(1, 1000)),
        min_size=1,
        max_size=25,
    )
)
def test_reuse_arena_is_valid_and_never_below_the_peak(raw):
    items = [(s, s + d, b) for s, d, b in raw]
    arena, offsets = am.reuse_arena(items)
    peak = max(sum(b for s, e, b in items if s <= t <= e) for t in range(30))
    assert peak <= arena <= sum(b for _, _, b in items)
    for i, (s, e, b) in enumerate(items):
        for j, (s2, e2, b2) in enumerate(items[:i]):
            if s <= e2 and s2 <= e:  # alive together: their bytes must not overlap
                assert offsets[i] + b <= offsets[j] or offsets[j] + b2 <= offsets[i]


class _Root:
    """A root holding in-memory tables."""

    name = "r"

    def __init__(self, **tables):
        self.tables = tables

    def has(self, name):
        return name in self.tables

    def names(self):
        return list(self.tables)

    def info(self, name):
        return {"kind": name}

    def load(self, name):
        return self.tables[name]


def test_what_the_graph_fixes_is_no_rule():
    # the reuse saving, eager's excess and the shares at the peak are the same on every machine
    ids = {r.id for r in topic_rules("memory")}
    assert not ids & {"memory_concat_holds_peak", "memory_reuse_saves", "memory_eager_holds_more"}


def test_peak_rule_flips_with_the_measured_peak():
    df = _trace(Skip()).assign(batch=16, precision="fp16", imgsz=640)  # the rule's setting
    eager = am.peak_table(df).eager_activation_peak_bytes.iloc[0]
    model = df.level == "model"

    def verdict(measured):
        d = df.copy()
        d.loc[model, "measured_peak_bytes"] = measured + 1000.0
        d.loc[model, "resident_bytes"] = 1000.0  # held before the forward: not predicted
        facts = am.facts(_Root(memory_lifetimes=d))
        return evaluate(topic_rules("memory"), facts).set_index("id").loc["memory_peak_predicted"]

    near = verdict(eager / 1.10)
    assert near.measured == pytest.approx(10.0) and near.verdict == "holds"
    other = am.facts(_Root(memory_lifetimes=df.assign(batch=2)))  # another batch: not this rule
    assert evaluate(topic_rules("memory"), other).set_index("id").verdict[
        "memory_peak_predicted"
    ] == ("not tested")
    assert verdict(eager / 1.25).verdict == "partly"
    assert verdict(eager / 2.0).verdict == "does not hold"


def test_yolo_lifetimes_follow_the_save_list():
    df = lifetime_rows(
        "yolov8", 0.25, batch=1, imgsz=64, precision="fp32", layout="nchw", device="cpu"
    )
    assert not problems(df, "memory_lifetimes")
    lay = am.level(df, "layer").set_index("index")
    # YOLOv8's neck: P4 (6) and P3 (4) wait for the Concats 11 and 14, SPPF (9) for 20
    assert lay.loc[4, "freed_after_step"] == 14 and lay.loc[4, "lifetime_steps"] == 10
    assert lay.loc[6, "freed_after_step"] == 11
    assert lay.loc[9, "freed_after_step"] == 20
    concat = lay[lay.module_type == "Concat"]
    for i, src in zip(concat.index, concat.from_layers, strict=True):
        far = [int(s) for s in src.split(",") if s != "-1"]
        assert all(lay.loc[f, "freed_after_step"] >= i for f in far)
    # DetectionModel keeps the outputs of its save list until the forward returns
    assert lay.loc[4, "held_until_step"] == lay.index.max()
    assert lay.loc[5, "held_until_step"] == 6  # not saved: gone once layer 6 has run
    t = am.level(df, "tensor")
    assert am.level(df, "model").out_bytes.iloc[0] == t.out_bytes.sum()
    assert (t.freed_after_step >= t.created_at_step).all()
    assert (t.held_until_step >= t.freed_after_step).all()
    longest = am.longest_lifetimes(df, 2)
    assert longest.layer.tolist() == ["model.9", "model.4"]
    p = am.peak_table(df).iloc[0]
    assert p.planned_activation_peak_bytes <= p.eager_activation_peak_bytes
    assert p.planned_activation_peak_bytes <= p.reuse_arena_bytes < p.activation_sum_bytes
    assert memory_layers(torch.nn.Sequential(torch.nn.ReLU()))[0].name == "0"


def _pool(reserved_default, reserved_expandable, ms_expandable=10.0):
    rows = []
    for conf, reserved, ms in (
        ("default", reserved_default, 10.0),
        ("expandable_segments:True", reserved_expandable, ms_expandable),
    ):
        for step, b in enumerate([4, 8, 4, 8]):
            rows.append(
                {
                    "alloc_conf": conf,
                    "width": 1.0,
                    "step": step,
                    "batch": b,
                    "first_of_batch": step < 2,
                    "allocated_bytes": 100.0,
                    "reserved_bytes": reserved,
                    "inactive_split_bytes": 0.1 * reserved,
                    "alloc_retries": 0.0,
                    "peak_allocated_bytes": 50.0 * b,
                    "peak_reserved_bytes": reserved,
                    "latency_ms": ms,
                }
            )
    return pd.DataFrame(rows)


def test_pool_summary_and_the_expandable_rules_flip():
    s = am.pool_summary(_pool(1000.0, 800.0)).set_index("alloc_conf")
    assert s.loc["default", "reserved_over_peak_allocated"] == pytest.approx(1000 / 400)
    assert s.loc["default", "inactive_split_share_pct"] == pytest.approx(10.0)
    assert s.loc["default", "img_per_s"] == pytest.approx(1e3 * 12 / 20)  # first forwards out

    def verdicts(pool):
        return (
            evaluate(topic_rules("memory"), am.facts(_Root(memory_pool=pool)))
            .set_index("id")
            .verdict
        )

    assert verdicts(_pool(1000.0, 800.0))["memory_expandable_lowers_peak"] == "holds"
    assert verdicts(_pool(1000.0, 1030.0))["memory_expandable_lowers_peak"] == "partly"
    assert verdicts(_pool(1000.0, 1200.0))["memory_expandable_lowers_peak"] == "does not hold"
    assert verdicts(_pool(1000.0, 800.0, 10.2))["memory_expandable_same_speed"] == "holds"
    assert verdicts(_pool(1000.0, 800.0, 12.0))["memory_expandable_same_speed"] == "does not hold"
    cpu = _pool(math.nan, math.nan)  # no allocator counters: the configurations are not compared
    assert verdicts(cpu)["memory_expandable_lowers_peak"] == "not tested"
    assert verdicts(cpu)["memory_expandable_same_speed"] == "not tested"


def test_figures_speak_the_vocabulary():
    df = _trace(Skip())
    for fig in (
        mp.plot_live_set(am.op_curves(df)),
        mp.plot_layer_live(am.layer_curves(df)),
        mp.plot_pool(_pool(1e9, 8e8)),
    ):
        assert not figure_problems(fig) and len(fig.data) >= 2


def test_pool_runs_each_conf_in_its_own_process():
    df = pool_table(
        ("default", "expandable_segments:True"),
        timeout_s=240,
        model="yolov8",
        width=0.25,
        forwards=3,
        batch_min=1,
        batch_max=2,
        imgsz=64,
        precision="fp32",
        layout="nchw",
        device="cpu",
    )
    assert not problems(df, "memory_pool")
    assert df.groupby("alloc_conf").size().to_dict() == {
        "default": 3,
        "expandable_segments:True": 3,
    }
    seqs = df.groupby("alloc_conf").batch.apply(list)
    assert seqs.iloc[0] == seqs.iloc[1] == batch_sequence(3, 1, 2, 0)
    assert (df.latency_ms > 0).all() and df.reserved_bytes.isna().all()


def test_bad_pool_and_plan_inputs_are_one_sentence(tmp_path):
    with pytest.raises(UserError, match="batch_min"):
        batch_sequence(3, 5, 2)
    plan = load_plan("data/plans/full.yaml")
    kinds = {s.name: s.kind for s in plan.steps}
    assert kinds["memory_lifetimes"] == "memory_lifetimes" and kinds["memory_pool"] == "memory_pool"
    assert sum(s.est_s for s in plan.steps if s.kind.startswith("memory_")) <= 60
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\nsteps:\n  - {name: m, kind: memory_pool, out: m.parquet, params: {forwards: 0}}\n"
    )
    with pytest.raises(UserError, match="forwards"):
        load_plan(bad)


def test_the_allocator_readings_are_wired(monkeypatch):
    """The GPU branch of the recorder, on CPU tensors with a fake allocator: every layer and
    op reads it, and the model row holds the untraced forward's peak."""
    cuda = torch.cuda
    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(cuda, "reset_peak_memory_stats", lambda *a: None)
    monkeypatch.setattr(cuda, "memory_allocated", lambda *a: 1000)
    monkeypatch.setattr(cuda, "max_memory_allocated", lambda *a: 1500)
    model = Skip().eval()
    traced = trace_lifetimes(model, torch.rand(1, 3, 8, 8), model, device="cuda")
    df = lifetimes_frame(traced, model="yolov8", width=1.0)
    lay, t = am.level(df, "layer"), am.level(df, "tensor")
    assert (lay.measured_allocated_bytes == 0).all() and (lay.measured_peak_bytes == 500).all()
    assert (t.transient_bytes == 500).all()
    m = am.level(df, "model").iloc[0]
    assert m.measured_peak_bytes == 1500 and m.resident_bytes == 1000


def test_the_measured_peak_is_compared_on_what_the_process_held_before_the_forward():
    """Tensors the process held before the forward (another model, a previous run) are in the
    allocator's peak: the predictions are compared on that base, not on weights + input."""
    from yolo_sm.topics.memory import analyse as am
    from yolo_sm.topics.memory.collect import lifetime_rows

    df = lifetime_rows("yolov8", 0.25, batch=1, imgsz=64, device="cpu")
    model = df.level == "model"
    p = am.peak_table(df).iloc[0]
    fresh = p.weight_bytes + p.input_bytes
    other = 5e8  # half a GB held by something else in the process
    for held in (fresh, fresh + other):
        d = df.copy()
        d.loc[model, "resident_bytes"] = held
        d.loc[model, "measured_peak_bytes"] = held + p.eager_activation_peak_bytes
        got = am.peak_table(d).iloc[0]
        assert got.eager_vs_measured == pytest.approx(1.0) and got.held_before_bytes == held
        assert got.measured_activation_peak_bytes == p.eager_activation_peak_bytes
