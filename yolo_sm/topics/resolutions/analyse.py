"""One engine per resolution or one dynamic engine, and which engine serves a frame. A frame
letterboxed into an (H, W) engine is scaled by ``min(H / h, W / w)``; :func:`pick_engine` takes
the fewest-pixel engine holding it unscaled, else the one that downscales least."""

from __future__ import annotations

import math
import re

import pandas as pd

from yolo_sm.analyse.facts import clock_spread_pct, fact, facts_table, sm_clock_mhz
from yolo_sm.contract.errors import UserError

DATASET = "resolutions"
STRIDE = 32
_FRAME = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")


def parse_frame(text) -> tuple[int, int]:
    """``"1280x720"`` (width x height) -> (720, 1280); an (h, w) pair passes through."""
    if isinstance(text, (tuple, list)):
        hw = tuple(text)
        if len(hw) == 2 and all(type(v) is int and v > 0 for v in hw):
            return hw
        raise UserError(f"a frame size is (height, width), two positive integers, got {text!r}")
    m = _FRAME.match(str(text))
    if not m or min(int(m.group(1)), int(m.group(2))) <= 0:
        raise UserError(f"a frame size is WIDTHxHEIGHT such as 1280x720, got {text!r}")
    return int(m.group(2)), int(m.group(1))


def engine_hw(frame_hw, stride: int = STRIDE) -> tuple[int, int]:
    """(height, width) a frame runs at unscaled: sides rounded up to ``stride``."""
    h, w = parse_frame(frame_hw)
    return -(-h // stride) * stride, -(-w // stride) * stride


def letterbox_scale(frame_hw, engine) -> float:
    """The factor a frame is scaled by when letterboxed into ``engine`` (height, width)."""
    (h, w), (eh, ew) = parse_frame(frame_hw), parse_frame(engine)
    return min(eh / h, ew / w)


def pick_engine(frame_hw, engines) -> int:
    """Index of the engine in ``engines`` ((h, w) each) that serves ``frame_hw``."""
    sizes = [parse_frame(e) for e in engines]
    if not sizes:
        raise UserError("pick_engine needs at least one engine size")
    scales = [letterbox_scale(frame_hw, e) for e in sizes]
    fits = [i for i, s in enumerate(scales) if s >= 1.0]
    if fits:
        return min(fits, key=lambda i: (math.prod(sizes[i]), i))
    return min(range(len(sizes)), key=lambda i: (-scales[i], math.prod(sizes[i]), i))


def selection_table(frames, engines) -> pd.DataFrame:
    """Per frame: the engine chosen, its letterbox scale and the % of it filled."""
    sizes = [parse_frame(e) for e in engines]
    rows = []
    for f in frames:
        h, w = parse_frame(f)
        eh, ew = sizes[pick_engine((h, w), sizes)]
        s = letterbox_scale((h, w), (eh, ew))
        rows.append({"frame": f"{w}x{h}", "frame_pixels": h * w, "engine": f"{ew}x{eh}",
                     "scale": s, "fill_pct": 100.0 * h * w * s * s / (eh * ew)})  # fmt: skip
    return pd.DataFrame(rows)


def resolution_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per (width, batch, frame, dynamic engine): fixed and dynamic img/s and
    megapixels/s, and ``dynamic_cost_pct`` (% of the fixed img/s lost; negative: faster)."""
    ok = df[df.status == "ok"].assign(clock_mhz=sm_clock_mhz)
    idx = ["width", "batch", "frame_size", "imgsz_h", "imgsz_w"]
    cols = ["backend", "img_per_s", "mpix_per_s", "clock_mhz"]
    fixed = ok[ok.engine == "fixed"].set_index(idx)[cols]
    dyn = ok[ok.engine == "dynamic"].set_index(idx)[cols]
    t = dyn.merge(fixed, left_index=True, right_index=True, suffixes=("_dynamic", "_fixed"))
    t = t.reset_index()
    t["dynamic_cost_pct"] = 100 * (1 - t.img_per_s_dynamic / t.img_per_s_fixed)
    t["pixels"] = t.imgsz_h * t.imgsz_w
    return t.sort_values(["width", "pixels", "backend_dynamic"], ignore_index=True)


def _nearest_gain(g: pd.DataFrame) -> float:
    """The least img/s gain of the nearest smaller engine over the largest one."""
    sizes = list(zip(g.imgsz_h, g.imgsz_w, strict=True))
    speed = dict(zip(sizes, g.img_per_s, strict=True))
    largest = max(sizes, key=math.prod)
    picks = [sizes[pick_engine(parse_frame(f), sizes)] for f in g.frame_size]
    return min((speed[p] / speed[largest] for p in picks if p != largest), default=math.nan)


def facts(root) -> pd.DataFrame:
    """Per batch: the dynamic engine's worst cost (%), largest over smallest input's
    megapixels/s (median over widths), nearest over largest engine (x)."""
    if not root.has(DATASET):
        return facts_table([])
    df, ds, rows = root.load(DATASET), (DATASET,), []
    t = resolution_table(df)
    for (back, b), g in t.groupby(["backend_dynamic", "batch"]):
        worst = g.loc[g.dynamic_cost_pct.idxmax()]
        spread = clock_spread_pct(worst.clock_mhz_fixed, worst.clock_mhz_dynamic)
        rows.append(fact("resolutions.dynamic_cost_max_pct", worst.dynamic_cost_pct, "%",
                         scope=f"dynamic={back}, batch={b}", datasets=ds,
                         clock_spread_pct=spread))  # fmt: skip
    fixed = df[(df.status == "ok") & (df.engine == "fixed")]
    fixed = fixed.assign(pixels=fixed.imgsz_h * fixed.imgsz_w).sort_values("pixels")
    for b, gb in fixed.groupby("batch"):
        per_w = gb.groupby("width")
        mpix = per_w.mpix_per_s.agg(lambda s: s.iloc[-1] / s.iloc[0]).median()
        gain = per_w[["imgsz_h", "imgsz_w", "img_per_s", "frame_size"]].apply(_nearest_gain).min()
        rows.append(fact("resolutions.mpix_largest_over_smallest", mpix, "x",
                         scope=f"batch={b}", datasets=ds))  # fmt: skip
        rows.append(fact("resolutions.nearest_over_largest_engine", gain, "x",
                         scope=f"batch={b}", datasets=ds))  # fmt: skip
    return facts_table(r for r in rows if not math.isnan(r["value"]))


#: the facts :func:`facts` computes
FACT_KEYS = frozenset(
    {"resolutions.dynamic_cost_max_pct", "resolutions.mpix_largest_over_smallest",
     "resolutions.nearest_over_largest_engine"}
)  # fmt: skip
