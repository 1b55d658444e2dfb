"""Re-measure random points of a shipped sweep with its own settings, and compare.

The datasets issue's check ("re-measuring five random sweep points on the H200 with the same
command lands within 10 % of the shipped figures") as one command::

    yolo-sm remeasure --dataset h200/sweep_fp16_nhwc --points 5 --seed 20261130 \\
        --out remeasure.parquet

Points are drawn among the table's ``ok`` rows with ``pandas.DataFrame.sample`` (a seed makes
the draw reproducible on any machine, so the points can be named before the GPU is). Each is
built and timed through the sweep's own ``run_point`` with the timing settings stored in the
table's metadata (``budget_ms``, ``warmup_ms``; the defaults of ``yolo-sm sweep`` where a table
has none), so only the machine, the moment and the process differ. The output has one row per
point: its key, the shipped and new img/s, ``ratio`` = new / shipped, ``within_10pct``, both
dates and ``launch_bound``: an eager point at batch <= 8, the kind that moved by up to 2x between
two H200 sessions while the others repeated within ~2 % (data/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from yolo_sm.errors import UserError

TOLERANCE = 0.10  # the "within 10 %"


def within_tolerance(ratio):
    """Whether new / shipped is within :data:`TOLERANCE` (a number or a Series)."""
    return abs(ratio - 1) <= TOLERANCE


def launch_bound(backend, batch):
    """An eager point at batch <= 8: its pace is the host's kernel launches (a value or a
    Series each)."""
    return (backend == "eager") & (batch <= 8)


def _timing_settings(name: str) -> dict:
    """``budget_ms`` / ``warmup_ms`` the shipped table was measured with (parquet metadata)."""
    import pyarrow.parquet as pq

    from yolo_sm import data

    path = data.path(name)
    try:
        meta = pq.read_schema(path).metadata or {}
        spec = json.loads(meta.get(b"yolo_sm", b"{}")).get("spec", {})
    except Exception:  # noqa: BLE001 - unreadable metadata: the sweep's defaults
        spec = {}
    return {k: float(spec[k]) for k in ("budget_ms", "warmup_ms") if spec.get(k) is not None}


def pick(df, n: int, seed: int):
    """``n`` random ``ok`` rows of a sweep table (reproducible for a seed), in model order."""
    from yolo_sm.sweep import KEY_COLUMNS

    ok = df[df.status == "ok"]
    if n < 1:
        raise UserError("--points must be at least 1")
    if n > len(ok):
        raise UserError(f"asked for {n} points, the table has {len(ok)} measured (ok) points")
    return ok.sample(n, random_state=seed).sort_values(list(KEY_COLUMNS[:5]), kind="stable")


def remeasure(
    name: str,
    n: int = 5,
    seed: int = 0,
    device: str | None = None,
    out: str | Path | None = None,
    progress: bool = True,
):
    """Re-measure ``n`` random points of sweep dataset ``name``; returns the comparison table
    (written atomically to ``out`` when given). ``device`` overrides the points' device (e.g.
    ``cpu`` for a dry run; the ratios then compare different machines)."""
    import pandas as pd
    from tqdm.auto import tqdm

    from yolo_sm import data
    from yolo_sm.models import model_flops
    from yolo_sm.store import check_output_path, write_atomic
    from yolo_sm.sweep import KEY_COLUMNS, Point, SweepSpec, _build_model, _free, run_point

    entry = data.info(name)
    if entry.get("kind") != "sweep":
        raise UserError(f"{name} is a {entry.get('kind')} dataset; remeasure takes a sweep")
    if out is not None:
        out = check_output_path(Path(out))
    old = data.load(name)
    points = pick(old, n, seed)
    timing = _timing_settings(name)
    rows = []
    bar = tqdm(total=len(points), desc="remeasure", unit="pt", disable=not progress)
    for _, r in points.iterrows():
        key = {c: r[c] for c in KEY_COLUMNS}
        key["scale"] = key["scale"] if isinstance(key["scale"], str) else ""
        if device:
            key["device"] = device
        p = Point(**key)
        spec = SweepSpec(device=p.device, **timing)
        try:
            model = _build_model(p)
            new = run_point(model, p, spec, model_flops(model, p.imgsz))
        except Exception as e:  # noqa: BLE001 - a point that cannot be built is a row
            from yolo_sm.sweep import failure

            new = {**failure(e), "img_per_s": float("nan")}
        finally:
            model = None
            _free(collect=True)
        ratio = new.get("img_per_s", float("nan")) / r["img_per_s"]
        rows.append(
            {
                **{c: r[c] for c in KEY_COLUMNS},
                "device": p.device,
                "shipped_img_per_s": float(r["img_per_s"]),
                "new_img_per_s": float(new.get("img_per_s", float("nan"))),
                "ratio": float(ratio),
                "within_10pct": bool(within_tolerance(ratio)),
                "launch_bound": bool(launch_bound(r["backend"], r["batch"])),
                "status": new.get("status", "ok"),
                "message": new.get("message", ""),
                "shipped_date_utc": r.get("prov_date_utc"),
                "new_date_utc": new.get("prov_date_utc"),
                "new_gpu_name": new.get("prov_gpu_name"),
                "budget_ms": timing.get("budget_ms", SweepSpec.budget_ms),
            }
        )
        bar.update(1)
    bar.close()
    df = pd.DataFrame(rows)
    if out is not None:
        write_atomic(df, out, {"dataset": name, "points": n, "seed": seed})
    return df


def summary(df) -> str:
    """One line: how many points landed within 10 %, and the ratios."""
    ok = df[df.status == "ok"]
    ratios = ", ".join(f"{x:.3f}" for x in ok.ratio)
    return (
        f"{int(ok.within_10pct.sum())} of {len(df)} points within 10 % of the shipped img/s "
        f"(new / shipped: {ratios or 'none measured'})"
    )


def compare(shipped, again):
    """The points two sweep tables share (same :data:`yolo_sm.sweep.KEY_COLUMNS`, ``ok`` in
    both), as :func:`remeasure`'s comparison rows: ``again`` is a later measurement of the same
    points (e.g. the fp16 NHWC rows of ``h200/sweep_bf16_nhwc`` against
    ``h200/sweep_fp16_nhwc``), so every shared point is a re-measure, not only five."""
    from yolo_sm.sweep import KEY_COLUMNS

    keys = [c for c in KEY_COLUMNS if c in shipped and c in again]
    cols = [*keys, "img_per_s", "prov_date_utc"]
    a = shipped[shipped.status == "ok"][cols]
    b = again[again.status == "ok"][cols]
    m = a.merge(b, on=keys, suffixes=("_shipped", "_new"))  # pandas joins missing keys too
    ratio = m.img_per_s_new / m.img_per_s_shipped
    return m[keys].assign(
        shipped_img_per_s=m.img_per_s_shipped,
        new_img_per_s=m.img_per_s_new,
        ratio=ratio,
        within_10pct=within_tolerance(ratio),
        launch_bound=launch_bound(m.backend, m.batch),
        shipped_date_utc=m.prov_date_utc_shipped,
        new_date_utc=m.prov_date_utc_new,
    )


def by_kind(cmp):
    """:func:`compare` (or :func:`remeasure`) rows summarised per backend and launch-bound or
    not: points, how many within 10 %, and the ratio's min / median / max."""
    return (
        cmp.groupby(["backend", "launch_bound"])
        .agg(
            points=("ratio", "size"),
            within_10pct=("within_10pct", "sum"),
            ratio_min=("ratio", "min"),
            ratio_median=("ratio", "median"),
            ratio_max=("ratio", "max"),
        )
        .reset_index()
    )


def plot_compare(cmp, title=None):
    """new / shipped img/s against batch per point, colour by backend, symbol launch-bound;
    the +-10 % band shaded."""
    import plotly.express as px

    from yolo_sm.plots import TEMPLATE

    d = cmp.assign(kind=cmp.launch_bound.map({True: "launch-bound", False: "not launch-bound"}))
    fig = px.scatter(
        d,
        x="batch",
        y="ratio",
        color="backend",
        symbol="kind",
        hover_data=["width", "shipped_img_per_s", "new_img_per_s"],
        log_x=True,
        template=TEMPLATE,
        title=title or "Measured again: new / shipped img/s per point",
    )
    fig.add_hrect(y0=1 - TOLERANCE, y1=1 + TOLERANCE, fillcolor="grey", opacity=0.15, line_width=0)
    fig.update_layout(yaxis_title="new / shipped img/s")
    return fig


def compare_findings(cmp, shipped: str, again: str) -> str:
    """One markdown bullet from :func:`compare`: how many shared points repeat within 10 %,
    per kind (CUDA graph, eager not launch-bound, eager launch-bound), and the time between."""
    import pandas as pd

    if cmp.empty:
        return f"- **Measured again:** {shipped} and {again} share no point."
    t0 = pd.to_datetime(cmp.shipped_date_utc, utc=True)
    t1 = pd.to_datetime(cmp.new_date_utc, utc=True)
    hours = float((t1 - t0).dt.total_seconds().median() / 3600)
    parts = []
    for r in by_kind(cmp).itertuples():
        kind = "CUDA graph" if r.backend == "cudagraph" else r.backend
        if r.backend == "eager":
            kind += " at batch <= 8 (launch-bound)" if r.launch_bound else " from batch 16"
        parts.append(
            f"{kind} {r.within_10pct} of {r.points} ({r.ratio_min:.2f}-{r.ratio_max:.2f}x, "
            f"median {r.ratio_median:.2f})"
        )
    return (
        f"- **Measured again:** {len(cmp)} points of {shipped} were measured again in "
        f"{again} (median {hours:.1f} h later) and land within 10 % as follows: "
        + "; ".join(parts)
        + ". Where the GPU sets the pace the figures repeat; where the host's kernel launches "
        "do, they move between runs (another lease, perhaps another host: tables from session "
        "8's code on record `prov_cpu_model`), so compare those only within one run."
    )
