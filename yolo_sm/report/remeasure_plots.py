"""remeasure_plots: split from collect.remeasure."""

from __future__ import annotations

from yolo_sm.analyse.remeasure import TOLERANCE, by_kind
from yolo_sm.report.colors import TEMPLATE


def plot_compare(cmp, title=None):
    """new / shipped img/s against batch per point, colour by backend, symbol launch-bound;
    the +-10 % band shaded."""
    import plotly.express as px

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
