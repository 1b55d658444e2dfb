"""The primer's lessons on real kernels, the recommendation table, the two-numbers tables and the
table formatter: numbers checked on small in-memory tables and on the shipped H200 root."""

import math

import numpy as np
import pandas as pd
import pytest

from yolo_sm.analyse.facts import facts_table
from yolo_sm.contract.datasets import open_root
from yolo_sm.report import rules, tables
from yolo_sm.topics.batch import agreement
from yolo_sm.topics.deploy import recommend as fast_recommend
from yolo_sm.topics.primer import analyse as primer
from yolo_sm.topics.primer import kernels as pk
from yolo_sm.topics.primer import questions as pq
from yolo_sm.topics.primer import rules as findings


@pytest.fixture(scope="module")
def h200():
    return open_root("h200")


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
    ex = pk.limit_examples(k).set_index("limit")
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
    s = pk.allocation_steps(launch).set_index("step").value
    assert s.filter(like="registers per warp").item() == 168 * 32  # 5,376: a multiple of 256
    assert s["registers per block"] == 168 * 32 * 12
    assert s.filter(like="allocated per block").item() == 231424 + 1024  # already 128-aligned
    assert s.filter(like="carve-out").item() == 228 * 1024
    assert s["active blocks per SM (the smallest limit)"] == 1
    assert s["theoretical occupancy"] == pytest.approx(100 * 12 / 64)


def test_utilisation_curve_and_tail():
    c = pk.utilisation_curve(132).set_index("grid_size")
    assert c.loc[132, "utilisation_pct"] == 100 and c.loc[133, "waves"] == 2
    assert c.loc[133, "utilisation_pct"] == pytest.approx(100 * 133 / 264)
    flag = pd.DataFrame(
        {"grid_size": [120, 120, 132], "duration_us": [5.0, 5.0, 3.0],
         "achieved_occupancy_pct": [17.0, 17.0, 18.0], "theoretical_occupancy_pct": [18.75] * 3}
    )  # fmt: skip
    t = pk.tail_example(flag, 132)
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
    c = pk.simt_contrast(ncu)
    s = pk.simt_vs_tensor(c)
    assert s["time_ratio"] == pytest.approx(10.0)
    assert s["simt_achieved_occupancy_pct"] == pytest.approx(11.0)
    ex = pd.Series({"block_size": 128, "registers_per_thread": 18, "shared_mem_per_block_bytes": 0})
    w = pk.block_cap_what_if(ex, "9.0").set_index("limit")
    assert w.loc["occupancy %", "as launched"] == 100
    # 32 threads: 64 warp slots allow 64 blocks, the 32 block slots cap it at half
    assert w.loc["blocks", "with 32 threads"] == 32 and w.loc["warps", "with 32 threads"] == 64
    assert w.loc["occupancy %", "with 32 threads"] == 50


def test_h200_lessons_and_their_rules(h200):
    launch = primer.flagship_launch(h200)
    sms = primer.sm_count(h200)
    k = pk.kernels_of(h200)
    flag = pk.flagship_kernels(k, launch)
    f = facts_table(pq.facts_rows(h200, launch, sms)).set_index("key").value
    assert f["flagship_grid_at_most_sm_count_share"] == pytest.approx(
        100 * (flag.grid_size <= sms).mean()
    )
    t = pk.tail_example(flag, sms)
    # SM coverage as notebook 01 defines it: waves over whole waves, time-weighted
    sel = flag[flag.grid_size == t["grid_size"]]
    cov = sel.waves_per_sm / np.ceil(sel.waves_per_sm)
    assert t["sm_coverage_pct"] == pytest.approx(
        100 * (cov * sel.duration_us).sum() / sel.duration_us.sum()
    )
    c = pk.simt_contrast(h200.load("ncu_precision_w1"))
    simt = c[c.conv_class == "simt_conv"].conv_ms.max()
    tensor = c[c.conv_class == "tensor_core_conv"].conv_ms.min()
    assert f["simt_over_tensor_conv_time_ratio"] == pytest.approx(simt / tensor)
    v = rules.evaluate(findings.RULES, primer.facts(h200), h200.name).set_index("id").verdict
    assert v["primer_simt_conv_slow"] == rules.HOLDS
    assert v["primer_flagship_one_wave"] == rules.HOLDS
    q = pq.questions(h200, launch, sms)
    assert len(q) == 5 and q.answer.str.len().gt(0).all()
    assert f"{t['idle_sms']} SMs idle" in q.answer.iloc[1]
    m = pk.hopper_mechanism(flag, "9.0", sms, h200.load("ncu_wide_stack")).set_index("quantity")
    assert m.loc["threads per block", "value"] == launch["threads_per_block"]
    assert m.loc["largest grid", "value"] <= sms


def test_a_root_without_kernels_has_no_lessons(tmp_path):
    (tmp_path / "manifest.json").write_text('{"datasets": {}}')
    root = open_root(tmp_path)
    assert pk.kernels_of(root) is None
    assert pq.facts_rows(root, primer.flagship_launch(root), None) == []
    assert len(pq.questions(root, primer.flagship_launch(root), None)) == 1  # the calculator's


def _bench_rows(rows):
    cols = ["width", "batch", "variant", "img_per_s", "median_ms", "build_s", "vs_baseline"]
    d = pd.DataFrame(rows, columns=cols)
    return d.assign(status="ok", scope="model_only", iqr_ms=0.1, peak_mem_bytes=1e9)


def test_recommendation_takes_the_faster_build_among_near_ties():
    b = _bench_rows(
        [
            (1.0, 64, "eager/fp16/nhwc", 1000.0, 64.0, 2.0, 1.0),
            (1.0, 64, "cudagraph/fp16/nhwc", 1010.0, 63.0, 1.0, 1.01),
            (1.0, 64, "compile/fp16/nhwc", 1500.0, 42.0, 20.0, 1.5),
            (1.0, 64, "compile:reduce-overhead/fp16/nhwc", 1480.0, 43.0, 5.0, 1.48),
            (1.0, 1, "eager/fp16/nhwc", 200.0, 5.0, 2.0, 1.0),
            (1.0, 1, "cudagraph/fp16/nhwc", 700.0, 1.4, 0.2, 3.5),
        ]
    )
    r = fast_recommend.recommend(b).set_index("batch")
    assert r.loc[64, "engine"] == "compile:reduce-overhead/fp16/nhwc"  # within 5 %, builds faster
    assert fast_recommend.recommend(b, near=0.0).set_index("batch").loc[64, "engine"] == (
        "compile/fp16/nhwc"
    )
    assert r.loc[1, "engine"] == "cudagraph/fp16/nhwc" and r.loc[1, "vs_cudagraph"] == 1.0
    assert r.loc[64, "vs_cudagraph"] == pytest.approx(1480 / 1010)
    assert "static shapes" in r.loc[1, "caveats"]
    by = fast_recommend.recommend_by_batch(fast_recommend.recommend(b))
    assert list(by.batch) == [1, 64] and (by.widths_picked == "1 of 1").all()


def test_workload_from_the_h200_bench(h200):
    bench = h200.load("bench_fast_engines")
    w = fast_recommend.workload(bench)
    assert w["max_candidates_per_frame"] == bench.candidates_per_frame.max()
    assert w["max_boxes_per_frame"] == bench.boxes_per_frame.max()
    assert fast_recommend.workload(bench.drop(columns="candidates_per_frame")) == {}


def test_graph_speedup_names_the_latency_that_moved():
    sweep = pd.DataFrame(
        {"status": "ok", "batch": 1, "precision": "fp16", "layout": "nhwc", "width": [1.0, 1.0],
         "backend": ["eager", "cudagraph"], "median_ms": [4.0, 1.0]}
    )  # fmt: skip
    bench = pd.DataFrame(
        {"status": "ok", "batch": 1, "width": [1.0, 1.0],
         "variant": ["eager/fp16/nhwc", "cudagraph/fp16/nhwc"], "median_ms": [6.0, 1.0]}
    )  # fmt: skip
    t = agreement.graph_speedup_sweep_vs_bench(sweep, bench).iloc[0]
    assert t.sweep_speedup == 4.0 and t.bench_speedup == 6.0
    assert t.eager_ratio == 1.5 and t.graph_ratio == 1.0 and t.moved == "eager"


def test_table_formatting():
    assert tables.number(5898240000) == "5,898,240,000"
    assert tables.number(18.75) == "18.75" and tables.number(1234.5) == "1,234"
    assert tables.number(math.nan) == ""
    assert tables.si(1.40198e11, "B") == "140 GB"
    assert tables.kib(231424) == "226 KiB"
    assert tables.header("median_ms") == "median (ms)" and tables.header("img_per_s") == "img/s"
    assert tables.header("peak_mem_bytes") == "peak memory"
    html = tables.show(pd.DataFrame({"time_share": [0.5], "peak_mem_bytes": [2e9]})).to_html()
    assert "50.0 %" in html and "2 GB" in html and "time share" in html
