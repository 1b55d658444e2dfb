"""Wide against deep at equal FLOPs, and engines per resolution: the FLOPs-matching search, the
non-square engine config, the engine selector, both collectors on the CPU at tiny sizes, and the
facts and rules of notebooks 14 and 15 moved across their thresholds."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.schema import REQUIRED, problems
from yolo_sm.topics.resolutions import analyse as shapes

# --- the FLOPs-matching search --------------------------------------------------------------


def _fake_flops(family, width, depth, imgsz):
    """Monotone in width and depth, in steps of 1/8 of a channel like the real builder."""
    ch = math.ceil(512 * width / 8) * 8
    return ch * ch * (1 + max(round(3 * depth), 1)) * imgsz * imgsz


def test_match_flops_finds_the_width_of_equal_flops():
    from yolo_sm.core.models.matching import match_flops

    target = _fake_flops("yolov8", 1.0, 0.33, 64)
    m = match_flops(target, depth=1.0, flops=_fake_flops)
    assert m.width < 1.0 and m.depth == 1.0
    assert abs(m.rel_diff) <= 0.05
    assert m.flops == _fake_flops("yolov8", m.width, 1.0, 64)
    # depth searched at a fixed width: a deeper model for a larger target
    d = match_flops(2 * target, width=1.0, flops=_fake_flops, tolerance=0.5)
    assert d.width == 1.0 and d.depth > 0.33
    with pytest.raises(UserError, match="within"):  # a target no model reaches
        match_flops(target * 1000, depth=1.0, bounds=(0.0625, 1.0), flops=_fake_flops)
    with pytest.raises(UserError, match="exactly"):
        match_flops(target, flops=_fake_flops)


def test_match_flops_on_real_yolo_counts():
    """Real FLOP counts of tiny YOLOv8 models: the match is within 5 % and recounts the same."""
    from yolo_sm.core.models.matching import match_flops, yolo_flops

    target = yolo_flops("yolov8", 0.125, 0.33, 32)
    m = match_flops(target, depth=1.0, imgsz=32, bounds=(0.0625, 0.125), steps=4)
    assert 0.0625 <= m.width < 0.125 and abs(m.rel_diff) <= 0.05
    assert yolo_flops("yolov8", m.width, 1.0, 32) == m.flops
    # the counted FLOPs scale with the pixel count: a match at 32 px holds at 64 px
    assert yolo_flops("yolov8", 0.125, 0.33, 64) == 4 * target


# --- non-square engines ---------------------------------------------------------------------


def test_engine_config_takes_a_non_square_size():
    from yolo_sm.core.engines import EngineConfig, make_input

    cfg = EngineConfig(backend="eager", precision="fp32", device="cpu", batch=2, imgsz_hw=(64, 96))
    assert cfg.input_hw == (64, 96) and cfg.imgsz == 96
    x = make_input(cfg)
    assert tuple(x.shape) == (2, 3, 64, 96) and x.is_contiguous(memory_format=_cl())
    assert EngineConfig(device="cpu", imgsz=320).input_hw == (320, 320)
    for bad in ((720, 1280), (0, 64), (64,), ("a", 64), (64.5, 64), (True, 64), 640):
        with pytest.raises(UserError, match="imgsz_hw"):
            EngineConfig(device="cpu", imgsz_hw=bad)
    with pytest.raises(UserError, match="square"):
        EngineConfig(backend="tensorrt", device="cpu", imgsz_hw=(736, 1280))


def _cl():
    import torch

    return torch.channels_last


def test_a_non_square_eager_engine_checks_against_fp32():
    from yolo_sm.core.engines import EngineConfig, build_engine
    from yolo_sm.core.models import build_yolo

    model = build_yolo("yolov8", 0.0625)
    cfg = EngineConfig(
        backend="eager", precision="fp32", layout="nchw", device="cpu", batch=2, imgsz_hw=(64, 96)
    )
    eng = build_engine(model, cfg)
    out = eng(eng.make_input())
    # anchors of the three levels: (64/8 * 96/8) + (64/16 * 96/16) + (64/32 * 96/32)
    assert out.shape[-1] == 8 * 12 + 4 * 6 + 2 * 3
    assert eng.rel_err is not None and eng.rel_err < 1e-4


# --- the engine selector --------------------------------------------------------------------


def test_frames_and_engine_sizes():
    assert shapes.parse_frame("1280x720") == (720, 1280)
    assert shapes.parse_frame((720, 1280)) == (720, 1280)
    assert shapes.engine_hw("1280x720") == (736, 1280)
    assert shapes.engine_hw("1920x1080") == (1088, 1920)
    assert shapes.engine_hw("640x640") == (640, 640)
    for bad in ("1280", "0x720", "axb", (720,), (720.0, 1280)):
        with pytest.raises(UserError):
            shapes.parse_frame(bad)


ENGINES = [(640, 640), (736, 1280), (1088, 1920)]


@pytest.mark.parametrize(
    "frame, want",
    [
        ("640x480", 0),  # fits the 640x640 engine unscaled
        ("640x640", 0),
        ("1280x720", 1),  # too wide for 640: the 1280x736 engine
        ("1280x1024", 2),  # too tall for 1280x736: the largest engine holds it unscaled
        ("1920x1080", 2),
        ("3840x2160", 2),  # no engine holds it: the one that downscales least
        ("320x240", 0),  # every engine holds it: the smallest
    ],
)
def test_pick_engine(frame, want):
    assert shapes.pick_engine(frame, ENGINES) == want


def test_pick_engine_without_a_fit_prefers_less_downscaling_then_fewer_pixels():
    # 4000x1000: scale 0.32 into 1280x736, 0.48 into 1920x1088 -> the larger one
    assert shapes.pick_engine("4000x1000", ENGINES) == 2
    # equal scales: the smaller engine
    assert shapes.pick_engine("2000x2000", [(1000, 1000), (1000, 2000)]) == 0
    with pytest.raises(UserError):
        shapes.pick_engine("640x480", [])
    t = shapes.selection_table(["1280x720", "1920x1080"], ENGINES)
    assert list(t.engine) == ["1280x736", "1920x1088"]
    assert (t.scale == 1.0).all() and t.fill_pct.between(97, 100).all()


# --- the collectors on the CPU --------------------------------------------------------------


def test_resolutions_on_the_cpu_give_well_formed_rows():
    from yolo_sm.topics.resolutions.collect import ResolutionSpec, run_resolutions

    spec = ResolutionSpec(
        widths=(0.0625,), frames=("64x64", "96x40"), fixed_backend="eager", batch=1,
        device="cpu", precision="fp32", layout="nchw", warmup_ms=1, budget_ms=5,
    )  # fmt: skip
    df = run_resolutions(spec, None, progress=False)
    assert problems(df, "resolutions") == []
    assert len(df) == 4 and (df.status == "ok").all()
    assert set(zip(df.imgsz_h, df.imgsz_w, strict=True)) == {(64, 64), (64, 96)}
    assert set(df.engine) == {"fixed", "dynamic"}
    px = df.img_per_s * df.imgsz_h * df.imgsz_w / 1e6
    assert (df.mpix_per_s - px).abs().max() < 1e-9 and (df.rel_err < 1e-4).all()


def test_resolution_spec_refuses_bad_input():
    from yolo_sm.topics.resolutions.collect import ResolutionSpec

    with pytest.raises(UserError, match="WIDTHxHEIGHT"):
        ResolutionSpec.from_mapping({"frames": ["1280-720"], "device": "cpu"})
    with pytest.raises(UserError, match="dynamic"):
        ResolutionSpec.from_mapping({"dynamic": ["trt"], "device": "cpu"})
    ok = ResolutionSpec.from_mapping({"frames": "1280X720", "device": "cpu"})
    assert ok.frames == ("1280x720",)


def test_wide_vs_deep_on_the_cpu_gives_well_formed_rows(tmp_path):
    from yolo_sm.topics.wide_deep.collect import WideDeepSpec, run_wide_vs_deep

    spec = WideDeepSpec(
        pairs=(((0.125, 0.33), (0.0625, 1.0)),), backends=("eager",), batches=(1,), imgsz=64,
        device="cpu", precision="fp32", layout="nchw", warmup_ms=1, budget_ms=5, tolerance=0.9,
    )  # fmt: skip
    df = run_wide_vs_deep(spec, tmp_path / "w.parquet", progress=False)
    assert problems(df, "wide_vs_deep") == []
    assert list(df.role) == ["wide", "deep"] and (df.status == "ok").all()
    assert df.loc[df.role == "deep", "depth"].item() == 1.0
    assert (df.kineto_kernels_per_forward == 0).all()  # a CPU has no GPU kernels
    assert pd.read_parquet(tmp_path / "w.parquet").shape == df.shape
    # a pair further apart than the tolerance is refused before anything is timed
    with pytest.raises(UserError, match="tolerance"):
        run_wide_vs_deep(
            WideDeepSpec(pairs=(((0.125, 0.33), (0.0625, 1.0)),), device="cpu", tolerance=0.05,
                         backends=("eager",), batches=(1,), imgsz=64),
            tmp_path / "x.parquet",
        )  # fmt: skip
    with pytest.raises(UserError, match="wider and"):
        run_wide_vs_deep(
            WideDeepSpec(pairs=(((0.0625, 1.0), (0.125, 0.33)),), device="cpu",
                         backends=("eager",), batches=(1,), imgsz=64),
            tmp_path / "y.parquet",
        )  # fmt: skip


def test_the_plan_steps_load_and_refuse_bad_params(tmp_path):
    from yolo_sm.contract.plans import check_params, load_plan
    from yolo_sm.topics.resolutions.collect import ResolutionSpec
    from yolo_sm.topics.wide_deep.collect import WideDeepSpec

    plan = load_plan("data/plans/full.yaml")
    steps = {s.name: s for s in plan.steps}
    wd = WideDeepSpec.from_mapping({"device": "cuda", **steps["wide_vs_deep"].params})
    assert len(wd.units()) == 3 * 2 * 2 * 3
    assert all(w > d for (w, _), (d, _) in wd.pairs)
    res = ResolutionSpec.from_mapping({"device": "cuda", **steps["resolutions"].params})
    assert res.frames == ("640x640", "1280x720", "1920x1080")
    with pytest.raises(UserError, match="wide_width"):
        check_params("wide_vs_deep", {"pairs": [[0.5, 0.33, 0.4]]}, "step")
    with pytest.raises(UserError, match="WIDTHxHEIGHT"):
        check_params("resolutions", {"frames": ["1280:720"]}, "step")


# --- facts and rules ------------------------------------------------------------------------


def _sweep_row(**kw) -> dict:
    row = {c: 0.0 for c in REQUIRED["wide_vs_deep"]}
    row.update(
        family="yolov8", scale="", max_channels=2048, precision="fp16", layout="nhwc",
        imgsz=640, compile_mode="default", device="cuda", status="ok", message="",
        noisy=False, bn_calibrated=True, samples_ms=[1.0], rel_err=1e-3,
    )  # fmt: skip
    row.update(kw)
    return row


def wide_deep_table(speed=1.3, b1=1.5, kernels=1.6, occ=(60.0, 50.0), flops_diff=0.01):
    """Synthetic pairs: the wide model runs ``speed`` x the deep one's img/s at batch 64
    (``b1`` at batch 1), the deep one launches ``kernels`` x the kernels."""
    rows = []
    for pair, (w, dw) in enumerate(((0.5, 0.37), (1.0, 0.73))):
        for back in ("eager", "cudagraph"):
            for b in (1, 64):
                base = 1000.0 * b / (1 + pair)
                ratio = speed if b == 64 else b1
                for role, width, depth, img, k, o, f in (
                    ("wide", w, 0.33, base * ratio, 200, occ[0], 1e9),
                    ("deep", dw, 1.0, base, 200 * kernels, occ[1], 1e9 * (1 + flops_diff)),
                ):
                    rows.append(
                        _sweep_row(
                            pair=pair, role=role, width=width, depth=depth, backend=back,
                            batch=b, img_per_s=img, median_ms=1e3 * b / img,
                            kernels_per_forward=k, est_occupancy_tw_pct=o, flops_per_img=f,
                        )
                    )  # fmt: skip
    return pd.DataFrame(rows)


def resolution_table(dynamic_slower=0.05, gain=1.5):
    """Synthetic rows: the fixed engines' img/s falls as pixels ** (-1 / ``gain``) (gain above
    1: megapixels/s grow with the input), the dynamic engine ``dynamic_slower`` behind."""
    rows = []
    sizes = (("640x640", 640, 640), ("1280x720", 736, 1280), ("1920x1080", 1088, 1920))
    for w in (0.5, 1.0):
        for frame, h, wd in sizes:
            fixed = 8000.0 / (h * wd / 640**2) ** (1 / gain) / (1 + w)
            for eng, back, img in (
                ("fixed", "cudagraph", fixed),
                ("dynamic", "eager", fixed / (1 + dynamic_slower)),
            ):
                rows.append(
                    {"family": "yolov8", "width": w, "depth": 0.33, "batch": 8,
                     "frame_size": frame, "imgsz_h": h, "imgsz_w": wd, "engine": eng,
                     "backend": back, "status": "ok", "message": "", "img_per_s": img,
                     "mpix_per_s": img * h * wd / 1e6}
                )  # fmt: skip
    return pd.DataFrame(rows)


def _verdicts(topic, **tables):
    from tests.test_audit_topics import Root
    from yolo_sm.report.rules import evaluate, topic_rules

    root = Root(**tables)
    return (
        evaluate(topic_rules(topic.TOPIC.name), topic.analyse.facts(root)).set_index("id").verdict
    )


def test_wide_deep_facts_flip_their_rules():
    import yolo_sm.topics.wide_deep.analyse  # noqa: F401
    from yolo_sm.topics import wide_deep

    assert problems(wide_deep_table(), "wide_vs_deep") == []
    good = _verdicts(wide_deep, wide_vs_deep=wide_deep_table())
    assert (good == "holds").all(), good
    bad = wide_deep_table(speed=0.9, b1=0.95, kernels=1.1, occ=(40.0, 50.0), flops_diff=0.08)
    bad = _verdicts(wide_deep, wide_vs_deep=bad)
    assert (bad == "does not hold").all(), bad
    partly = _verdicts(wide_deep, wide_vs_deep=wide_deep_table(1.05))
    assert partly["wide_deep_wide_faster_b64"] == "partly"
    t = wide_deep.analyse.pair_table(wide_deep_table())
    assert len(t) == 8 and t.wide_over_deep.round(6).isin([1.3, 1.5]).all()
    assert (t.occupancy_diff_pct == 10).all()


def test_resolution_facts_flip_their_rules():
    import yolo_sm.topics.resolutions.analyse  # noqa: F401
    from yolo_sm.topics import resolutions

    df = resolution_table()
    assert problems(df, "resolutions") == []
    good = _verdicts(resolutions, resolutions=df)
    assert (good == "holds").all(), good
    bad = _verdicts(resolutions, resolutions=resolution_table(dynamic_slower=0.4, gain=0.9))
    assert bad["resolutions_dynamic_cost_small"] == "does not hold"
    assert bad["resolutions_large_inputs_fill_gpu"] == "does not hold"
    # img/s nearly flat in the pixel count: the nearest engine gains little over the largest
    flat = _verdicts(resolutions, resolutions=resolution_table(gain=5.0))
    assert flat["resolutions_nearest_engine_pays"] == "does not hold"
    # the dynamic engine at 1 / 1.25 of the fixed one's img/s loses 20 % of it
    t = shapes.resolution_table(resolution_table(dynamic_slower=0.25))
    assert len(t) == 6 and (t.dynamic_cost_pct.round(6) == 20).all()
    mid = _verdicts(resolutions, resolutions=resolution_table(dynamic_slower=0.25))
    assert mid["resolutions_dynamic_cost_small"] == "partly"


def test_failed_rows_are_left_out_of_the_comparisons():
    from yolo_sm.topics.wide_deep import analyse as wide_deep

    df = wide_deep_table()
    df.loc[(df.role == "deep") & (df.batch == 64), "status"] = "oom"
    t = wide_deep.pair_table(df)
    assert set(t.batch) == {1}
    r = resolution_table()
    r.loc[r.engine == "dynamic", "status"] = "error"
    assert shapes.resolution_table(r).empty


def test_figures_keep_the_vocabulary():
    pytest.importorskip("plotly")
    from tests.figure_checks import problems as style_problems
    from yolo_sm.topics.resolutions import report as resolution_plots
    from yolo_sm.topics.wide_deep import analyse as wide_deep
    from yolo_sm.topics.wide_deep import report as wide_deep_plots

    t = wide_deep.pair_table(wide_deep_table())
    figs = [
        wide_deep_plots.plot_pair_ratios(t, "wide_over_deep", "img/s ratio"),
        resolution_plots.plot_resolutions(resolution_table()),
        resolution_plots.plot_selection(),
    ]
    for fig in figs:
        assert style_problems(fig) == [] and len(fig.data) >= 2


@pytest.mark.notebooks
def test_notebooks_14_and_15_on_synthetic_tables(tmp_path, make_root):
    pytest.importorskip("nbformat")
    from tests.test_notebooks import NOTEBOOKS, _executes_and_renders
    from yolo_sm.contract.manifest import register

    root = make_root("h200", ["sweep_presets"])
    for name, df in (("wide_vs_deep", wide_deep_table()), ("resolutions", resolution_table())):
        df.to_parquet(root / f"{name}.parquet")
        register(root, name, f"{name}.parquet", name, "synthetic", "none")
    for nb in ("14_wide_or_deep.ipynb", "15_resolutions.ipynb"):
        _, html = _executes_and_renders(NOTEBOOKS[0].parent / nb, root)
        assert "does not hold" not in html and "holds" in html


def test_resolutions_table_records_the_command_as_a_user_types_it(tmp_path, monkeypatch):
    """No absolute path of the measuring machine in the table's metadata."""
    import json
    import sys

    import pyarrow.parquet as pq

    from yolo_sm.topics.resolutions.collect import ResolutionSpec, run_resolutions

    spec = ResolutionSpec(
        widths=(0.0625,), frames=("64x64",), fixed_backend="eager", batch=1, device="cpu",
        precision="fp32", layout="nchw", warmup_ms=1, budget_ms=5,
    )  # fmt: skip
    out = tmp_path / "resolutions.parquet"
    argv = ["/opt/somewhere/yolo_sm/__main__.py", "collect", "--out", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", argv)
    run_resolutions(spec, out, progress=False)
    meta = json.loads(pq.read_schema(out).metadata[b"yolo_sm"])
    assert meta["argv"][0] == "yolo-sm" and not any(a.startswith("/") for a in meta["argv"])
