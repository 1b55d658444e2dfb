"""What collecting a root costs in GPU time, from its ``collection_time`` snapshot (written by
``yolo-sm collect --status --save``): per step the seconds its table took and the seconds it
still needs, so the whole plan's cost; where the recorded seconds went by phase; and one
root's plan against another's (a collection with faster code against the baseline it is
meant to beat).

A snapshot of a root re-collected in part (a sample of every step) scales each step to the
whole plan the way ``collect --status`` does: the missing points or units at the pace the
sample measured. Two snapshots of the same plan compare step by step; and, with no scaling at
all, on the very units both roots measured (:func:`same_units`)."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.gpu_time import GUESSED_SOURCES, PHASES
from yolo_sm.contract.schema import COLLECTION_TIME, KEY_COLUMNS

PREFIX = "collection."
#: the phase columns of a snapshot, in order
PHASE_COLUMNS = tuple(f"{p}_s" for p in (*PHASES, "other"))
RECORDED = "recorded"


def snapshot(root: DataRoot) -> pd.DataFrame | None:
    """``root``'s collection_time table, None where the root has none."""
    return root.load(COLLECTION_TIME) if root.has(COLLECTION_TIME) else None


#: the columns of :func:`sample_cost`
SAMPLE_COLUMNS = ("step", "kind", "state", "groups", "sampled", "whole_s", "sample_s", "group_s")


def sample_cost(df: pd.DataFrame, n: int) -> pd.DataFrame | None:
    """What ``collect --sample n`` into an empty folder would cost, by snapshot ``df``'s own
    seconds, to plan a sample on a host whose GPU time is limited. Per step: ``groups`` (the
    snapshot's; NA for a step that runs whole), ``sampled`` (at most ``n`` of them),
    ``whole_s`` (one run of the whole step: ``plan_s``, spent plus left, or left alone where
    the plan changed a step since its table was made) and ``sample_s``: a sampled step's ``whole_s``
    times the share of its groups sampled (each group taken as costing the same: the first
    groups in plan order may cost more or less), another step's ``whole_s``; and ``group_s``,
    the most one run must hold at once to take the sample (a group is measured side by side
    in one run; a step that runs whole is one piece): a sampled step's ``whole_s`` over its
    groups, another step's ``whole_s``. None for a snapshot saved without ``groups``."""
    if "groups" not in df:
        return None
    rows = []
    for r in df.itertuples(index=False):
        whole = float(r.left_s if r.state == "changed" else r.plan_s)
        g = None if pd.isna(r.groups) else int(r.groups)
        taken = None if g is None else min(n, g)
        share = 1.0 if g is None else (taken / g if g else 0.0)
        piece = whole if g is None else (whole / g if g else 0.0)
        rows.append(
            {"step": r.step, "kind": r.kind, "state": r.state, "groups": g, "sampled": taken,
             "whole_s": whole, "sample_s": whole * share, "group_s": piece}
        )  # fmt: skip
    out = pd.DataFrame(rows, columns=list(SAMPLE_COLUMNS))
    return out.astype({"groups": "Int64", "sampled": "Int64"})


def too_long(cost: pd.DataFrame, run_s: float) -> pd.DataFrame:
    """The steps of a :func:`sample_cost` whose piece (``group_s``) is longer than ``run_s``
    seconds: a sample taken in runs of that length (``collect --max-minutes``) never measures
    them, since no run holds their group (or whole step) at once."""
    return cost[cost["group_s"] > run_s]


def phases(df: pd.DataFrame) -> pd.DataFrame:
    """Where the recorded seconds went: one row per phase (``phase``, ``seconds``,
    ``share_pct`` of the recorded steps' total) over the steps whose seconds are recorded."""
    rec = df[df["spent_source"] == RECORDED]
    total = float(rec["spent_s"].sum())
    rows = []
    for col in PHASE_COLUMNS:
        sec = float(rec[col].fillna(0.0).sum()) if col in rec else 0.0
        rows.append(
            {
                "phase": col.removesuffix("_s"),
                "seconds": sec,
                "share_pct": 100 * sec / total if total > 0 else float("nan"),
            }
        )
    return pd.DataFrame(rows)


#: the parts of a step's seconds (:func:`parts`), in stacking order
PARTS = ("spent, recorded", "spent, estimated", "left, estimated")


def parts(df: pd.DataFrame) -> pd.DataFrame:
    """A snapshot as one row per (step, part of :data:`PARTS`) with its ``seconds``, in plan
    order: what each step's whole cost is made of (measured and recorded, estimated for a
    table without a record, estimated for what is not measured yet)."""
    rec = df["spent_source"] == RECORDED
    rows = []
    for part, sec in zip(
        PARTS,
        (df["spent_s"].where(rec, 0.0), df["spent_s"].where(~rec, 0.0), df["left_s"]),
        strict=True,
    ):
        rows.append(pd.DataFrame({"step": df["step"], "part": part, "seconds": sec.fillna(0.0)}))
    return pd.concat(rows, ignore_index=True)


def side_by_side(base: pd.DataFrame, cand: pd.DataFrame) -> pd.DataFrame:
    """Two snapshots per step (outer join on ``step``): ``plan_s_base`` / ``plan_s_cand``,
    their states, and ``ratio`` (candidate over baseline; NaN unless both hold the step)."""
    cols = ["step", "kind", "state", "spent_s", "left_s", "plan_s"]
    m = base[cols].merge(cand[cols], on="step", how="outer", suffixes=("_base", "_cand"))
    m["kind"] = m.pop("kind_base").fillna(m.pop("kind_cand"))
    m["ratio"] = m["plan_s_cand"] / m["plan_s_base"]
    order = list(base["step"]) + [s for s in cand["step"] if s not in set(base["step"])]
    return m.set_index("step").loc[order].reset_index()


def guessed_seconds(df: pd.DataFrame) -> float:
    """The seconds of a snapshot that no measurement paced: spent and left seconds whose source
    is the plan's own figure or a default (:data:`yolo_sm.contract.gpu_time.GUESSED_SOURCES`).
    A compile-cache mode estimated by the plan's ``mode_est_s`` beside measured units counts as
    measured: its source names both."""
    spent = df["spent_s"].where(df["spent_source"].isin(GUESSED_SOURCES), 0.0)
    left = df["left_s"].where(df["left_source"].isin(GUESSED_SOURCES), 0.0)
    return float(spent.fillna(0.0).sum() + left.fillna(0.0).sum())


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    collection.build_share_pct collection.guessed_share_pct collection.plan_s_over_baseline
    collection.same_units_s_over_baseline collection.warmer_builds
    """.split()
)


def facts(root: DataRoot) -> pd.DataFrame:
    """Facts of ``root``'s snapshot (none without one). Keys (scope empty):
    ``collection.plan_s`` (the whole plan, s), ``collection.spent_s`` / ``left_s``,
    ``collection.recorded_share_pct`` (% of the spent seconds that the manifest records
    rather than estimates), ``collection.build_share_pct`` (% of the recorded seconds spent
    building engines), ``collection.superseded_s`` (recorded seconds of work the tables no
    longer hold, left out of the others; absent from a snapshot without the column),
    ``collection.guessed_share_pct`` (% of the whole plan's seconds that no measurement paced:
    the plan's own figures, :func:`guessed_seconds`)."""
    df = snapshot(root)
    if df is None or not len(df):
        return facts_table([])
    ds = (f"{root.name}/{COLLECTION_TIME}",)
    spent = float(df["spent_s"].sum())
    recorded = float(df.loc[df["spent_source"] == RECORDED, "spent_s"].sum())
    build = phases(df).set_index("phase").loc["build", "share_pct"]
    rows = [
        fact(PREFIX + "plan_s", float(df["plan_s"].sum()), "s", datasets=ds),
        fact(PREFIX + "spent_s", spent, "s", datasets=ds),
        fact(PREFIX + "left_s", float(df["left_s"].sum()), "s", datasets=ds),
        fact(
            PREFIX + "recorded_share_pct",
            100 * recorded / spent if spent else None,
            "%",
            datasets=ds,
        ),
        fact(PREFIX + "build_share_pct", build, "%", datasets=ds),
    ]
    plan_s = float(df["plan_s"].sum())
    rows.append(
        fact(PREFIX + "guessed_share_pct",
             100 * guessed_seconds(df) / plan_s if plan_s > 0 else None, "%", datasets=ds)
    )  # fmt: skip
    if "superseded_s" in df:
        rows.append(
            fact(PREFIX + "superseded_s", float(df["superseded_s"].fillna(0.0).sum()), "s",
                 datasets=ds)
        )  # fmt: skip
    return facts_table(rows)


def pair_facts(base: DataRoot, cand: DataRoot) -> pd.DataFrame:
    """Facts of a candidate root's snapshot against a baseline root's (none unless both
    have one, or when they are the same folder): ``collection.plan_s_over_baseline`` (the
    candidate's whole-plan seconds over the baseline's, over the steps both snapshots hold),
    ``collection.steps_compared``, ``collection.warmer_builds`` (the candidate's compiled
    builds that found more in inductor's cache than the baseline's of the same engine and unit,
    :func:`warmer_builds`; absent where they made none in common) and
    ``collection.same_units_s_over_baseline`` (the candidate's seconds over the baseline's on
    the units both measured, :func:`same_units`; absent where they measured none in common)."""
    a, b = snapshot(base), snapshot(cand)
    if a is None or b is None or base.path.resolve() == cand.path.resolve():
        return facts_table([])
    m = side_by_side(a, b)
    both = m[m["plan_s_base"].notna() & m["plan_s_cand"].notna()]
    ds = (f"{base.name}/{COLLECTION_TIME}", f"{cand.name}/{COLLECTION_TIME}")
    den = float(both["plan_s_base"].sum())
    ratio = float(both["plan_s_cand"].sum()) / den if den else None
    rows = [
        fact(PREFIX + "plan_s_over_baseline", ratio, "x", datasets=ds),
        fact(PREFIX + "steps_compared", len(both), "steps", datasets=ds),
    ]
    pairs = list(_both_tables(base, cand))  # each table read once for both comparisons
    warmer = _warmer_rows(pairs)
    if len(warmer):
        names = tuple(f"{r.name}/{s}" for s in warmer["step"] for r in (base, cand))
        rows.append(
            fact(PREFIX + "warmer_builds", int(warmer["warmer"].sum()), "builds", datasets=names,
                 note=f"of {int(warmer['builds'].sum())} compiled builds both roots made")
        )  # fmt: skip
    same = _same_unit_rows(pairs)
    if len(same) and same["base_s"].sum() > 0:
        names = tuple(f"{r.name}/{s}" for s in same["step"] for r in (base, cand))
        rows.append(
            fact(
                PREFIX + "same_units_s_over_baseline",
                float(same["cand_s"].sum() / same["base_s"].sum()),
                "x",
                datasets=names,
            )
        )
    return facts_table(rows)


#: the columns that name a unit in a step's own table, by step kind: a bench's (model, batch),
#: a sweep's point
UNIT_KEYS = {"bench": ("family", "width", "batch"), "sweep": KEY_COLUMNS}
#: the seconds a sweep row records, by phase (a bench row's ``unit_s`` is its whole unit's)
ROW_PHASES = ("build_s", "warmup_s", "timed_s", "profile_s")
#: the columns of :func:`same_units`
SAME_UNITS_COLUMNS = ("step", "kind", "units", "seconds_of", "base_s", "cand_s", "ratio")


def _unit_seconds(df: pd.DataFrame, kind: str, phases: tuple[str, ...]) -> pd.Series:
    """Seconds per unit of a bench or sweep table, indexed by its unit key as text: a bench's
    ``unit_s`` (every row of a unit carries it), a sweep's ``phases`` summed per point."""
    keys = [k for k in UNIT_KEYS[kind] if k in df]
    named = df.assign(**{k: df[k].astype(str) for k in keys})
    if kind == "bench":
        return named.groupby(keys)["unit_s"].max().dropna()
    return (
        named[keys].assign(sec=named[list(phases)].fillna(0.0).sum(axis=1)).groupby(keys).sec.sum()
    )


def same_units(base: DataRoot, cand: DataRoot) -> pd.DataFrame:
    """Per bench and sweep step of ``cand``'s snapshot whose table both roots hold: the units
    both measured (``units``), the seconds each root took for them (``base_s``, ``cand_s``: a
    bench's ``unit_s``, a sweep's phases that both tables record, named in ``seconds_of``) and
    ``ratio`` (candidate over baseline). No unit is scaled or estimated: what a sampled
    candidate measured against what the baseline took for the very same work. Empty unless
    both roots have a snapshot and differ."""
    return _same_unit_rows(_both_tables(base, cand))


def _same_unit_rows(pairs) -> pd.DataFrame:
    """:func:`same_units` of the ``(step, kind, base table, cand table)`` of
    :func:`_both_tables`."""
    rows = []
    for step, kind, old, new in pairs:
        if kind == "bench":
            phases = ("unit_s",) if "unit_s" in old and "unit_s" in new else ()
        else:
            phases = tuple(c for c in ROW_PHASES if c in old and c in new)
        if not phases:
            continue
        o, n = _unit_seconds(old, kind, phases), _unit_seconds(new, kind, phases)
        both = o.index.intersection(n.index)
        if not len(both):
            continue
        base_s, cand_s = float(o[both].sum()), float(n[both].sum())
        rows.append(
            {
                "step": step, "kind": kind, "units": len(both),
                "seconds_of": ", ".join(phases), "base_s": base_s, "cand_s": cand_s,
                "ratio": cand_s / base_s if base_s > 0 else float("nan"),
            }
        )  # fmt: skip
    return pd.DataFrame(rows, columns=list(SAME_UNITS_COLUMNS))


def _both_tables(base: DataRoot, cand: DataRoot):
    """``(step, kind, base table, cand table)`` per bench and sweep step of ``cand``'s snapshot
    (in its order) whose table both roots hold; nothing unless both roots have a snapshot and
    differ."""
    a, b = snapshot(base), snapshot(cand)
    if a is None or b is None or base.path.resolve() == cand.path.resolve():
        return
    for step, kind in zip(b["step"], b["kind"], strict=True):
        if kind in UNIT_KEYS and base.has(step) and cand.has(step):
            yield step, kind, base.load(step), cand.load(step)


#: how much a torch.compile build found in inductor's disk cache, by its ``compile_cache``
CACHE_RANK = {"cold": 0, "partial": 1, "warm": 2}
#: the columns of :func:`warmer_builds`
WARMER_COLUMNS = ("step", "kind", "builds", "warmer", "warmer_engines")


def _build_states(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Each compiled build of a bench or sweep table, indexed by its unit key and engine (a
    bench's ``variant``; a sweep's point key names its engine) as text: ``rank``, its
    ``compile_cache`` state's place in :data:`CACHE_RANK`, and ``label``, the engine's name
    (a bench's variant, a sweep's :func:`_engine_name`); rows without a state (engines
    that compile nothing) left out."""
    keys = [k for k in UNIT_KEYS[kind] if k in df] + (["variant"] if kind == "bench" else [])
    engine = df["variant"].astype(str) if kind == "bench" else _engine_name(df)
    named = df.assign(**{k: df[k].astype(str) for k in keys})
    named = named.assign(rank=df["compile_cache"].map(CACHE_RANK), label=engine)
    # not agg(engine=...): ``engine`` is a keyword of agg itself (numba), taken silently
    return (
        named.dropna(subset=["rank"])
        .groupby(keys)
        .agg(rank=("rank", "max"), label=("label", "first"))
    )


def warmer_builds(base: DataRoot, cand: DataRoot) -> pd.DataFrame:
    """Per bench and sweep step of ``cand``'s snapshot whose table both roots hold with
    ``compile_cache``: the torch.compile builds both made for the same engine of the same unit
    (``builds``) and those where ``cand``'s build found more in inductor's disk cache than
    ``base``'s (``warmer``: cold < partial < warm, :data:`CACHE_RANK`; ``warmer_engines`` names
    them). A collection whose builds read a cache the baseline's compiled afresh saves seconds
    that no faster code saved. Empty unless both roots have a snapshot and differ."""
    return _warmer_rows(_both_tables(base, cand))


def _warmer_rows(pairs) -> pd.DataFrame:
    """:func:`warmer_builds` of the ``(step, kind, base table, cand table)`` of
    :func:`_both_tables`."""
    rows = []
    for step, kind, old, new in pairs:
        if "compile_cache" not in old or "compile_cache" not in new:
            continue
        o, n = _build_states(old, kind), _build_states(new, kind)
        both = o.index.intersection(n.index)
        if not len(both):
            continue
        up = both[(n.loc[both, "rank"] > o.loc[both, "rank"]).to_numpy()]
        rows.append(
            {
                "step": step, "kind": kind, "builds": len(both), "warmer": len(up),
                "warmer_engines": ", ".join(sorted(set(n.loc[up, "label"]))),
            }
        )  # fmt: skip
    return pd.DataFrame(rows, columns=list(WARMER_COLUMNS))


#: the columns of :func:`build_by_engine`
BUILD_COLUMNS = (
    "engine", "rows", "build_s", "median_s", "max_s", "share_pct", "datasets", "unrecorded_rows",
)  # fmt: skip


def _engine_name(df: pd.DataFrame) -> pd.Series:
    """Each row's engine: ``backend[:compile mode]/precision`` (the mode named where it is not
    ``default``; a table without ``compile_mode`` compiled in the default mode)."""
    mode = df.get("compile_mode", pd.Series("default", index=df.index)).fillna("default")
    backend = df["backend"].astype(str)
    return backend.where(
        (backend != "compile") | (mode == "default"), backend + ":" + mode.astype(str)
    ) + "/" + df["precision"].astype(str)  # fmt: skip


def _engine_label(df: pd.DataFrame) -> pd.Series:
    """What built each row's engine: :func:`_engine_name`, a torch.compile row's
    ``compile_cache`` state in brackets (a cold build compiles, a warm one reads the disk
    cache), ``pipeline`` before the engine a frames-to-boxes row wraps (``YOLO.predict`` for
    ultralytics' own)."""
    label = _engine_name(df)
    backend = df["backend"].astype(str)
    if "compile_cache" in df:
        cache = df["compile_cache"].astype("string")
        label = label.where(cache.isna() | (backend != "compile"), label + " [" + cache + "]")
    if "scope" in df:
        label = label.where(df["scope"].astype(str) != "frames_to_boxes", "pipeline " + label)
    return label.where(backend != "ultralytics", "YOLO.predict")


def build_by_engine(root: DataRoot) -> pd.DataFrame:
    """Where the build seconds of ``root``'s bench and sweep tables go, per engine kind
    (:func:`_engine_label`): the rows that recorded a build, their seconds in all, the median and
    the largest one, their share of every recorded build (%), the datasets they come from, and
    ``unrecorded_rows``: rows of that kind without a build time (an engine that failed records
    none, though its build may have run), sorted by seconds. Builds are wall seconds of one
    engine each, the larger part of a collection's GPU time (:func:`phases`)."""
    frames = []
    for name, entry in root.entries().items():
        if entry.get("kind") not in ("bench", "sweep"):
            continue
        df = root.load(name)
        if not {"backend", "precision", "build_s"} <= set(df.columns):
            continue
        frames.append(df.assign(engine=_engine_label(df), dataset=name)[
            ["engine", "dataset", "build_s"]])  # fmt: skip
    if not frames:
        return pd.DataFrame(columns=list(BUILD_COLUMNS))
    d = pd.concat(frames, ignore_index=True)
    ran = d[d["build_s"].notna()]
    g = ran.groupby("engine")["build_s"]
    out = pd.DataFrame(
        {"rows": g.size(), "build_s": g.sum(), "median_s": g.median(), "max_s": g.max()}
    )
    total = float(out["build_s"].sum())
    out["share_pct"] = 100 * out["build_s"] / total if total > 0 else float("nan")
    out["datasets"] = ran.groupby("engine")["dataset"].agg(lambda s: ", ".join(sorted(set(s))))
    missing = d[d["build_s"].isna()].groupby("engine").size()
    out = out.reindex(out.index.union(missing.index))
    out["unrecorded_rows"] = missing.reindex(out.index).fillna(0).astype(int)
    out["rows"] = out["rows"].fillna(0).astype(int)
    out = out.sort_values("build_s", ascending=False, na_position="last")
    return out.reset_index(names="engine")[list(BUILD_COLUMNS)]
