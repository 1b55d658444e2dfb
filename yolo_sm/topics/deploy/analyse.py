"""Fast engines (notebook 10): the side-by-side bench (``yolo_sm.core.bench``, dataset
``bench_fast_engines``) as tables, and :func:`facts`, the numbers its findings
(:mod:`yolo_sm.topics.deploy.rules`) are decided on. Every function takes a table and
returns a table or a number; none judges.

Ratios are taken inside one (family, width, batch) unit of the bench, whose variants ran one
after another in the same process: batch-1 latencies move by a third between processes.
"""

from __future__ import annotations

from yolo_sm.analyse.bench_table import (
    BASELINE,
    EIGHT_BIT,
    PIPELINE,
    complete_bench,
    engines,
    variant_order,
)
from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.labels import parse_config
from yolo_sm.topics.deploy import compile_cache, frames

BENCH = "bench_fast_engines"


def side_by_side(bench, extra: tuple[str, ...] = ()):
    """One row per (width, batch, variant) in run order: status, img/s, ratio to the baseline,
    p50 / p99 latency, build seconds, then the ``extra`` columns the table has."""
    cols = [
        c
        for c in (
            "family",
            "width",
            "batch",
            "variant",
            "scope",
            "status",
            "img_per_s",
            "vs_baseline",
            "median_ms",
            "p99_ms",
            "build_s",
            *extra,
        )
        if c in bench
    ]
    order = {v: i for i, v in enumerate(variant_order(bench))}
    out = bench[cols].assign(_o=bench["variant"].map(order))
    return out.sort_values(["width", "batch", "_o"]).drop(columns="_o").reset_index(drop=True)


def units(bench):
    """One row per (width, batch) unit: when it was measured (UTC), how many variants ran, and
    the pipeline version its pipeline rows measured (``pinned`` frames, ``nms``
    implementation; empty where the table predates those columns)."""
    import pandas as pd

    b = bench.copy()
    for col in ("pinned", "nms", "prov_date_utc"):
        if col not in b:
            b[col] = pd.NA
    pipe = b[b.variant.str.startswith(PIPELINE)]
    out = b.groupby(["width", "batch"]).agg(
        measured_utc=("prov_date_utc", "min"),
        variants=("variant", "nunique"),
        ok=("status", lambda s: int((s == "ok").sum())),
    )
    out["pipeline_pinned"] = pipe.groupby(["width", "batch"]).pinned.first()
    out["pipeline_nms"] = pipe.groupby(["width", "batch"]).nms.first()
    return out.reset_index()


def side_by_side_wide(table):
    """:func:`side_by_side` as one row per (width, batch) and, per variant, img/s and the ratio
    to the baseline (``x base``); failed variants are empty cells."""
    ok = table[table["status"] == "ok"]
    wide = ok.pivot_table(
        index=["width", "batch"], columns="variant", values=["img_per_s", "vs_baseline"]
    )
    wide = wide.rename(columns={"img_per_s": "img/s", "vs_baseline": "x base"}, level=0)
    wide = wide.swaplevel(0, 1, axis=1)
    order = [v for v in variant_order(table) if v in set(ok["variant"])]
    return wide.reindex(columns=[(v, m) for v in order for m in ("img/s", "x base")])


def failures(bench):
    """The rows that did not run (status oom / error) and why."""
    bad = bench[bench["status"] != "ok"]
    return bad[["width", "batch", "variant", "status", "message"]].reset_index(drop=True)


#: the bench of the fastest engines beside torch.compile's max-autotune modes (its own plan
#: step: a cold autotune takes minutes per width)
AUTOTUNE_DATASET = "bench_autotune"


# ---- 8-bit ------------------------------------------------------------------------------------


def eight_bit_speedup(bench, batch: int = 64, min_width: float = 1.0):
    """Each ok 8-bit engine row (fp8 / int8) at ``batch`` and width >= ``min_width`` against
    the fp16 engine of the same backend (compile mode included) and layout in the same unit:
    ``speedup`` = 8-bit img/s over fp16 img/s."""
    import pandas as pd

    e = engines(bench, baseline=True)
    e = e[(e["batch"] == batch) & (e["width"] >= min_width)]
    eight = e[e["precision"].isin(EIGHT_BIT)]
    rows = []
    for r in eight.itertuples():
        parts = r.variant.split("/")
        fp16 = "/".join([parts[0], "fp16", parts[2]])
        ref = e[(e["width"] == r.width) & (e["variant"] == fp16)]
        if ref.empty:
            continue
        ref_img = float(ref["img_per_s"].iloc[0])
        rows.append(
            {
                "width": r.width,
                "batch": r.batch,
                "variant": r.variant,
                "fp16_variant": fp16,
                "img_per_s": r.img_per_s,
                "fp16_img_per_s": ref_img,
                "speedup": r.img_per_s / ref_img,
            }
        )
    cols = ["width", "batch", "variant", "fp16_variant", "img_per_s", "fp16_img_per_s", "speedup"]
    return pd.DataFrame(rows, columns=cols)


# ---- the best engine per width ------------------------------------------------------------


def best_engine(bench, batch: int, include_8bit: bool = False):
    """Per width at ``batch``: the fastest ok engine (16-bit and wider unless ``include_8bit``)
    with the baseline's latency and img/s (``base_ms``, ``base_img``); indexed by width."""
    e = engines(bench)
    e = e[e["batch"] == batch]
    if not include_8bit:
        e = e[~e["precision"].isin(EIGHT_BIT)]
    if e.empty:
        return e
    best = e.loc[e.groupby("width")["img_per_s"].idxmax()].set_index("width")
    base = engines(bench, baseline=True)
    base = base[(base["batch"] == batch) & (base["variant"] == BASELINE)].set_index("width")
    return best.assign(
        base_ms=base["median_ms"].reindex(best.index),
        base_img=base["img_per_s"].reindex(best.index),
    )


# --- where an engine's GPU time goes (Kineto kernel tables, e.g. trace_fp8_w1_b64) ------------

#: kernel names of the 8-bit engines' activation quantisers (collect.engines.fp8 / int8)
QUANTISERS = ("_quantize", "_quantize_int8")


def _triton(kernels, ops: str):
    """Which rows are Triton kernels whose name matches the regular expression ``ops``."""
    return (kernels.kernel_class == "triton") & kernels.kernel_name.str.contains(ops, regex=True)


PARTS = (  # (part, test on a kernel row), first match wins
    # the 8-bit engines' activation quantisers (Triton): fp8's and int8's
    ("8-bit quantisation", lambda k: k.kernel_name.isin(QUANTISERS)),
    # inductor's generated kernels, each fusing several ops, by the ops it names a kernel after
    # (triton_poi_fused_<op>_<op>...): a pooling window, the int8 quantiser's saturate-and-round
    # (clamp ... trunc), a nearest upsample (_unsafe_index); the rest (bias / SiLU epilogues,
    # adds, concatenations, splits) stays one part. A kernel fusing two of these counts once,
    # in the first.
    ("pooling (Triton)", lambda k: _triton(k, "max_pool")),
    ("8-bit quantisation (Triton)", lambda k: _triton(k, r"clamp.*trunc")),
    ("upsample (Triton)", lambda k: _triton(k, "_unsafe_index")),
    ("fused by torch.compile (Triton)", lambda k: k.kernel_class == "triton"),
    (
        "convolution (tensor cores)",
        lambda k: k.kernel_class.isin(["tensor_core_conv", "simt_conv"]),
    ),
    ("GEMM (1x1 convs)", lambda k: k.kernel_class.isin(["tensor_core_gemm", "simt_gemm"])),
    ("add (bias, residual)", lambda k: k.kernel_name.str.contains("CUDAFunctor_add", regex=False)),
    ("SiLU", lambda k: k.kernel_name.str.contains("silu", case=False, regex=False)),
    ("copy / concat", lambda k: k.kernel_class == "copy_concat"),
    ("pooling / upsample", lambda k: k.kernel_class == "pooling_upsample"),
)


def kernel_parts(kernels):
    """The part (:data:`PARTS`, first match; ``other`` for the rest) of each kernel row, a
    Series named ``part``."""
    import numpy as np
    import pandas as pd

    part = np.full(len(kernels), "other", dtype=object)
    for name, test in reversed(PARTS):  # earlier parts overwrite later ones
        part[np.asarray(test(kernels), dtype=bool)] = name
    return pd.Series(part, index=kernels.index, name="part")


def part_order(parts) -> list[str]:
    """``parts`` in :data:`PARTS` order, ``other`` last."""
    present = set(parts)
    return [p for p, _ in PARTS if p in present] + (["other"] if "other" in present else [])


def time_breakdown(kernels):
    """GPU milliseconds per forward by part (rows, see :data:`PARTS`; the rest is ``other``)
    and config (columns), from a Kineto kernel table with ``iteration`` (forwards) per config;
    a ``total`` row last."""
    k = kernels.assign(part=kernel_parts(kernels))
    forwards = k.groupby("config").iteration.nunique()
    t = k.pivot_table(index="part", columns="config", values="duration_us", aggfunc="sum")
    t = t.fillna(0.0).div(forwards, axis=1) / 1e3
    t = t.loc[part_order(t.index)]
    t.loc["total"] = t.sum()
    return t


CONV_PARTS = ("convolution (tensor cores)", "GEMM (1x1 convs)")


def part_ms(breakdown, config: str, parts) -> float:
    """ms per forward of ``config`` in ``parts`` of a :func:`time_breakdown` (absent parts: 0)."""
    return float(breakdown.loc[breakdown.index.intersection(list(parts)), config].sum())


def compare_backends(tables: dict, config: str):
    """One Kineto kernel table of several engines of the same model config (e.g. eager and
    torch.compile traces of ``yolov8_w1_fp16_nhwc_b64``, shipped as separate datasets), the
    ``config`` column renamed to each table's key, ready for :func:`time_breakdown`."""
    import pandas as pd

    parts = []
    for label, k in tables.items():
        k = k[k.config == config]
        if k.empty:
            raise UserError(f"no kernels of config {config!r} in the {label!r} table")
        parts.append(k.assign(config=label))
    return pd.concat(parts, ignore_index=True)


def kernels_per_forward(kernels):
    """Kernel launches per forward, per config."""
    return kernels.groupby("config").size() / kernels.groupby("config").iteration.nunique()


# ---- facts --------------------------------------------------------------------------------

#: the convolutions' epilogues (bias, SiLU, residual adds): eager's ATen kernels, or the Triton
#: kernels torch.compile fuses them into (with the concatenations and splits beside them)
EPILOGUE = ("add (bias, residual)", "SiLU", "fused by torch.compile (Triton)")
#: the 8-bit activation quantisers: the engines' own kernel, or fused by torch.compile
QUANTISE_PARTS = ("8-bit quantisation", "8-bit quantisation (Triton)")


def bench_facts(bench) -> list[dict]:
    """Facts of a bench table: per batch the median over widths of the best 16-bit engine's
    img/s over the baseline's, and the rows that did not run. Its pipeline rows are facts of
    :mod:`yolo_sm.topics.deploy.frames`."""
    d = (BENCH,)
    rows = []
    for b in sorted(engines(bench, baseline=True)["batch"].unique()):
        best = best_engine(bench, b)
        if len(best):
            speed = (best["img_per_s"] / best["base_img"]).median()
            rows.append(
                fact(
                    "fast.best16_img_per_s_over_baseline_median",
                    speed,
                    "x",
                    scope=f"batch={int(b)}",
                    datasets=d,
                )
            )
    not_run = int((bench["status"] != "ok").sum())
    rows.append(fact("fast.rows_not_run", not_run, "rows", datasets=d, points=len(bench)))
    return rows


def config_of(configs, precision: str) -> str | None:
    """The first config label of ``configs`` in ``precision`` (labels that are not config
    labels are skipped), or None."""
    return next(
        (c for c in configs if parse_config(c, strict=False)["precision"] == precision), None
    )


def fp8_trace_facts(kernels) -> list[dict]:
    """Facts of a Kineto table holding an fp16 and an fp8 engine of one config: the fp8
    forward's GPU time over the fp16 one's, and the fp8 convolutions with their remaining adds
    and quantisation passes over the fp16 convolutions with their bias-add and SiLU kernels."""
    cfgs = list(kernels["config"].unique())
    fp16, fp8 = config_of(cfgs, "fp16"), config_of(cfgs, "fp8")
    if fp16 is None or fp8 is None:
        return []
    b = time_breakdown(kernels)
    d = ("trace_fp8_w1_b64",)
    c16 = part_ms(b, fp16, CONV_PARTS) + part_ms(b, fp16, EPILOGUE)
    c8 = part_ms(b, fp8, CONV_PARTS) + part_ms(b, fp8, EPILOGUE)
    q8 = part_ms(b, fp8, QUANTISE_PARTS)
    return [
        fact(
            "fast.fp8_conv_with_quantise_over_fp16_conv",
            (c8 + q8) / c16,
            "x",
            datasets=d,
            note=f"fp8 {c8:.1f} ms + {q8:.1f} ms quantising; fp16 {c16:.1f} ms",
        ),
    ]


def compile_trace_facts(both, eager: str = "eager", compiled: str = "compile") -> list[dict]:
    """Facts of :func:`compare_backends` of an eager and a torch.compile engine: the share (%)
    of the GPU time compile saves that comes from the convolutions, the time outside them and
    the kernel launches per forward, compiled over eager."""
    b = time_breakdown(both)
    n = kernels_per_forward(both)
    d = ("trace_fp8_w1_b64", "trace_compile_w1_b64")
    c_e, c_c = part_ms(b, eager, CONV_PARTS), part_ms(b, compiled, CONV_PARTS)
    t_e, t_c = float(b.loc["total", eager]), float(b.loc["total", compiled])
    saved = t_e - t_c
    return [
        fact(
            "fast.compile_saving_from_convolutions_pct",
            (c_e - c_c) / saved * 100 if saved else float("nan"),
            "%",
            datasets=d,
            note=f"{t_e:.1f} -> {t_c:.1f} ms per forward",
        ),
        fact("fast.compile_rest_over_eager", (t_c - c_c) / (t_e - c_e), "x", datasets=d),
        fact(
            "fast.compile_launches_over_eager",
            n[compiled] / n[eager],
            "x",
            datasets=d,
            note=f"{n[eager]:.0f} -> {n[compiled]:.0f} kernels per forward",
        ),
    ]


#: Kineto tables of torch.compile'd engines (fp16, and int8 beside fp16) whose pooling share
#: :func:`pool_share_facts` reads
COMPILED_TRACES = ("trace_compile_w1_b64", "trace_int8_compile_b64")
POOLING = ("pooling (Triton)",)


def pool_share_facts(traces: dict) -> list[dict]:
    """Of Kineto tables of compiled engines (name -> table): the largest share (%) of a
    forward's GPU time that inductor's max-pool kernels take (:data:`PARTS`' ``pooling
    (Triton)``: in a YOLOv8, SPPF's three pools with what inductor fused into them) over every
    config of every table (``fast.compiled_pool_share_max_pct``), each config's in the note."""
    shares = {}
    for name, kernels in traces.items():
        b = time_breakdown(kernels)
        for cfg in b.columns:
            total = float(b.loc["total", cfg])
            if total > 0:
                shares[f"{name}: {cfg}"] = part_ms(b, cfg, POOLING) / total * 100
    if not shares:
        return []
    worst = max(shares, key=shares.get)
    each = "; ".join(f"{c} {v:.1f} %" for c, v in shares.items())
    return [
        fact(
            "fast.compiled_pool_share_max_pct",
            shares[worst],
            "%",
            datasets=tuple(traces),
            note=f"largest in {worst}; {each}",
        )
    ]


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    fast.best16_img_per_s_over_baseline fast.best16_img_per_s_over_baseline_median
    fast.best16_latency_over_baseline fast.best16_tflops_over_fp16_peak
    fast.best_over_max_autotune fast.cold_over_warm_compile fast.compile_launches_over_eager
    fast.compile_saving_from_convolutions_pct fast.compiled_pool_share_max_pct
    fast.fastest_warm_build_s fast.fp8_conv_with_quantise_over_fp16_conv
    fast.max_autotune_gap_over_iqr
    fast.pipeline_engine_over_fastest_max fast.pipeline_graph_over_full_median
    fast.pipeline_graph_over_full_min fast.pipeline_over_fastest_model_only
    fast.pipeline_over_model_only fast.pipeline_over_own_engine_median
    fast.pipeline_over_predict fast.pipeline_over_predict_median fast.probe_1_over_3_streams
    fast.probe_compiled_stages_over_eager fast.probe_engine_share_pct fast.rows_not_run
    fast.usable_8bit_over_fp16 fast.warm_compile_s
    """.split()
)


def facts(root: DataRoot):
    """The fast-engines facts of ``root`` (keys ``fast.*``): from ``bench_fast_engines``, the
    fp8 and compile traces, the frames-to-boxes pipelines of every bench that ran one and the
    pipeline probes (:mod:`yolo_sm.topics.deploy.frames`), and the cold and warm compile builds
    (:mod:`yolo_sm.topics.deploy.compile_cache`), each where the root holds it. A bench's units that
    lack an engine its plan step names are left out
    (:func:`yolo_sm.analyse.bench_table.complete_bench`): they do not know their fastest
    engine."""
    import math

    rows = []
    if root.has(BENCH):
        rows += bench_facts(complete_bench(root, BENCH))
    compiled = {d: root.load(d) for d in COMPILED_TRACES if root.has(d)}
    if root.has("trace_fp8_w1_b64"):
        fp8 = root.load("trace_fp8_w1_b64")
        rows += fp8_trace_facts(fp8)
        fp16 = config_of(fp8["config"].unique(), "fp16")
        if fp16 and "trace_compile_w1_b64" in compiled:
            both = compare_backends(
                {"eager": fp8, "compile": compiled["trace_compile_w1_b64"]}, fp16
            )
            rows += compile_trace_facts(both)
    rows += pool_share_facts(compiled)
    benches = {d: complete_bench(root, d) for d in frames.PIPELINE_DATASETS if root.has(d)}
    rows += frames.pipeline_facts(benches)
    rows += frames.mode_facts(benches)
    rows += frames.probe_facts({n: root.load(n) for n in root.find_all("probe")})
    if root.has(compile_cache.DATASET):
        rows += compile_cache.cache_facts(root.load(compile_cache.DATASET))
    return facts_table(r for r in rows if not math.isnan(r["value"]))
