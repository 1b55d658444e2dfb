"""Speed goal 1's gap as two factors (yolo_sm.analyse.fast.pipeline_gap) and the finding that the
pipeline's engine alone keeps the goal out of reach."""

from __future__ import annotations

import pandas as pd
import pytest

from yolo_sm.analyse import fast
from yolo_sm.analyse.facts import facts_table
from yolo_sm.contract.datasets import open_root
from yolo_sm.report.findings import fast as findings
from yolo_sm.report.rules import FAILS, HOLDS, evaluate

CG = "cudagraph/fp16/nhwc"


def _bench(compile_img_per_s: float) -> pd.DataFrame:
    """One unit (width 1.0, batch 16): eager 100, CUDA graph 110 and compile img/s, the
    pipeline around the CUDA graph at 60 (one stream) and 90 frames/s (three), predict 10."""
    rows = [
        ("eager/fp16/nhwc", "model_only", 100.0, None),
        (CG, "model_only", 110.0, None),
        ("compile/fp16/nhwc", "model_only", compile_img_per_s, None),
        (f"pipeline/{CG}/s1", "pipeline", 60.0, 110.0),
        (f"pipeline/{CG}/s3", "pipeline", 90.0, 110.0),
        ("ultralytics_predict", "pipeline", 10.0, None),
        ("cudagraph/fp8/nhwc", "model_only", 999.0, None),  # failed its check: not counted
    ]
    return pd.DataFrame(
        [
            {
                "width": 1.0, "batch": 16, "variant": v, "scope": s,
                "status": "error" if "fp8" in v else "ok", "img_per_s": ips,
                "model_only_img_per_s": own, "candidates_per_frame": 150.0,
            }
            for v, s, ips, own in rows
        ]
    )  # fmt: skip


def test_the_gap_is_the_product_of_its_two_factors():
    g = fast.pipeline_gap(_bench(200.0)).iloc[0]
    assert g.pipeline == f"pipeline/{CG}/s3" and g.own_engine == CG
    assert g.fastest_engine == "compile/fp16/nhwc" and g.fastest_img_per_s == 200.0
    assert g.pipeline_over_own == pytest.approx(90 / 110)
    assert g.own_over_fastest == pytest.approx(110 / 200)
    assert g.pipeline_over_fastest == pytest.approx(g.pipeline_over_own * g.own_over_fastest)


@pytest.mark.parametrize("compile_ips, verdict", [(200.0, HOLDS), (120.0, FAILS), (50.0, FAILS)])
def test_the_engine_cap_finding_flips(compile_ips, verdict):
    facts = facts_table(fast.gap_facts(fast.pipeline_gap(_bench(compile_ips))))
    v = evaluate(findings.GAP_RULES, facts).set_index("id").verdict
    # 110 / 200 = 0.55 caps the goal; 110 / 120 = 0.92 and the CUDA graph itself fastest do not
    assert v["fast_pipeline_engine_caps_goal_1"] == verdict


def test_the_shipped_bench_has_a_gap_row_per_pipeline_unit():
    bench = open_root("h200").load("bench_fast_engines")
    gap = fast.pipeline_gap(bench)
    pipe = bench[(bench.status == "ok") & bench.variant.str.startswith("pipeline/")]
    assert len(gap) == len(pipe.groupby(["width", "batch"]))
    assert (gap.pipeline_over_own <= 1.0).all() and (gap.own_over_fastest <= 1.0).all()
