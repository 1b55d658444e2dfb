"""One model's view of a root (notebook 11): its sweep, trace, ncu and layer tables, found by
role and narrowed to its rows (:func:`view`). A model's label is a config label's part before
its precision (``yolov8_w0.25``), else ``family`` with the preset letter or ``_w<width>``."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.weighting import OCCUPANCY_COLUMNS, time_weighted
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.errors import UserError
from yolo_sm.topics.heatmaps.analyse import LOW_PCT, layer_order, layer_table

# fmt: off

#: the roles notebook 11 reads, in the order it shows them
ROLES = ("sweep", "trace", "ncu", "model_layers")
#: the columns a table needs to play a role (a throughput-only ncu pass cannot)
ROLE_COLUMNS = {"ncu": OCCUPANCY_COLUMNS}
#: which precision of a sweep stands for the model when it holds several
PRECISION_ORDER = ("fp16", "bf16", "tf32", "fp32", "fp8", "int8")
_CONFIG = re.compile(r"^(?P<model>.+?)_(?:fp32|tf32|fp16|bf16|fp8|int8)_(?:nchw|nhwc)_b\d+")


def model_labels(df: pd.DataFrame) -> pd.Series:
    """One model label per row (``yolov8_w0.25``, ``yolov8n``; "" where none)."""
    if "config" in df:
        lab = df["config"].astype(str).str.extract(_CONFIG)["model"]
        return lab.fillna("").astype(str)
    # ``family`` holds a model's label (a checkpoint's file stem); ``model`` may hold its spec
    name_col = "family" if "family" in df else "model" if "model" in df else None
    if name_col is None:
        return pd.Series("", index=df.index)
    out = []
    scales = df["scale"] if "scale" in df else pd.Series("", index=df.index)
    widths = df["width"] if "width" in df else pd.Series(math.nan, index=df.index)
    for name, scale, width in zip(df[name_col], scales, widths, strict=True):
        if not isinstance(name, str) or not name:
            out.append("")
        elif isinstance(scale, str) and scale:
            out.append(f"{name}{scale}")
        elif width is not None and not pd.isna(width):
            out.append(f"{name}_w{float(width):g}")
        else:
            out.append(name)
    return pd.Series(out, index=df.index, dtype=object)


def _rank(df: pd.DataFrame, role: str) -> tuple:
    """How well rows serve ``role`` (larger is better): layers named, batches, rows."""
    layered = "layer" in df and df["layer"].astype(str).str.len().gt(0).any()
    if role == "sweep":  # the (precision, layout) the view keeps
        df = _one_variant(df)
    batches = df["batch"].nunique() if "batch" in df else 0
    return (bool(layered) if role in ("ncu", "trace") else True, batches, len(df))


def _one_variant(sweep: pd.DataFrame) -> pd.DataFrame:
    """The rows of the most measured (precision, layout), ties by :data:`PRECISION_ORDER`."""
    if "precision" not in sweep or sweep.empty:
        return sweep
    layout = sweep["layout"] if "layout" in sweep else pd.Series("", index=sweep.index)
    counts = sweep.groupby([sweep["precision"], layout]).size()
    rank = {p: i for i, p in enumerate(PRECISION_ORDER)}
    best = sorted(counts.items(), key=lambda kv: (-kv[1], rank.get(kv[0][0], 99), kv[0]))[0][0]
    return sweep[(sweep["precision"] == best[0]) & (layout == best[1])]


def inventory(root: DataRoot, roles=ROLES) -> pd.DataFrame:
    """One row per (role, dataset, model) of the root: rows, batches and ``rank``."""
    rows = []
    for role in roles:
        for name in root.find_all(role):
            df = root.load(name)
            if not set(ROLE_COLUMNS.get(role, ())) <= set(df):
                continue
            labels = model_labels(df)
            for model, part in df.groupby(labels.values):
                batches = part["batch"].nunique() if "batch" in part else 0
                rows.append((role, name, model, len(part), batches, _rank(part, role)))
    return pd.DataFrame(rows, columns=["role", "dataset", "model", "rows", "batches", "rank"])


def pick_model(inv: pd.DataFrame, model: str | None = None) -> str:
    """``model`` if the root holds it (else a UserError); None: the model most roles
    hold; "" where none is named."""
    models = sorted(m for m in inv["model"].unique() if m)
    if not models:
        if model is None:
            return ""
        raise UserError("this root holds no table that names a model (sweep, trace, ncu)")
    if model is not None:
        if model not in models:
            raise UserError(f"this root holds no model {model!r}; it holds: {', '.join(models)}")
        return model
    roles = inv[inv["model"] != ""].groupby("model")["role"].nunique()
    swept = inv[inv["role"] == "sweep"].groupby("model")["batches"].max()
    return sorted(models, key=lambda m: (-roles[m], -swept.get(m, 0), m))[0]


@dataclass(frozen=True)
class ModelView(DataRoot):
    """The datasets of one model in ``base`` by role; ``load(role)`` gives its rows."""

    base: DataRoot | None = None
    model: str = ""
    sources: dict = field(default_factory=dict)
    others: tuple = ()
    narrow: bool = True  # False: a one-model root, its tables read whole

    def entries(self) -> dict:
        return {role: self.base.info(name) for role, name in self.sources.items()}

    def load(self, name: str):
        if name not in self.sources:
            return DataRoot.info(self, name)  # raises, naming the roles it holds
        df = self.base.load(self.sources[name])
        keep = df[(model_labels(df) == self.model).values] if self.narrow else df
        if name == "sweep":
            keep = _one_variant(keep)
        keep = keep.reset_index(drop=True)
        keep.attrs = dict(df.attrs)
        return keep

    def machine(self) -> dict:
        return self.base.machine()

    def device_name(self) -> str:
        return self.base.device_name()

    def missing(self, name: str) -> str:
        of = f"of {self.model}" if self.model else "of any model"
        return (
            f"This root ({self.name}) holds no {name} table {of}: the notebook's "
            "live collection (LIVE = True on a GPU) makes one."
        )


def view(root: DataRoot, model: str | None = None) -> ModelView:
    """The :class:`ModelView` of ``model`` (None: :func:`pick_model`) in ``root``; a root
    whose tables name one model at most is read whole."""
    inv = inventory(root)
    chosen = pick_model(inv, model)
    if not chosen:
        return ModelView(root.path, root.name, base=root)
    one = model is None and inv.groupby("dataset")["model"].nunique().max() <= 1
    mine = inv if one else inv[inv["model"] == chosen]
    if one:  # the sweep's label names the model (the first role that has one)
        chosen = next(m for r in ROLES for m in mine[mine["role"] == r]["model"] if m)
    sources = {}
    for role in ROLES:
        cand = mine[mine["role"] == role]
        if len(cand):  # best rank; ties: the first in manifest order (inventory's order)
            best = max(range(len(cand)), key=lambda i: (cand["rank"].iloc[i], -i))
            sources[role] = cand["dataset"].iloc[best]
    others = () if one else tuple(m for m in sorted(set(inv["model"]) - {""}) if m != chosen)
    return ModelView(root.path, root.name, root, chosen, sources, others, narrow=not one)


def sources_table(v: ModelView) -> pd.DataFrame:
    """What the view reads per role: dataset, rows, batches, precision, layout."""
    rows = []
    for role in ROLES:
        df = v.load(role) if role in v.sources else pd.DataFrame()
        row = {"role": role, "dataset": v.sources.get(role, ""), "rows": len(df)}
        for c in ("batch", "precision", "layout"):
            vals = sorted(df[c].unique()) if c in df else []
            row["batches" if c == "batch" else c] = ", ".join(str(x) for x in vals)
        rows.append(row)
    return pd.DataFrame(rows)


#: columns of :func:`channel_table`, as the model table names them
CHANNEL_COLUMNS = tuple(
    "layer module_type stage in_channels out_channels stride out_h out_w params flops out_bytes"
    .split()
)


def channel_table(layers: pd.DataFrame) -> pd.DataFrame:
    """Channels and activations per layer (batch 1), with ``gflops`` per image and
    ``activation_mb`` (MB = 1e6 bytes)."""
    cols = [c for c in CHANNEL_COLUMNS if c in layers]
    out = layers[cols].reset_index(drop=True)
    if "flops" in out:
        out = out.assign(gflops=out["flops"] / 1e9)
    if "out_bytes" in out:
        out = out.assign(activation_mb=out["out_bytes"] / 1e6)
    return out.drop(columns=[c for c in ("flops", "out_bytes") if c in out])


def trace_layers(trace: pd.DataFrame) -> pd.DataFrame:
    """Per (config, layer) of a Kineto table in model order: kernels and us per
    forward, time-weighted theoretical and estimated occupancy."""
    k = trace[trace["layer"].astype(str).str.len() > 0]
    if "iteration" in k:
        k = k[k["iteration"].notna()]
    cols = ("theoretical_occupancy_pct", "est_occupancy_pct")
    out = time_weighted(k, ["config", "layer"], cols=cols)
    n = k.groupby("config")["iteration"].nunique() if "iteration" in k else 1
    per = out["config"].map(n) if "iteration" in k else 1
    out = out.assign(kernels=out["kernels"] / per, time_us=out["time_us"] / per)
    order = {name: i for i, name in enumerate(layer_order(out["layer"]))}
    out["layer_idx"] = out["layer"].map(order)
    return out.sort_values(["config", "layer_idx"]).reset_index(drop=True)


PREFIX = "your_model."


def layer_facts(ncu: pd.DataFrame, dataset: str = "ncu") -> list[dict]:
    """Facts of one model's ncu table at its largest batch: achieved occupancy, % of
    time in layers under LOW_PCT, the slowest layer's % of time."""
    if ncu is None or ncu.empty or "layer" not in ncu:
        return []
    table = layer_table(ncu)
    table = table[table["layer"].astype(str).str.len() > 0]
    if table.empty:
        return []
    config = (
        table.sort_values("batch").config.iloc[-1] if "batch" in table else table.config.iloc[0]
    )
    t = table[table["config"] == config]
    time = t["time_us"]
    total = float(time.sum())
    if total <= 0:
        return []
    achieved = float((t["achieved_occupancy_tw_pct"] * time).sum() / total)
    below = float(time[t["achieved_occupancy_tw_pct"] < LOW_PCT].sum() / total * 100)
    slowest = float(time.max() / total * 100)
    d, note = (dataset,), f"config {config}"
    return [
        fact(PREFIX + "achieved_occupancy_tw_pct", achieved, "%", datasets=d, note=note),
        fact(PREFIX + "time_share_below_50_pct", below, "%", datasets=d, note=note),
        fact(PREFIX + "slowest_layer_time_share_pct", slowest, "%", datasets=d, note=note),
    ]


FACT_KEYS = frozenset(
    PREFIX + k
    for k in (
        "achieved_occupancy_tw_pct", "time_share_below_50_pct", "slowest_layer_time_share_pct",
    )
)


def facts(root: DataRoot) -> pd.DataFrame:
    """:func:`layer_facts` of the view's ``ncu`` table (empty without one)."""
    v = root if isinstance(root, ModelView) else view(root)
    ncu = v.load("ncu") if v.has("ncu") else None
    return facts_table(layer_facts(ncu, v.sources.get("ncu", "ncu")))
