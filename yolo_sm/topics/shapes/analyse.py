"""Model shapes and input shapes: wide against deep at equal FLOPs, one engine per resolution
against one dynamic engine, and which engine serves a frame.

Tables: ``wide_vs_deep`` (sweep rows of FLOPs-matched pairs, with ``pair`` and ``role``) and
``resolutions`` (one row per width, frame and engine). Facts (keys ``shapes.*``) compare the two
models of a pair, or the two engine kinds, measured side by side in one process.

Engine selection (:func:`pick_engine`): a frame letterboxed into an engine of (H, W) is scaled by
``min(H / h, W / w)``. Among the engines that hold the frame without downscaling (scale >= 1),
the one with the fewest pixels wins (the least padding and upscaling); when none holds it, the
one that downscales least (largest scale), ties to the fewer pixels.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.contract.errors import UserError

WIDE_DEEP = "wide_vs_deep"
RESOLUTIONS = "resolutions"
STRIDE = 32
_FRAME = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")


# --- frames and engines ---------------------------------------------------------------------


def parse_frame(text) -> tuple[int, int]:
    """``"1280x720"`` (width x height, as video sizes are written) -> (720, 1280), (height,
    width); a (height, width) pair passes through. Positive integers, else one sentence."""
    if isinstance(text, (tuple, list)):
        hw = tuple(text)
        if len(hw) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in hw):
            if min(hw) > 0:
                return int(hw[0]), int(hw[1])
        raise UserError(f"a frame size is (height, width), two positive integers, got {text!r}")
    m = _FRAME.match(str(text))
    if not m or min(int(m.group(1)), int(m.group(2))) <= 0:
        raise UserError(f"a frame size is WIDTHxHEIGHT such as 1280x720, got {text!r}")
    return int(m.group(2)), int(m.group(1))


def engine_hw(frame_hw, stride: int = STRIDE) -> tuple[int, int]:
    """The (height, width) of the engine a frame runs at unscaled: each side rounded up to a
    multiple of ``stride`` (1280x720 -> 736 x 1280, 1920x1080 -> 1088 x 1920)."""
    h, w = parse_frame(frame_hw)
    return -(-h // stride) * stride, -(-w // stride) * stride


def letterbox_scale(frame_hw, engine) -> float:
    """The factor a frame is scaled by when letterboxed into ``engine`` (height, width)."""
    h, w = parse_frame(frame_hw)
    eh, ew = parse_frame(engine)
    return min(eh / h, ew / w)


def pick_engine(frame_hw, engines) -> int:
    """Index in ``engines`` ((height, width) each) of the engine that serves ``frame_hw``: the
    module docstring's rule (smallest engine holding the frame unscaled, else the one that
    downscales least)."""
    sizes = [parse_frame(e) for e in engines]
    if not sizes:
        raise UserError("pick_engine needs at least one engine size")
    scales = [letterbox_scale(frame_hw, e) for e in sizes]
    fits = [i for i, s in enumerate(scales) if s >= 1.0]
    if fits:
        return min(fits, key=lambda i: (math.prod(sizes[i]), i))
    return min(range(len(sizes)), key=lambda i: (-scales[i], math.prod(sizes[i]), i))


def selection_table(frames, engines) -> pd.DataFrame:
    """For each frame (``"WxH"`` or (height, width)): the engine :func:`pick_engine` chooses,
    its letterbox scale and the share of its pixels that hold the frame (``fill_pct``)."""
    sizes = [parse_frame(e) for e in engines]
    rows = []
    for f in frames:
        h, w = parse_frame(f)
        i = pick_engine((h, w), sizes)
        eh, ew = sizes[i]
        s = letterbox_scale((h, w), sizes[i])
        rows.append(
            {
                "frame": f"{w}x{h}",
                "frame_pixels": h * w,
                "engine": f"{ew}x{eh}",
                "scale": s,
                "fill_pct": 100.0 * (h * s) * (w * s) / (eh * ew),
            }
        )
    return pd.DataFrame(rows)


# --- wide against deep ----------------------------------------------------------------------


def pair_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (pair, backend, batch) with both models side by side: widths, depths,
    GFLOPs, img/s, kernels per forward, occupancy; ``wide_over_deep`` (img/s ratio),
    ``deep_over_wide_kernels`` and ``occupancy_diff_pct`` (wide minus deep, percentage points
    of Kineto's estimated achieved occupancy, time-weighted)."""
    ok = df[df["status"] == "ok"] if "status" in df else df
    cols = ["width", "depth", "flops_per_img", "img_per_s", "kernels_per_forward"]
    cols += [c for c in ("est_occupancy_tw_pct", "gpu_busy_fraction") if c in ok]
    idx = ["pair", "backend", "batch"]
    wide = ok[ok.role == "wide"].set_index(idx)[cols]
    deep = ok[ok.role == "deep"].set_index(idx)[cols]
    both = wide.merge(deep, left_index=True, right_index=True, suffixes=("_wide", "_deep"))
    both = both.reset_index()
    if both.empty:
        return both
    both["wide_over_deep"] = both.img_per_s_wide / both.img_per_s_deep
    both["deep_over_wide_kernels"] = both.kernels_per_forward_deep / both.kernels_per_forward_wide
    both["flops_diff_pct"] = 100 * (both.flops_per_img_deep / both.flops_per_img_wide - 1)
    if "est_occupancy_tw_pct_wide" in both:
        both["occupancy_diff_pct"] = both.est_occupancy_tw_pct_wide - both.est_occupancy_tw_pct_deep
    return both.sort_values(idx, ignore_index=True)


def wide_deep_facts(df: pd.DataFrame, ds=(WIDE_DEEP,)) -> list[dict]:
    t = pair_table(df)
    if t.empty:
        return []
    out = []
    for (back, b), g in t.groupby(["backend", "batch"]):
        scope = f"backend={back}, batch={b}"
        out.append(fact("shapes.wide_over_deep_min", g.wide_over_deep.min(), "x", scope=scope,
                        datasets=ds))  # fmt: skip
        out.append(fact("shapes.wide_over_deep_median", g.wide_over_deep.median(), "x",
                        scope=scope, datasets=ds))  # fmt: skip
        if "occupancy_diff_pct" in g:
            out.append(fact("shapes.occupancy_wide_minus_deep_pct", g.occupancy_diff_pct.median(),
                            "points", scope=scope, datasets=ds))  # fmt: skip
    eager = t[t.backend == "eager"]
    kern = (eager if len(eager) else t).deep_over_wide_kernels
    out.append(fact("shapes.deep_over_wide_kernels", kern.median(), "x", datasets=ds))
    return out


# --- one engine per resolution or one dynamic engine ----------------------------------------


def resolution_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (width, frame, dynamic engine): the fixed engine's and the dynamic one's
    img/s and megapixels/s at that frame's engine size, and ``dynamic_cost_pct`` = fixed img/s
    over dynamic img/s, minus 1, in percent (what serving that size from one dynamic engine
    costs; negative: the dynamic engine is faster)."""
    ok = df[df["status"] == "ok"] if "status" in df else df
    idx = ["width", "frame_size", "imgsz_h", "imgsz_w"]
    fixed = ok[ok.engine == "fixed"].set_index(idx)[["backend", "img_per_s", "mpix_per_s"]]
    dyn = ok[ok.engine == "dynamic"].set_index(idx)[["backend", "img_per_s", "mpix_per_s"]]
    t = dyn.merge(fixed, left_index=True, right_index=True, suffixes=("_dynamic", "_fixed"))
    t = t.reset_index()
    if t.empty:
        return t
    t["dynamic_cost_pct"] = 100 * (t.img_per_s_fixed / t.img_per_s_dynamic - 1)
    t["pixels"] = t.imgsz_h * t.imgsz_w
    return t.sort_values(["width", "pixels", "backend_dynamic"], ignore_index=True)


def resolution_facts(df: pd.DataFrame, ds=(RESOLUTIONS,)) -> list[dict]:
    out = []
    t = resolution_table(df)
    for back, g in t.groupby("backend_dynamic"):
        scope = f"dynamic={back}"
        out.append(fact("shapes.dynamic_cost_max_pct", g.dynamic_cost_pct.max(), "%",
                        scope=scope, datasets=ds))  # fmt: skip
        out.append(fact("shapes.dynamic_cost_median_pct", g.dynamic_cost_pct.median(), "%",
                        scope=scope, datasets=ds))  # fmt: skip
    ok = df[(df["status"] == "ok") & (df.engine == "fixed")] if len(df) else df
    if len(ok):
        ok = ok.assign(pixels=ok.imgsz_h * ok.imgsz_w)
        ratios, gains = [], []
        for _, g in ok.groupby("width"):
            g = g.sort_values("pixels")
            ratios.append(g.mpix_per_s.iloc[-1] / g.mpix_per_s.iloc[0])
            gains.append(_nearest_gain(g))
        out.append(fact("shapes.mpix_largest_over_smallest", pd.Series(ratios).median(), "x",
                        datasets=ds))  # fmt: skip
        gains = [x for x in gains if not math.isnan(x)]
        if gains:
            out.append(fact("shapes.nearest_over_largest_engine", min(gains), "x", datasets=ds))
    return out


def _nearest_gain(g: pd.DataFrame) -> float:
    """The least, over the frames a smaller engine serves, of that engine's img/s over the
    largest engine's: what :func:`pick_engine` buys against one engine of the largest size."""
    sizes = list(zip(g.imgsz_h, g.imgsz_w, strict=True))
    speed = dict(zip(sizes, g.img_per_s, strict=True))
    largest = max(sizes, key=math.prod)
    gains = []
    for f in g.frame_size:
        pick = sizes[pick_engine(parse_frame(f), sizes)]
        if pick != largest:
            gains.append(speed[pick] / speed[largest])
    return min(gains) if gains else math.nan


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    shapes.deep_over_wide_kernels shapes.dynamic_cost_max_pct shapes.mpix_largest_over_smallest
    shapes.nearest_over_largest_engine shapes.occupancy_wide_minus_deep_pct
    shapes.wide_over_deep_median shapes.wide_over_deep_min
    """.split()
)


def facts(root) -> pd.DataFrame:
    """The shapes facts of ``root`` (keys ``shapes.*``), from ``wide_vs_deep`` and
    ``resolutions`` where the root holds them."""
    rows = []
    if root.has(WIDE_DEEP):
        rows += wide_deep_facts(root.load(WIDE_DEEP))
    if root.has(RESOLUTIONS):
        rows += resolution_facts(root.load(RESOLUTIONS))
    return facts_table(r for r in rows if not math.isnan(r["value"]))
