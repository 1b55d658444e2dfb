"""Notebook 00: the calculator's launch from the data, waves, and the primer's facts, checked
numerically on the shipped H200 tables and on roots that lack datasets."""

import json
import math
import shutil

import pandas as pd
import pytest

from yolo_sm.analyse.facts import value
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.weighting import weighted_mean
from yolo_sm.contract.datasets import open_root
from yolo_sm.report import rules
from yolo_sm.topics.primer import analyse as primer
from yolo_sm.topics.primer import checks as primer_checks
from yolo_sm.topics.primer import rules as findings


def subset_root(tmp_path, names, provenance=None):
    """A dataset root in ``tmp_path`` holding only ``names`` of the shipped H200 root."""
    src = open_root("h200")
    entries = {}
    for n in names:
        e = dict(src.info(n))
        shutil.copy(src.path / e["file"], tmp_path / e["file"])
        if provenance is not None:
            e["provenance"] = provenance
        entries[n] = e
    (tmp_path / "manifest.json").write_text(json.dumps({"datasets": entries}))
    return open_root(tmp_path)


@pytest.fixture(scope="module")
def h200():
    return open_root("h200")


@pytest.fixture(scope="module")
def facts(h200):
    return primer.facts(h200)


def test_wave_table_tail():
    t = primer.wave_table([132, 133, 300], active_blocks_per_sm=1, sm_count=132).set_index(
        "grid_size"
    )
    assert t.loc[132, "waves"] == 1 and t.loc[132, "sm_slots_busy"] == 1
    assert t.loc[133, "blocks_in_last_wave"] == 1
    assert t.loc[133, "sm_slots_busy"] == pytest.approx(133 / 264)
    assert t.loc[300, "blocks_in_last_wave"] == 36


def test_example_grids_follow_the_sm_count():
    g = primer.example_grids(100)
    assert g == [50, 100, 101, 150, 200, 230, 1000]
    t = primer.wave_table(g, sm_count=100)
    assert t.waves.tolist() == pytest.approx([0.5, 1, 1.01, 1.5, 2, 2.3, 10])


def test_sm_count_and_compute_capability_from_provenance(h200, tmp_path):
    assert primer.sm_count(h200) == 132
    assert primer.compute_capability(h200) == "9.0"
    cpu = subset_root(tmp_path, ["sweep_fp16_nhwc"], provenance={"cpu_model": "a CPU"})
    assert primer.sm_count(cpu) is None and primer.compute_capability(cpu) is None


def test_flagship_launch_comes_from_the_ncu_table(h200):
    launch = primer.flagship_launch(h200)
    ncu = add_kernel_class(h200.load("ncu_width_b8"))
    tc = ncu[ncu.kernel_class == "tensor_core_conv"]
    by_shape = tc.groupby(primer.LAUNCH_COLUMNS).duration_us.sum()
    top = by_shape.idxmax()
    assert (
        launch["threads_per_block"],
        launch["registers_per_thread"],
        launch["shared_mem_per_block"],
    ) == top
    assert launch["shared_mem_per_block"] > 200 * 1024  # dynamic shared memory, not 0
    assert launch["time_share"] == pytest.approx(by_shape.max() / by_shape.sum())
    res = primer.calculate(launch)
    # the calculator's block limits are Nsight Compute's for this launch
    assert res.block_limit_registers == launch["ncu_limit_registers"]
    assert res.block_limit_shared_mem == launch["ncu_limit_shared_mem"]
    assert res.occupancy_pct == pytest.approx(launch["ncu_theoretical_occupancy_pct"])
    assert set(res.binding_limits) == {"registers", "shared_mem"}


def test_flagship_launch_without_ncu_is_the_example(tmp_path):
    root = subset_root(tmp_path, ["sweep_fp16_nhwc"])
    launch = primer.flagship_launch(root)
    assert launch["source"] == "example" and math.isnan(launch["time_share"])
    assert primer.calculate(launch).occupancy_pct == 100.0


def test_focus_config_is_width_one_or_nearest():
    df = pd.DataFrame(
        {"config": ["yolov8_w0.5_fp16_nhwc_b8", "yolov8_w1.25_fp16_nhwc_b8"], "duration_us": 1}
    )
    assert primer.focus_config(df) == "yolov8_w1.25_fp16_nhwc_b8"
    other = pd.DataFrame({"config": ["a", "b", "b"], "duration_us": [5.0, 3.0, 3.0]})
    assert primer.focus_config(other) == "b"


def test_tensor_core_time_sits_at_one_block_per_sm(h200):
    ncu = h200.load("ncu_width_b8")
    lv = primer.tensor_core_occupancy_levels(ncu[ncu.config == "yolov8_w1_fp16_nhwc_b8"])
    top = lv.iloc[0]
    assert top.theoretical_occupancy_pct == 18.75 and top.time_share > 0.5
    assert (top.block_size, top.registers_per_thread) == (384, 168)
    assert lv.time_share.sum() == pytest.approx(1.0)


def test_forward_facts_match_a_direct_computation(h200, facts):
    fwd = primer.forward(h200.load("ncu_width_b8"))
    assert fwd.config.unique().tolist() == ["yolov8_w1_fp16_nhwc_b8"]
    tc = fwd[fwd.kernel_class == "tensor_core_conv"]
    mem = fwd[fwd.kernel_class.isin(primer.MEMORY_CLASSES)]
    tc_ach = weighted_mean(tc.achieved_occupancy_pct, tc.duration_us)
    mem_ach = weighted_mean(mem.achieved_occupancy_pct, mem.duration_us)
    assert value(facts, "memory_minus_tc_conv_achieved_occupancy_pct_points") == pytest.approx(
        mem_ach - tc_ach
    )
    low = tc[tc.achieved_occupancy_pct < 60].duration_us.sum() / tc.duration_us.sum()
    assert value(facts, "tc_conv_time_share_below_60_achieved") == pytest.approx(100 * low)


def test_flagship_and_calculator_facts(h200, facts):
    launch = primer.flagship_launch(h200)
    assert (launch["threads_per_block"], launch["registers_per_thread"]) == (384, 168)
    assert value(facts, "flagship_binding_resource_limits") == 2
    note = facts.set_index("key").note["calculator_mismatch_share"]
    assert int(note.split()[1]) > 50  # "of 88 distinct launch shapes, ..."
    assert value(facts, "calculator_mismatch_share") == 0


def test_calculator_mismatches_flags_a_wrong_row():
    df = pd.DataFrame(
        {
            "block_size": [384, 256],
            "registers_per_thread": [168, 32],
            "shared_mem_per_block_bytes": [231424, 0],
            "theoretical_occupancy_pct": [18.75, 50.0],  # the second should read 100
        }
    )
    m = primer_checks.calculator_mismatches(df, "9.0")
    assert m.mismatch.tolist() == [False, True]
    assert m.calculator_pct.tolist() == [18.75, 100.0]


def test_kineto_estimate_is_a_table_not_a_rule(h200):
    s = primer_checks.kineto_summary(h200.load("trace_width_b8")).set_index("config")
    row = s.loc["yolov8_w1_fp16_nhwc_b8"]
    assert row.est_occupancy_tw_pct <= row.theoretical_occupancy_tw_pct  # capped by definition
    assert "primer_kineto_capped_calculator" not in {r.id for r in findings.RULES}


def test_every_rule_reads_a_fact_the_h200_root_has(facts):
    keys = set(zip(facts.key, facts.scope, strict=True))
    for r in findings.RULES:
        assert (r.fact, r.scope) in keys, r.id


def test_h200_verdicts(h200, facts):
    v = rules.evaluate(findings.RULES, facts, h200.name).set_index("id").verdict
    assert v["primer_flagship_two_limits"] == rules.HOLDS
    assert v["primer_calculator_matches_ncu"] == rules.HOLDS


def test_a_root_without_gpu_tables_leaves_rules_not_tested(tmp_path):
    root = subset_root(tmp_path, ["trace_width_b8"])
    f = primer.facts(root)
    assert f.empty
    v = rules.evaluate(findings.RULES, f, root.name).set_index("id").verdict
    assert (v == rules.NOT_TESTED).all()
