"""Notebook 00: the calculator's launch from the data, waves, and the primer's facts, checked
numerically on the shipped H200 tables and on roots that lack datasets."""

import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest

from yolo_sm.analyse.facts import value
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.occupancy import theoretical_occupancy
from yolo_sm.analyse.weighting import weighted_mean
from yolo_sm.contract.datasets import open_root
from yolo_sm.report import rules
from yolo_sm.report.rules import topic_rules
from yolo_sm.topics.primer import analyse as primer
from yolo_sm.topics.primer import report as primer_report


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


def test_sm_count_and_compute_capability_from_provenance(h200, tmp_path):
    assert primer.sm_count(h200) == 132
    assert primer.compute_capability(h200) == "9.0"
    cpu = subset_root(tmp_path, ["sweep_fp16_nhwc"], provenance={"cpu_model": "a CPU"})
    assert primer.sm_count(cpu) is None and primer.compute_capability(cpu) is None


def test_flagship_launch_comes_from_the_ncu_table(h200):
    launch = primer.flagship_launch(h200)
    ncu = add_kernel_class(h200.load("ncu_width_b8"))
    tc = ncu[ncu.kernel_class == "tensor_core_conv"]
    by_shape = tc.groupby(primer.LAUNCH).duration_us.sum()
    top = by_shape.idxmax()
    assert (
        launch["threads_per_block"],
        launch["registers_per_thread"],
        launch["shared_mem_per_block"],
    ) == top
    assert launch["shared_mem_per_block"] > 200 * 1024  # dynamic shared memory, not 0
    assert launch["time_share"] == pytest.approx(by_shape.max() / by_shape.sum())
    res = theoretical_occupancy(*(launch[k] for k in list(launch)[:4]))
    # the calculator's block limits are Nsight Compute's for this launch
    flag = primer.flagship_kernels(ncu, launch)
    assert (flag.limit_registers == res.block_limit_registers).all()
    assert (flag.limit_shared_mem == res.block_limit_shared_mem).all()
    assert flag.theoretical_occupancy_pct.eq(res.occupancy_pct).all()
    assert set(res.binding_limits) == {"registers", "shared_mem"}


def test_flagship_launch_without_ncu_is_the_example(tmp_path):
    root = subset_root(tmp_path, ["sweep_fp16_nhwc"])
    launch = primer.flagship_launch(root)
    assert launch["source"] == "example" and math.isnan(launch["time_share"])
    assert theoretical_occupancy(*(launch[k] for k in list(launch)[:4])).occupancy_pct == 100.0


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
    assert value(facts, "flagship_resource_limits") == 2
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
    m = primer.calculator_mismatches(df, "9.0")
    assert m.mismatch.tolist() == [False, True]
    assert m.calculator_pct.tolist() == [18.75, 100.0]


def test_no_rule_is_true_by_definition():
    # Kineto's estimate is the calculator's value capped by the grid: a table in 04, no rule
    assert "primer_kineto_capped_calculator" not in {r.id for r in topic_rules("primer")}


def test_every_rule_reads_a_fact_the_h200_root_has(facts):
    keys = set(zip(facts.key, facts.scope, strict=True))
    for r in topic_rules("primer"):
        assert (r.fact, r.scope) in keys, r.id


def test_h200_verdicts(h200, facts):
    v = rules.evaluate(topic_rules("primer"), facts, h200.name).set_index("id").verdict
    assert v["primer_flagship_two_limits"] == rules.HOLDS
    assert v["primer_calculator_matches_ncu"] == rules.HOLDS


def test_a_root_without_gpu_tables_leaves_rules_not_tested(tmp_path):
    root = subset_root(tmp_path, ["trace_width_b8"])
    f = primer.facts(root)
    assert f.empty
    v = rules.evaluate(topic_rules("primer"), f, root.name).set_index("id").verdict
    assert (v == rules.NOT_TESTED).all()


def _kernel(block, regs, smem, limits, t, name="k", cls_name="sm90_xmma_fprop_f16_kernel"):
    w, b, r, s = limits
    return {
        "kernel_name": cls_name + name, "block_size": block, "registers_per_thread": regs,
        "shared_mem_per_block_bytes": smem, "limit_warps": w, "limit_blocks": b,
        "limit_registers": r, "limit_shared_mem": s, "duration_us": t,
        "theoretical_occupancy_pct": 10.0, "achieved_occupancy_pct": 9.0, "source": "x",
        "grid_size": 100, "config": "c",
    }  # fmt: skip


def test_limit_examples_pick_the_limit_that_alone_binds_and_the_most_time():
    k = pd.DataFrame(
        [
            _kernel(128, 255, 0, (16, 32, 2, 32), 10.0, "a"),
            _kernel(128, 200, 0, (16, 32, 3, 32), 50.0, "b"),  # more time: the register pick
            _kernel(128, 32, 90000, (16, 32, 12, 2), 5.0, "c"),
            _kernel(256, 16, 0, (8, 32, 30, 32), 7.0, "d"),
            _kernel(128, 64, 0, (16, 32, 16, 32), 100.0, "tie"),  # warps = registers: neither
        ]
    )
    k["kernel_class"] = "tensor_core_conv"
    ex = primer.limit_examples(k).set_index("limit")
    assert ex.loc["registers", "registers_per_thread"] == 200
    assert ex.loc["shared_mem", "shared_mem_per_block_bytes"] == 90000
    assert ex.loc["warps", "block_size"] == 256
    assert ex.loc["blocks", "how"] == "nearest"  # the block cap binds nowhere here
    assert (ex.loc[["registers", "shared_mem", "warps"], "how"] == "alone").all()
    # the nearest: the smallest block limit over the binding one (32 / 16 = 2 at "tie")
    assert ex.loc["blocks", "headroom"] == pytest.approx(2.0)


def test_allocation_steps_of_the_flagship_launch():
    launch = {"compute_capability": "9.0", "threads_per_block": 384,
              "registers_per_thread": 168, "shared_mem_per_block": 231424}  # fmt: skip
    s = primer.allocation_steps(launch).set_index("step").value
    assert s.filter(like="registers per warp").item() == 168 * 32  # 5,376: a multiple of 256
    assert s["registers per block"] == 168 * 32 * 12
    assert s.filter(like="allocated per block").item() == 231424 + 1024  # already 128-aligned
    assert s.filter(like="carve-out").item() == 228 * 1024
    assert s["active blocks per SM (the smallest limit)"] == 1
    assert s["theoretical occupancy"] == pytest.approx(100 * 12 / 64)


def test_utilisation_curve_and_tail():
    c = primer.utilisation_curve(132).set_index("grid_size")
    assert c.loc[132, "utilisation_pct"] == 100 and c.loc[133, "waves"] == 2
    assert c.loc[133, "utilisation_pct"] == pytest.approx(100 * 133 / 264)
    flag = pd.DataFrame(
        {"grid_size": [120, 120, 132], "duration_us": [5.0, 5.0, 3.0],
         "achieved_occupancy_pct": [17.0, 17.0, 18.0], "theoretical_occupancy_pct": [18.75] * 3,
         "waves_per_sm": [120 / 132, 120 / 132, 1.0]}
    )  # fmt: skip
    t = primer.tail_example(flag, 132)
    assert t["grid_size"] == 120 and t["idle_sms"] == 12
    assert t["sm_coverage_pct"] == pytest.approx(100 * 120 / 132)
    assert t["time_share"] == pytest.approx(10 / 13)


def test_simt_contrast_and_block_cap_what_if():
    ncu = pd.DataFrame(
        {
            "config": ["fp32", "fp32", "fp16"],
            "kernel_name": ["sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs",
                            "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs",
                            "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc"],
            "duration_us": [9000.0, 1000.0, 1000.0],
            "achieved_occupancy_pct": [11.0, 11.0, 15.0],
        }
    )  # fmt: skip
    c = primer.simt_contrast(ncu)
    s = primer.simt_vs_tensor(c)
    assert s["time_ratio"] == pytest.approx(10.0)
    assert s["simt_achieved_occupancy_pct"] == pytest.approx(11.0)
    ex = pd.Series({"block_size": 128, "registers_per_thread": 18, "shared_mem_per_block_bytes": 0})
    w = primer.block_cap_what_if(ex, "9.0").set_index("limit")
    assert w.loc["occupancy %", "as launched"] == 100
    # 32 threads: 64 warp slots allow 64 blocks, the 32 block slots cap it at half
    assert w.loc["blocks", "with 32 threads"] == 32 and w.loc["warps", "with 32 threads"] == 64
    assert w.loc["occupancy %", "with 32 threads"] == 50


def test_h200_lessons_and_their_rules(h200):
    launch = primer.flagship_launch(h200)
    sms = primer.sm_count(h200)
    k = primer.kernels_of(h200)
    flag = primer.flagship_kernels(k, launch)
    f = primer.facts(h200).set_index("key").value
    assert f["flagship_grid_at_most_sm_count_share"] == pytest.approx(
        100 * (flag.grid_size <= sms).mean()
    )
    t = primer.tail_example(flag, sms)
    # SM coverage as notebook 01 defines it: waves over whole waves, time-weighted
    sel = flag[flag.grid_size == t["grid_size"]]
    cov = sel.waves_per_sm / np.ceil(sel.waves_per_sm)
    assert t["sm_coverage_pct"] == pytest.approx(
        100 * (cov * sel.duration_us).sum() / sel.duration_us.sum()
    )
    c = primer.simt_contrast(h200.load("ncu_precision_w1"))
    simt = c[c.conv_class == "simt_conv"].conv_ms.max()
    tensor = c[c.conv_class == "tensor_core_conv"].conv_ms.min()
    assert f["simt_over_tensor_conv_time_ratio"] == pytest.approx(simt / tensor)
    v = rules.evaluate(topic_rules("primer"), primer.facts(h200), h200.name).set_index("id").verdict
    assert v["primer_simt_conv_slow"] == rules.HOLDS
    assert v["primer_flagship_one_wave"] == rules.HOLDS
    q = primer_report.questions(h200, launch, sms)
    assert len(q) == 5 and q.answer.str.len().gt(0).all()
    assert f"{t['idle_sms']} SMs idle" in q.answer.iloc[1]
    m = primer.hopper_mechanism(flag, "9.0", sms, h200.load("ncu_wide_stack")).set_index("quantity")
    assert m.loc["threads per block", "value"] == launch["threads_per_block"]
    assert m.loc["largest grid", "value"] <= sms


def test_a_root_without_kernels_has_no_lessons(tmp_path):
    (tmp_path / "manifest.json").write_text('{"datasets": {}}')
    root = open_root(tmp_path)
    assert primer.kernels_of(root) is None
    assert primer.facts(root).empty
    launch = primer.flagship_launch(root)
    assert len(primer_report.questions(root, launch, None)) == 1  # the calculator's


def test_kernels_of_several_tables_have_one_row_per_index(h200):
    k = primer.kernels_of(h200)
    assert k.index.is_unique and set(k.source) > {"ncu_width_b8"}
    assert len(primer.limit_examples(k)) == 4
