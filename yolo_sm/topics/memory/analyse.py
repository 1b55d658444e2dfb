"""Activation memory (notebook 07) from ``memory_lifetimes`` and ``memory_pool`` (bytes; steps: ATen
ops). Each tensor lives to its *last use* (``freed_after_step``: the ``planned`` live set) or to its
*release* (``held_until_step``: ``eager``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.contract.datasets import DataRoot

LIFETIMES = "memory_lifetimes"
POOL = "memory_pool"
PREFIX = "memory."
_MODEL = ["model", "width"]


def model_label(model: str, width: float) -> str:
    """``yolov8 w1`` for a YOLO model, the family name otherwise."""
    return str(model) if str(model).startswith("resnet") else f"{model} w{float(width):g}"


def level(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """The rows of one level (``model``, ``layer`` or ``tensor``) of a lifetimes table."""
    return df[df.level == name].reset_index(drop=True)


def _labels(df: pd.DataFrame) -> list[str]:
    return [model_label(m, w) for m, w in zip(df.model, df.width, strict=True)]


def live_curve(tensors: pd.DataFrame) -> pd.DataFrame:
    """Bytes live at every op step of one model's forward: ``planned_bytes``, ``eager_bytes`` and
    the step's ``layer``."""
    last = max(tensors.created_at_step.max(), tensors.held_until_step.max())
    n = int(last) + 1 if len(tensors) else 0
    out = pd.DataFrame({"step": range(n)})
    start = tensors.created_at_step.astype(int).to_numpy()
    size = tensors.out_bytes.astype(float).to_numpy()
    for col, end in (("planned_bytes", "freed_after_step"), ("eager_bytes", "held_until_step")):
        delta = np.zeros(n + 1)
        np.add.at(delta, start, size)
        np.add.at(delta, tensors[end].astype(int).to_numpy() + 1, -size)
        out[col] = np.cumsum(delta[:n])
    first = tensors.drop_duplicates("created_at_step").set_index("created_at_step")
    out["layer"] = out.step.map(first.layer).ffill().fillna("")
    return out


def reuse_arena(intervals) -> tuple[int, list[int]]:
    """Greedy-by-size arena over (first_step, last_step, nbytes) intervals (inclusive): (arena
    bytes, offsets)."""
    items = [(int(s), int(e), int(b)) for s, e, b in intervals]
    offsets, placed, arena = [0] * len(items), [], 0
    for i in sorted(range(len(items)), key=lambda i: (-items[i][2], items[i][0])):
        s, e, size = items[i]
        at = 0
        for lo, hi in sorted((offsets[j], offsets[j] + items[j][2]) for j in placed
                             if items[j][0] <= e and s <= items[j][1]):  # fmt: skip
            if at + size <= lo:
                break
            at = max(at, hi)
        offsets[i] = at
        placed.append(i)
        arena = max(arena, at + size)
    return arena, offsets


def peak_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per model: settings, bytes held before the forward, planned / eager / measured
    activation peaks (measured: NaN on a CPU), the reuse arena and the peak layer."""
    rows = []
    for (model, width), g in df.groupby(_MODEL, sort=False):
        m, t = level(g, "model").iloc[0], level(g, "tensor")
        curve = live_curve(t)
        planned, eager = curve.planned_bytes.max(), curve.eager_bytes.max()
        arena, _ = reuse_arena(zip(t.created_at_step, t.freed_after_step, t.out_bytes, strict=True))
        held = float(m.get("resident_bytes", math.nan))
        base = held if held > 0 else float(m.weight_bytes + m.input_bytes)
        measured = float(m.measured_peak_bytes) - base
        total = float(t.out_bytes.sum())
        rows.append({
            "model": model, "width": float(width), "label": model_label(model, width),
            **{k: g[k].iloc[0] for k in ("batch", "imgsz", "precision", "device")},
            "weight_bytes": float(m.weight_bytes), "input_bytes": float(m.input_bytes),
            "held_before_bytes": base, "planned_activation_peak_bytes": planned,
            "eager_activation_peak_bytes": eager, "measured_activation_peak_bytes": measured,
            "eager_vs_measured": eager / measured if measured > 0 else math.nan,
            "activation_sum_bytes": total, "reuse_arena_bytes": float(arena),
            "reuse_saving_pct": 100 * (1 - arena / total) if total else math.nan,
            "eager_excess_pct": 100 * (eager / planned - 1) if planned else math.nan,
            "peak_layer": curve.layer[curve.planned_bytes.idxmax()] if len(curve) else "",
        })  # fmt: skip
    return pd.DataFrame(rows)


def peak_view(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`peak_table` as notebook 07 shows it: one row per model (index: its label)."""
    return peak_table(df).set_index("label").drop(columns=["model", "width", "device"])


def longest_lifetimes(df: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    """Per model, the ``n`` layers whose outputs live longest (in op steps to their last
    consumer)."""
    lay = level(df, "layer")
    lay = lay.assign(label=_labels(lay))
    cols = ["label", "layer", "module_type", "out_bytes", "created_at_step", "freed_after_step",
            "lifetime_steps", "held_until_step"]  # fmt: skip
    top = lay.sort_values(["label", "lifetime_steps"], ascending=[True, False], kind="stable")
    return top.groupby("label", sort=False).head(n)[cols].reset_index(drop=True)


def held_past_last_use(df: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    """Per model, the ``n`` activations eager PyTorch kept longest past their last use (bytes x
    ops)."""
    t, lay = level(df, "tensor"), level(df, "layer")
    keys = zip(lay.model, lay.width, lay["index"].astype(int), strict=True)
    names = dict(zip(keys, lay.layer, strict=True))
    t = t.assign(label=_labels(t), held_ops=(t.held_until_step - t.freed_after_step).astype(int),
                 last_use_in=[names.get((m, w, int(i)), "") for m, w, i in
                              zip(t.model, t.width, t.last_use_layer, strict=True)])  # fmt: skip
    t = t[t.held_ops > 0].assign(cost=lambda d: d.held_ops * d.out_bytes)
    cols = ["label", "layer", "last_use_in", "module_type", "out_bytes", "freed_after_step",
            "held_until_step", "held_ops"]  # fmt: skip
    top = t.sort_values(["label", "cost"], ascending=[True, False], kind="stable")
    return top.groupby("label", sort=False).head(n)[cols].reset_index(drop=True)


def layer_curves(df: pd.DataFrame) -> pd.DataFrame:
    """Bytes live after each layer of every model: planned, eager and measured (NaN on a CPU)."""
    lay = level(df, "layer")
    return pd.DataFrame({
        "label": _labels(lay), "index": lay["index"].astype(int), "layer": lay.layer,
        "module_type": lay.module_type, "planned_bytes": lay.live_bytes_after.astype(float),
        "eager_bytes": lay.held_bytes_after.astype(float),
        "measured_bytes": lay.measured_allocated_bytes.astype(float),
    })  # fmt: skip


def op_curves(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`live_curve` of every model, with its label."""
    return pd.concat([live_curve(level(g, "tensor")).assign(label=model_label(*k))
                      for k, g in df.groupby(_MODEL, sort=False)], ignore_index=True)  # fmt: skip


def pool_summary(pool: pd.DataFrame) -> pd.DataFrame:
    """Per allocator configuration: peak reserved / allocated bytes, kept share, inactive-split
    share (%), retries, img/s (first forward per batch size left out)."""
    rows = []
    for conf, g in pool.sort_values("step").groupby("alloc_conf", sort=False):
        timed = g[~g.first_of_batch.astype(bool)]
        timed = timed if len(timed) else g
        peak = g.peak_allocated_bytes.max()
        kept = g.reserved_bytes.iloc[-1] / peak if peak > 0 else math.nan
        rows.append({
            "alloc_conf": conf, "forwards": len(g),
            "peak_reserved_bytes": g.peak_reserved_bytes.max(), "peak_allocated_bytes": peak,
            "reserved_over_peak_allocated": kept,
            "inactive_split_share_pct": (100 * g.inactive_split_bytes
                                         / g.reserved_bytes.where(g.reserved_bytes > 0)).mean(),
            "alloc_retries": g.alloc_retries.max(),
            "img_per_s": 1e3 * timed.batch.sum() / timed.latency_ms.sum(),
        })  # fmt: skip
    return pd.DataFrame(rows)


def dataset_of(root: DataRoot, kind: str) -> str | None:
    """``kind`` in ``root``, else its first dataset of that kind (``memory_lifetimes_cpu``)."""
    if root.has(kind):
        return kind
    return next((n for n in root.names() if root.info(n).get("kind") == kind), None)


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(PREFIX + k for k in ("activation_peak_error_pct_max",
                      "expandable_peak_reserved_ratio", "expandable_img_per_s_ratio"))  # fmt: skip


def facts(root: DataRoot) -> pd.DataFrame:
    """Largest eager-vs-measured activation peak error (%, fp16 batch 16 640x640) and expandable
    segments over the default allocator (peak reserved and img/s ratios)."""
    rows = []
    if name := dataset_of(root, LIFETIMES):
        p = peak_table(root.load(name)).query(
            "batch == 16 and precision == 'fp16' and imgsz == 640"
        )
        err = 100 * (p.eager_vs_measured - 1).abs()
        rows.append(fact(PREFIX + "activation_peak_error_pct_max", err.max(), "%",
                         datasets=(name,), points=int(err.notna().sum())))  # fmt: skip
    if root.has(POOL):
        pool = root.load(POOL)
        s = pool_summary(pool[np.isclose(pool.width, 1.0)]).set_index("alloc_conf")
        both = {"default", "expandable_segments:True"} <= set(s.index)
        if both and s.peak_reserved_bytes.notna().all():
            d, e = s.loc["default"], s.loc["expandable_segments:True"]
            for key, col in (("expandable_peak_reserved_ratio", "peak_reserved_bytes"),
                             ("expandable_img_per_s_ratio", "img_per_s")):  # fmt: skip
                rows.append(fact(PREFIX + key, e[col] / d[col], "x", datasets=(POOL,)))
    return facts_table(rows)
