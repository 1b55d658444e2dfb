"""One quantity, two numbers: where two datasets of a root measure the same thing, the two
values side by side with what differs between them, so a reader sees why they disagree.

- the CUDA graph's batch-1 speed-up over eager in the width sweep and in the fast-engines bench
  (two processes: which latency moved, eager's or the graph's);
- eager memory per image in the first sweep and in its repeat (two runs of the same points).

Each function returns a DataFrame; ``*_ratio`` columns are second over first, latencies in ms,
memory in MB (10^6 bytes).
"""

from __future__ import annotations

import pandas as pd

from yolo_sm.topics.batch.analyse import batch_table, memory_fit

GRAPH, EAGER = "cudagraph/fp16/nhwc", "eager/fp16/nhwc"


def _version(df) -> str:
    v = df["prov_yolo_sm"].dropna() if "prov_yolo_sm" in df else []
    return str(v.iloc[0]) if len(v) else ""


def graph_speedup_sweep_vs_bench(sweep, bench, batch: int = 1) -> pd.DataFrame:
    """Per width both hold at ``batch``: eager and CUDA-graph median latency and the speed-up
    (eager / graph) in the fp16 NHWC ``sweep`` and in the ``bench`` unit, the bench's over the
    sweep's latency for each backend (``eager_ratio``, ``graph_ratio``), and ``moved``: the
    backend whose latency differs more between the two processes."""
    s = sweep[(sweep.status == "ok") & (sweep.batch == batch)]
    if "precision" in s:
        s = s[(s.precision == "fp16") & (s.layout == "nhwc")]
    sw = s.pivot_table(index="width", columns="backend", values="median_ms")
    b = bench[(bench.status == "ok") & (bench.batch == batch)]
    bw = b.pivot_table(index="width", columns="variant", values="median_ms")
    if not {"eager", "cudagraph"} <= set(sw) or not {EAGER, GRAPH} <= set(bw):
        return pd.DataFrame()
    widths = sw.index.intersection(bw.index)
    out = pd.DataFrame(
        {
            "sweep_eager_ms": sw.loc[widths, "eager"],
            "sweep_graph_ms": sw.loc[widths, "cudagraph"],
            "bench_eager_ms": bw.loc[widths, EAGER],
            "bench_graph_ms": bw.loc[widths, GRAPH],
        }
    )
    out["sweep_speedup"] = out.sweep_eager_ms / out.sweep_graph_ms
    out["bench_speedup"] = out.bench_eager_ms / out.bench_graph_ms
    out["eager_ratio"] = out.bench_eager_ms / out.sweep_eager_ms
    out["graph_ratio"] = out.bench_graph_ms / out.sweep_graph_ms
    dev = lambda r: (r - 1).abs()  # noqa: E731
    out["moved"] = ["eager" if e >= g else "graph" for e, g in
                    zip(dev(out.eager_ratio), dev(out.graph_ratio), strict=True)]  # fmt: skip
    return out.reset_index()


def eager_memory_between_runs(first, again, imgsz: int = 640) -> pd.DataFrame:
    """Per width: eager memory per image (MB, the slope of
    :func:`yolo_sm.topics.batch.analyse.memory_fit`) in ``first`` and in ``again`` (the same points
    measured in a later run, ``again``'s rows of ``first``'s precisions), the batches each
    fitted, the ratio, and each run's first date and package version."""
    again = again[again.precision.isin(first.precision.unique())]
    fits = []
    for df in (first, again):
        f = memory_fit(batch_table(df))
        fits.append(f[(f.backend == "eager") & (f.imgsz == imgsz)].set_index("width"))
    a, b = fits
    widths = a.index.intersection(b.index)
    out = pd.DataFrame(
        {
            "first_per_image_MB": a.loc[widths, "per_image_bytes"] / 1e6,
            "again_per_image_MB": b.loc[widths, "per_image_bytes"] / 1e6,
            "first_batches": a.loc[widths, "batches"],
            "again_batches": b.loc[widths, "batches"],
        }
    )
    out["ratio"] = out.again_per_image_MB / out.first_per_image_MB
    out["first_measured_utc"] = str(first.prov_date_utc.min())[:16]
    out["again_measured_utc"] = str(again.prov_date_utc.min())[:16]
    out["first_version"], out["again_version"] = _version(first), _version(again)
    return out.reset_index()


def eager_memory_by_batch(first, again, width: float, imgsz: int = 640) -> pd.DataFrame:
    """Eager peak memory per batch at one ``width`` in both runs (MB) and their difference:
    where two fitted slopes part, the batches whose peaks part."""
    rows = []
    for name, df in (("first", first), ("again", again)):
        t = batch_table(df[df.precision.isin(first.precision.unique())])
        t = t[(t.backend == "eager") & (t.width == width) & (t.imgsz == imgsz)]
        rows.append(t.set_index("batch").peak_mem_bytes.rename(f"{name}_peak_MB") / 1e6)
    out = pd.concat(rows, axis=1).dropna()
    out["difference_MB"] = out.again_peak_MB - out.first_peak_MB
    return out.reset_index()
