"""Activation memory: the live set over a forward, the peak it predicts against the measured
one, what an allocator that reuses memory by lifetime would need, and the caching allocator's
pool over a run of changing batch sizes.

Input tables: ``memory_lifetimes`` (collect.memory.lifetimes: one model row, one row per layer
and one per activation tensor of each model) and ``memory_pool`` (collect.memory.pool: one row
per allocator configuration and forward).

Two lifetimes per tensor: *last use* (``freed_after_step``: freed right after the last op that
reads it, as a planner would) and *release* (``held_until_step``: when eager PyTorch really
freed it). Their live sets give two predicted peaks: ``planned`` (last use) and ``eager``
(release); each adds the weights and the input, resident before the forward, and is compared
with ``torch.cuda.max_memory_allocated`` of the same forward.
"""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.contract.datasets import DataRoot

LIFETIMES = "memory_lifetimes"
POOL = "memory_pool"
PREFIX = "memory."
DEFAULT_CONF = "default"
EXPANDABLE_CONF = "expandable_segments:True"
_MODEL_KEYS = ["model", "width"]


def model_label(model: str, width: float) -> str:
    """``yolov8 w1`` for a YOLO model, the family name otherwise."""
    return str(model) if str(model).startswith("resnet") else f"{model} w{float(width):g}"


def _scope(model: str, width: float) -> str:
    return f"model={model},width={float(width):g}"


def level(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """The rows of one level (``model``, ``layer`` or ``tensor``) of a lifetimes table."""
    return df[df.level == name].reset_index(drop=True)


def live_curve(tensors: pd.DataFrame) -> pd.DataFrame:
    """Bytes live at every op step of one model's forward (tensor rows of one model): columns
    step, planned_bytes (tensors between creation and last use, both inclusive), eager_bytes
    (between creation and release), transient_bytes (what the op allocated and freed inside
    itself, measured on a GPU; 0 where unknown), layer (the layer that created the step's
    latest tensor)."""
    if tensors.empty:
        cols = ["step", "planned_bytes", "eager_bytes", "transient_bytes", "layer"]
        return pd.DataFrame(columns=cols)
    n = int(max(tensors.created_at_step.max(), tensors.held_until_step.max())) + 1
    out = pd.DataFrame({"step": range(n)})
    for col, end in (("planned_bytes", "freed_after_step"), ("eager_bytes", "held_until_step")):
        delta = [0.0] * (n + 1)
        for s, e, b in zip(tensors.created_at_step, tensors[end], tensors.out_bytes, strict=True):
            delta[int(s)] += float(b)
            delta[int(e) + 1] -= float(b)
        acc, vals = 0.0, []
        for d in delta[:n]:
            acc += d
            vals.append(acc)
        out[col] = vals
    first = tensors.drop_duplicates("created_at_step").set_index("created_at_step")
    transient = first.transient_bytes if "transient_bytes" in first else pd.Series(dtype=float)
    out["transient_bytes"] = out.step.map(transient).astype(float).fillna(0.0)
    out["layer"] = out.step.map(first.layer).ffill().fillna("")
    return out


def reuse_arena(intervals) -> tuple[int, list[int]]:
    """Bytes an arena needs when each tensor gets an offset that no tensor alive at the same
    time overlaps: greedy by size (largest first, each at the lowest offset that fits beside
    the placed tensors whose lifetimes intersect its own). ``intervals``: (first_step,
    last_step, nbytes) with both steps inclusive. Returns (arena bytes, offset per interval).
    Never below the peak live bytes (the bound no assignment beats), usually close to it."""
    items = [(int(s), int(e), int(b)) for s, e, b in intervals]
    order = sorted(range(len(items)), key=lambda i: (-items[i][2], items[i][0]))
    offsets = [0] * len(items)
    placed: list[int] = []
    arena = 0
    for i in order:
        s, e, size = items[i]
        busy = sorted(
            (offsets[j], offsets[j] + items[j][2])
            for j in placed
            if items[j][0] <= e and s <= items[j][1]
        )
        at = 0
        for lo, hi in busy:
            if at + size <= lo:
                break
            at = max(at, hi)
        offsets[i] = at
        placed.append(i)
        arena = max(arena, at + size)
    return arena, offsets


def peak_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per model of a lifetimes table: weight, input and activation bytes, what the
    process held before the forward (``held_before_bytes``: measured where recorded, else
    weights + input), the planned and eager predicted peaks (activations live at the worst op
    step + that), the
    eager peak with each op's measured transient bytes added (``eager_transient_peak_bytes``:
    where the lifetimes alone miss cuDNN workspaces; equal to the eager peak without a GPU), the
    measured peak (NaN without a GPU), their ratios, the lifetime-reuse arena and its saving
    over giving every activation its own memory, and at the planned peak: the step, its layer,
    and the shares of the live bytes that wait for a later op (``waiting_share_at_peak_pct``)
    and that wait for a ``Concat`` layer (``concat_share_at_peak_pct``)."""
    rows = []
    for (model, width), g in df.groupby(_MODEL_KEYS, sort=False):
        m = level(g, "model").iloc[0]
        layers = level(g, "layer")
        t = level(g, "tensor")
        curve = live_curve(t)
        i = int(curve.planned_bytes.idxmax()) if len(curve) else 0
        peak_step = int(curve.step.iloc[i]) if len(curve) else 0
        planned = float(curve.planned_bytes.max()) if len(curve) else 0.0
        eager = float(curve.eager_bytes.max()) if len(curve) else 0.0
        with_transient = (
            float((curve.eager_bytes + curve.transient_bytes).max()) if len(curve) else 0.0
        )
        live = t[(t.created_at_step <= peak_step) & (t.freed_after_step >= peak_step)]
        waiting = live[(live.created_at_step < peak_step) & (live.freed_after_step > peak_step)]
        concat_layers = set(layers[layers.module_type == "Concat"].layer_index.astype(int))
        to_concat = waiting[waiting.last_use_layer.astype(int).isin(concat_layers)]
        arena, _ = reuse_arena(zip(t.created_at_step, t.freed_after_step, t.out_bytes, strict=True))
        resident = float(m.weight_bytes) + float(m.input_bytes)
        total = float(t.out_bytes.sum())
        measured = float(m.measured_peak_bytes)
        # the measured peak counts everything the process held before the forward (weights,
        # input, and any other tensors alive in it): the predictions are compared on that base
        held = float(m.resident_bytes) if "resident_bytes" in m else math.nan
        base = held if math.isfinite(held) and held > 0 else resident
        rows.append(
            {
                "model": model,
                "width": float(width),
                "label": model_label(model, width),
                "batch": int(g.batch.iloc[0]),
                "imgsz": int(g.imgsz.iloc[0]),
                "precision": str(g.precision.iloc[0]),
                "device": str(g.device.iloc[0]),
                "weight_bytes": float(m.weight_bytes),
                "input_bytes": float(m.input_bytes),
                "activation_sum_bytes": total,
                "planned_activation_peak_bytes": planned,
                "eager_activation_peak_bytes": eager,
                "held_before_bytes": base,
                "planned_peak_bytes": planned + base,
                "eager_peak_bytes": eager + base,
                "measured_peak_bytes": measured,
                "eager_transient_peak_bytes": with_transient + base,
                "measured_activation_peak_bytes": measured - float(m.resident_bytes),
                "eager_vs_measured": (eager + base) / measured if measured > 0 else math.nan,
                "planned_vs_measured": (planned + base) / measured if measured > 0 else math.nan,
                "eager_transient_vs_measured": (with_transient + base) / measured
                if measured > 0
                else math.nan,
                "reuse_arena_bytes": float(arena),
                "reuse_saving_pct": 100.0 * (1.0 - arena / total) if total else math.nan,
                "arena_vs_planned_peak": arena / planned if planned else math.nan,
                "eager_excess_pct": 100.0 * (eager / planned - 1.0) if planned else math.nan,
                "peak_step": peak_step,
                "peak_layer": str(curve.layer.iloc[i]) if len(curve) else "",
                "waiting_share_at_peak_pct": _share(waiting, live),
                "concat_share_at_peak_pct": _share(to_concat, live)
                if concat_layers
                else math.nan,  # a model without Concat layers (ResNet)
            }
        )
    return pd.DataFrame(rows)


#: The columns of :func:`peak_view`, in order.
PEAK_VIEW = (
    "weight_bytes",
    "input_bytes",
    "held_before_bytes",
    "planned_peak_bytes",
    "eager_peak_bytes",
    "eager_transient_peak_bytes",
    "measured_peak_bytes",
    "eager_vs_measured",
    "eager_transient_vs_measured",
    "activation_sum_bytes",
    "reuse_arena_bytes",
    "reuse_saving_pct",
    "eager_excess_pct",
    "peak_layer",
    "waiting_share_at_peak_pct",
    "concat_share_at_peak_pct",
)


def peak_view(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`peak_table` of a lifetimes table as a notebook shows it: one row per model
    (indexed by its label) with :data:`PEAK_VIEW`."""
    return peak_table(df).set_index("label")[list(PEAK_VIEW)]


def _share(part: pd.DataFrame, whole: pd.DataFrame) -> float:
    total = float(whole.out_bytes.sum())
    return 100.0 * float(part.out_bytes.sum()) / total if total else math.nan


def longest_lifetimes(df: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    """Per model, the ``n`` layers whose outputs live longest (in layers, from the layer that
    made them to their last consumer): label, layer, module type, output bytes, created at,
    freed after, lifetime, the layer after which eager PyTorch released it."""
    lay = level(df, "layer")
    if lay.empty:
        return pd.DataFrame()
    lay = lay.assign(label=[model_label(m, w) for m, w in zip(lay.model, lay.width, strict=True)])
    top = lay.sort_values(["label", "lifetime_steps"], ascending=[True, False], kind="stable")
    cols = [
        "label",
        "layer",
        "module_type",
        "out_bytes",
        "created_at_step",
        "freed_after_step",
        "lifetime_steps",
        "held_until_step",
    ]
    return top.groupby("label", sort=False).head(n)[cols].reset_index(drop=True)


def held_past_last_use(df: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    """Per model, the ``n`` activation tensors that eager PyTorch kept longest after their last
    use, largest bytes x ops first: label, the layer that made it, the layer of its last use,
    the op that made it, bytes, last use and release (op steps) and ``held_ops`` (release minus
    last use). Python references decide it: a list that keeps outputs until the forward
    returns, a caller's variable that holds a stage's input while the next stage runs."""
    t = level(df, "tensor")
    if t.empty:
        return pd.DataFrame()
    lay = level(df, "layer")
    names = {
        (m, w, int(i)): name
        for m, w, i, name in zip(lay.model, lay.width, lay["index"], lay.layer, strict=True)
    }
    t = t.assign(
        label=[model_label(m, w) for m, w in zip(t.model, t.width, strict=True)],
        held_ops=(t.held_until_step - t.freed_after_step).astype(int),
        last_use_in=[
            names.get((m, w, int(i)), "")
            for m, w, i in zip(t.model, t.width, t.last_use_layer, strict=True)
        ],
    )
    t = t.assign(cost=t.held_ops * t.out_bytes)
    top = t[t.held_ops > 0].sort_values(["label", "cost"], ascending=[True, False], kind="stable")
    cols = [
        "label",
        "layer",
        "last_use_in",
        "module_type",
        "out_bytes",
        "freed_after_step",
        "held_until_step",
        "held_ops",
    ]
    return top.groupby("label", sort=False).head(n)[cols].reset_index(drop=True)


def layer_curves(df: pd.DataFrame) -> pd.DataFrame:
    """The live set after each layer of every model: label, index, layer, module_type,
    planned_bytes (layer outputs not yet past their last consumer), eager_bytes (not yet
    released), measured_bytes (allocated after the layer minus before the forward: NaN
    without a GPU), all in bytes."""
    lay = level(df, "layer")
    return pd.DataFrame(
        {
            "label": [model_label(m, w) for m, w in zip(lay.model, lay.width, strict=True)],
            "index": lay["index"].astype(int),
            "layer": lay.layer,
            "module_type": lay.module_type,
            "planned_bytes": lay.live_bytes_after.astype(float),
            "eager_bytes": lay.held_bytes_after.astype(float),
            "measured_bytes": lay.measured_allocated_bytes.astype(float),
        }
    )


def op_curves(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`live_curve` of every model, with its label (for the live-set plot)."""
    frames = []
    for (model, width), g in df.groupby(_MODEL_KEYS, sort=False):
        frames.append(live_curve(level(g, "tensor")).assign(label=model_label(model, width)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def pool_summary(pool: pd.DataFrame) -> pd.DataFrame:
    """One row per allocator configuration of a pool table: forwards, the run's peak reserved
    and peak allocated bytes, the final reserved bytes and their ratio to the peak allocated
    (``reserved_over_peak_allocated``: what the pool keeps beyond the most the tensors ever
    needed) and to the final allocated bytes (``final_reserved_over_allocated``), the mean
    share of reserved bytes in inactive split blocks (fragmentation), allocation retries, and
    images per second over the forwards that were not the first at
    their batch size."""
    rows = []
    for conf, g in pool.groupby("alloc_conf", sort=False):
        g = g.sort_values("step")
        timed = g[~g.first_of_batch.astype(bool)]
        timed = timed if len(timed) else g
        peak_alloc = float(g.peak_allocated_bytes.max())
        final_reserved = float(g.reserved_bytes.iloc[-1])
        final_alloc = float(g.allocated_bytes.iloc[-1])
        rows.append(
            {
                "alloc_conf": conf,
                "forwards": len(g),
                "peak_reserved_bytes": float(g.peak_reserved_bytes.max()),
                "peak_allocated_bytes": peak_alloc,
                "final_reserved_bytes": final_reserved,
                "final_allocated_bytes": final_alloc,
                "reserved_over_peak_allocated": final_reserved / peak_alloc
                if peak_alloc > 0
                else math.nan,
                "final_reserved_over_allocated": final_reserved / final_alloc
                if final_alloc > 0
                else math.nan,
                "inactive_split_share_pct": float(
                    (
                        100.0
                        * g.inactive_split_bytes
                        / g.reserved_bytes.where(g.reserved_bytes > 0)
                    ).mean()
                ),
                "alloc_retries": float(g.alloc_retries.max()),
                "img_per_s": 1e3 * float(timed.batch.sum()) / float(timed.latency_ms.sum()),
            }
        )
    return pd.DataFrame(rows)


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    memory.expandable_img_per_s_ratio memory.expandable_peak_reserved_ratio
    memory.peak_error_pct_max
    """.split()
)


def facts(root: DataRoot) -> pd.DataFrame:
    """The memory numbers of ``root`` (facts table; keys prefixed :data:`PREFIX`). From
    ``memory_lifetimes``: ``peak_error_pct_max`` (:func:`lifetime_facts`). From
    ``memory_pool``, per configuration (scope ``alloc_conf=...``): ``peak_reserved_bytes``,
    ``reserved_over_peak_allocated``,
        ``inactive_split_share_pct``, ``img_per_s``, ``alloc_retries``; unscoped:
        ``expandable_peak_reserved_ratio``, ``expandable_final_reserved_ratio`` and
        ``expandable_img_per_s_ratio`` (expandable segments over the default; only where the
    allocator's counters were read, i.e. on a GPU)."""
    rows = []
    lifetimes, pool = dataset_of(root, LIFETIMES), dataset_of(root, POOL)
    if lifetimes:
        rows += lifetime_facts(root.load(lifetimes))
    if pool:
        rows += pool_facts(root.load(pool))
    return facts_table(rows)


def dataset_of(root: DataRoot, kind: str) -> str | None:
    """The dataset named ``kind`` in ``root``, else its first dataset of that kind (a CPU
    root names its smaller collection ``memory_lifetimes_cpu``), else None."""
    if root.has(kind):
        return kind
    return next((n for n in root.names() if root.info(n).get("kind") == kind), None)


def lifetime_facts(df: pd.DataFrame) -> list[dict]:
    """The ``memory_lifetimes`` fact of :func:`facts`: the largest error (%) of the eager
    lifetimes' peak on the measured one, over the models with a measured peak. The reuse
    saving, the eager excess and the shares at the peak are fixed by the model's graph (the
    same on every machine): :func:`peak_view` shows them as a table."""
    errors = (100.0 * (peak_table(df).eager_vs_measured - 1.0).abs()).dropna()
    worst = errors.max() if len(errors) else math.nan
    return [fact(PREFIX + "peak_error_pct_max", worst, "%", datasets=(LIFETIMES,))]


def pool_facts(pool: pd.DataFrame) -> list[dict]:
    """The ``memory_pool`` facts of :func:`facts` as fact rows."""
    rows, ds = [], (POOL,)
    summ = pool_summary(pool).set_index("alloc_conf")
    for conf, s in summ.iterrows():
        scope = f"alloc_conf={conf}"
        for k, u in (
            ("peak_reserved_bytes", "bytes"),
            ("reserved_over_peak_allocated", "x"),
            ("inactive_split_share_pct", "%"),
            ("img_per_s", "img/s"),
            ("alloc_retries", ""),
        ):
            rows.append(fact(PREFIX + k, s[k], u, scope=scope, datasets=ds))
    # the configurations differ only where a CUDA caching allocator ran (not on a CPU)
    measured = summ.peak_reserved_bytes.notna().all()
    if measured and {DEFAULT_CONF, EXPANDABLE_CONF} <= set(summ.index):
        d, e = summ.loc[DEFAULT_CONF], summ.loc[EXPANDABLE_CONF]
        for key, col in (
            ("expandable_peak_reserved_ratio", "peak_reserved_bytes"),
            ("expandable_final_reserved_ratio", "final_reserved_bytes"),
            ("expandable_img_per_s_ratio", "img_per_s"),
        ):
            v = e[col] / d[col] if d[col] and not math.isnan(d[col]) else math.nan
            rows.append(fact(PREFIX + key, v, "x", datasets=ds))
    return rows
