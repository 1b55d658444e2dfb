"""Derived views over per-kernel tables: time-weighted occupancy per group, ready for heatmaps."""

from __future__ import annotations


def weighted_mean(values, weights) -> float:
    """Mean of ``values`` weighted by ``weights`` (pandas Series): rows without a value are left
    out rather than diluting the mean; NaN when no weight remains."""
    ok = values.notna()
    w = weights[ok]
    return float((values[ok] * w).sum() / w.sum()) if w.sum() > 0 else float("nan")


def time_weighted(
    df,
    by,
    cols=("theoretical_occupancy_pct", "achieved_occupancy_pct"),
    time_col: str = "duration_us",
):
    """Per group of ``by``: kernel count, total time (us), and each of ``cols`` averaged with
    kernel time as the weight (a 1 us kernel at 100 % should not count like a 1 ms one)."""
    import pandas as pd

    by = [by] if isinstance(by, str) else list(by)

    def agg(g):
        w = g[time_col]
        row = {"kernels": len(g), "time_us": w.sum()}
        for c in cols:
            tw = weighted_mean(g[c], w)  # kernels without the value do not dilute the average
            row[f"{c.removesuffix('_pct')}_tw_pct" if c.endswith("_pct") else f"{c}_tw"] = tw
        return pd.Series(row)

    out = df.groupby(by, observed=True)[[time_col, *cols]].apply(agg).reset_index()
    out["kernels"] = out["kernels"].astype(int)
    return out


def same_run_ratio(
    df,
    *,
    column: str = "precision",
    baseline: str = "fp32",
    value: str = "median_ms",
    index=("width", "layout", "batch", "backend"),
):
    """For each row of ``index``, ``value`` of the baseline over each other ``column`` value,
    measured in the same sweep (a speed-up when ``value`` is a latency). Tidy output with
    ``ratio`` = baseline / other."""
    ok = df[df["status"] == "ok"] if "status" in df else df
    wide = ok.pivot_table(index=list(index), columns=column, values=value)
    if baseline not in wide:
        raise ValueError(f"no {column} == {baseline!r} rows to compare against")
    out = wide.drop(columns=[baseline]).rdiv(wide[baseline], axis=0)
    return out.reset_index().melt(id_vars=list(index), var_name=column, value_name="ratio")


def numerical_errors(
    model,
    precisions=("fp32", "fp16", "bf16"),
    *,
    layout="nhwc",
    batch=2,
    imgsz=128,
    device="cpu",
    seeds=(1, 2, 3),
):
    """Relative L2 error of each precision's raw head output against eager fp32, per seed
    (fresh random inputs each), measured here on ``device``."""
    import pandas as pd

    from yolo_sm.engines import EngineConfig, build_engine
    from yolo_sm.engines.base import reference_output, relative_l2

    rows = []
    for prec in precisions:
        cfg = EngineConfig(
            precision=prec, layout=layout, batch=batch, imgsz=imgsz, device=device, check=False
        )
        eng = build_engine(model, cfg)
        for seed in seeds:
            x = eng.make_input(seed)
            out = eng(x)
            rows.append(
                {
                    "precision": prec,
                    "seed": seed,
                    "device": device,
                    "rel_err": relative_l2(out, reference_output(model, cfg, x, seed)),
                    "tolerance": cfg.tolerance,
                }
            )
        eng.close()
    return pd.DataFrame(rows)


def sm_coverage(waves):
    """Fraction of the block slots a kernel fills over its waves, if every wave takes as long:
    ``waves / ceil(waves)``. 2.1 waves -> 0.70 (the third wave runs a tenth full); under one
    wave, the fraction of SM slots ever used. Works on scalars and pandas Series."""
    import numpy as np

    w = np.asarray(waves, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(w > 0, w / np.ceil(w), np.nan)
    return out if out.ndim else float(out)


def layer_view(kernels, by=("layer", "module_type", "stage"), time_col: str = "duration_us"):
    """Per group (default: per layer): kernels, time and its share of the total, time-weighted
    theoretical / achieved / Kineto-estimated occupancy and tensor-pipe use where present, mean
    waves, SM coverage (:func:`sm_coverage`, time-weighted), the limiter holding most of the
    time, and the tensor-core share of the time. ``time_share`` is the group's share of its
    config's time when ``by`` holds "config", else of the whole table. Tidy, ready for heatmaps."""
    import pandas as pd

    from yolo_sm.kernels import add_kernel_class

    df = kernels if "kernel_class" in kernels else add_kernel_class(kernels)
    waves = next((c for c in ("waves", "waves_per_sm") if c in df), None)  # Kineto / ncu name
    df = df.assign(
        _cov=sm_coverage(df[waves]) if waves else float("nan"),
        _tc=df["kernel_class"].str.startswith("tensor_core").astype(float),
    )
    cols = [
        c
        for c in (
            "theoretical_occupancy_pct",
            "achieved_occupancy_pct",
            "est_occupancy_pct",
            "tensor_pipe_pct",
            "waves",
            "waves_per_sm",
        )
        if c in df
    ]
    out = time_weighted(df, list(by), tuple(cols) + ("_cov", "_tc"), time_col)
    out = out.rename(columns={"_cov_tw": "sm_coverage_tw", "_tc_tw": "tensor_core_time_share"})
    # share of its config's time when grouped per config, else of the whole table
    within = [c for c in by if c == "config"]
    total = out.groupby(within).time_us.transform("sum") if within else out.time_us.sum()
    out["time_share"] = out.time_us / total
    if "limiter" in df:
        lim = (
            df.groupby([*by, "limiter"], observed=True)[time_col]
            .sum()
            .reset_index()
            .sort_values(time_col)
            .drop_duplicates(list(by), keep="last")
            .rename(columns={"limiter": "main_limiter"})
            .drop(columns=time_col)
        )
        out = out.merge(lim, on=list(by), how="left")
    return pd.DataFrame(out)


def box_agreement(
    model,
    precisions=("fp32", "fp8"),
    *,
    reference="fp16",
    imgsz=320,
    device="cpu",
    layout="nhwc",
    frames=None,
    iou_min=0.9,
):
    """Boxes after NMS of each precision's engine against the ``reference`` precision's, on the
    same frames (ultralytics' bundled photos by default) through the same pipeline: per frame,
    box counts and the share of boxes with a same-class partner at IoU >= ``iou_min`` in each
    direction. ``model`` should carry a class prior (``pipeline.set_class_prior``) so that NMS
    keeps a realistic number of boxes."""
    import numpy as np
    import pandas as pd

    from yolo_sm.engines import EngineConfig, build_engine
    from yolo_sm.pipeline import DetectionPipeline, match_boxes

    if frames is None:
        import cv2

        from yolo_sm.images import bundled_images

        frames = [cv2.imread(str(p)) for p in bundled_images()]
    boxes = {}
    for prec in (reference, *precisions):
        cfg = EngineConfig(
            precision=prec, layout=layout, batch=1, imgsz=imgsz, device=device, check=False
        )
        eng = build_engine(model, cfg)
        pipe = DetectionPipeline(model, eng)
        boxes[prec] = [pipe(np.ascontiguousarray(f)[None])[0] for f in frames]
        eng.close()
    rows = []
    for prec in precisions:
        for i, (a, r) in enumerate(zip(boxes[prec], boxes[reference], strict=True)):
            rows.append(
                {
                    "precision": prec,
                    "reference": reference,
                    "frame": i,
                    "boxes": len(a),
                    "reference_boxes": len(r),
                    "matched": match_boxes(a, r, iou_min),
                    "reference_matched": match_boxes(r, a, iou_min),
                }
            )
    return pd.DataFrame(rows)


def photo_errors(
    model, precisions=("fp16", "bf16", "fp8"), *, imgsz=320, layout="nhwc", class_prior=False
):
    """Relative L2 error of each precision's raw head output against eager fp32 on the CPU, on
    ultralytics' two photos (letterboxed, as they are and mirrored): the inputs the fp8 scales
    are calibrated on, so the error is the number format's, not a calibration mismatch.

    ``class_prior``: measure a copy of ``model`` whose class logits were given the fast-engines
    bench's prior (:data:`yolo_sm.bench.CLASS_PRIOR`, :func:`yolo_sm.pipeline.set_class_prior`),
    as the bench's numerical check sees it; as built, a random-weight model's class logits are
    almost all constant bias, which the formats represent well and which dilutes the error."""
    import copy

    import pandas as pd
    import torch

    from yolo_sm.engines import EngineConfig, build_engine
    from yolo_sm.engines.base import relative_l2
    from yolo_sm.models.common import calibration_batches

    if class_prior:
        from yolo_sm.bench import CLASS_PRIOR
        from yolo_sm.pipeline import set_class_prior

        model = copy.deepcopy(model)
        set_class_prior(model, *CLASS_PRIOR)
    x = calibration_batches(imgsz)[0]
    with torch.no_grad():
        ref = model.eval()(x)
    rows = []
    for prec in precisions:
        cfg = EngineConfig(
            precision=prec, layout=layout, batch=len(x), imgsz=imgsz, device="cpu", check=False
        )
        eng = build_engine(model, cfg)
        xin = x.to(eng.module.parameters().__next__().dtype)
        if layout == "nhwc":
            xin = xin.contiguous(memory_format=torch.channels_last)
        rows.append(
            {
                "precision": prec,
                "imgsz": imgsz,
                "class_prior": bool(class_prior),
                "rel_err": relative_l2(eng(xin), ref),
            }
        )
        eng.close()
    return pd.DataFrame(rows)


def photo_errors_by_width(widths=(0.5, 1.0), family="yolov8", **kw):
    """:func:`photo_errors` for several widths of a family, one table."""
    import pandas as pd

    from yolo_sm.models import build_yolo

    return pd.concat(
        [photo_errors(build_yolo(family, w), **kw).assign(width=w) for w in widths],
        ignore_index=True,
    )
