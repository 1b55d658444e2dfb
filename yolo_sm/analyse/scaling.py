"""Width and precision scaling: data shaping, figures and findings for notebooks 01 and 02.

Notebook 01 (width scaling): throughput and TFLOP/s per width and batch from a sweep, the share
of the fp16 peak, time-weighted occupancy per width and per kernel class from Nsight Compute, and
the wide conv stack's kernel launch configurations and limiters. Notebook 02 (precision): same-run
speed-ups over fp32, the points a partial sweep still lacks, the kernel class mix, registers,
shared memory and occupancy per precision and layout, and the numerical error next to the
tolerances. Every function takes tables and returns a table, a plotly figure or a markdown
string; none shows anything.
"""

from __future__ import annotations

from yolo_sm.analyse.fast import BASELINE
from yolo_sm.analyse.kernels import add_kernel_class, class_shares
from yolo_sm.analyse.weighting import layer_view, same_run_ratio, time_weighted
from yolo_sm.collect import plans as collect
from yolo_sm.collect.sweep import SweepSpec
from yolo_sm.contract import datasets
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.labels import with_config
from yolo_sm.contract.vocab import TOLERANCE, Precision

LIMITS = ("limit_registers", "limit_shared_mem", "limit_warps", "limit_blocks")
MATMUL_CLASSES = ("tensor_core_conv", "simt_conv", "tensor_core_gemm", "simt_gemm")
PRECISION_ORDER = ("fp32", "tf32", "fp16", "bf16")


def _ok(df):
    return df[df["status"] == "ok"] if "status" in df else df


# ---- notebook 01: throughput per width ------------------------------------------------------


def flops_by_width(sweep):
    """GFLOPs per image per width as the sweep recorded them (the channel table's count, 2 FLOPs
    per multiply-add) and their ratio to width 1.0; the input of ``plots.plot_width_flops``."""
    t = sweep.groupby("width", as_index=False).flops_per_img.first()
    t["gflops_per_img"] = t.flops_per_img / 1e9
    base = t.loc[(t.width - 1.0).abs().idxmin()]
    t["flops_vs_width1"] = t.gflops_per_img / base.gflops_per_img
    t["width_sq_vs_width1"] = (t.width / base.width) ** 2
    return t


def throughput_table(sweep, peak_tflops: float):
    """One row per ok sweep point: width, batch, backend, img/s, latency, TFLOP/s and its share
    of ``peak_tflops`` (``peak_frac``)."""
    cols = ["width", "batch", "backend", "precision", "layout", "img_per_s", "median_ms"]
    t = _ok(sweep)[cols + ["iqr_ms", "tflops"]].copy()
    t["peak_frac"] = t.tflops / peak_tflops
    return t.sort_values(["backend", "batch", "width"]).reset_index(drop=True)


# ---- notebook 01: occupancy per width (Nsight Compute) ---------------------------------------


def width_occupancy(ncu):
    """Per config of an ncu table: kernels, GPU time per forward, time-weighted theoretical and
    achieved occupancy, SM coverage and tensor-core time share (``analysis.layer_view``), with
    the config label parsed (width, precision, layout, batch), sorted by width."""

    out = with_config(layer_view(ncu, by=("config",)))
    return out.sort_values(["width", "batch"]).reset_index(drop=True)


def class_occupancy(ncu):
    """Per config and kernel class: kernels, time, share of the config's time and time-weighted
    theoretical / achieved occupancy; config label parsed."""

    k = ncu if "kernel_class" in ncu else add_kernel_class(ncu)
    out = time_weighted(k, ["config", "kernel_class"])
    out["time_share"] = out.time_us / out.groupby("config").time_us.transform("sum")
    return with_config(out).sort_values(["width", "kernel_class"]).reset_index(drop=True)


def speed_vs_occupancy(table, occ, *, batch: int = 8, backend: str = "cudagraph"):
    """Per width at one batch and backend: img/s, TFLOP/s, share of peak, next to the ncu
    capture's time-weighted occupancy, SM coverage and GPU kernel time per forward."""
    t = table[(table.batch == batch) & (table.backend == backend)]
    o = occ[occ.batch == batch] if "batch" in occ else occ
    cols = [
        "width",
        "time_us",
        "theoretical_occupancy_tw_pct",
        "achieved_occupancy_tw_pct",
        "sm_coverage_tw",
        "tensor_core_time_share",
    ]
    out = t[["width", "img_per_s", "median_ms", "tflops", "peak_frac"]].merge(
        o[cols], on="width", how="inner"
    )
    out = out.rename(columns={"time_us": "ncu_kernel_time_us"})
    return out.sort_values("width").reset_index(drop=True)


# ---- notebook 01: the wide conv stack --------------------------------------------------------


def _limiters(row) -> str:
    vals = {c.removeprefix("limit_"): row[c] for c in LIMITS if c in row and row[c] == row[c]}
    if not vals:
        return ""
    low = min(vals.values())
    return " = ".join(k for k, v in vals.items() if v == low)


def wide_stack_table(ncu):
    """The wide conv stack per width and kernel family (kernel class and launch shape: block
    size, registers per thread, shared memory per block): kernels, time and share of the
    config's time, time-weighted theoretical / achieved occupancy and tensor-pipe use, the
    blocks per SM each resource allows (``limit_*``, Nsight Compute), which of them binds
    (``limiter``; ties joined by ``=``), grid size and waves."""

    k = add_kernel_class(ncu) if "kernel_class" not in ncu else ncu
    k = k.assign(
        _w=k.duration_us,
        _th=k.theoretical_occupancy_pct * k.duration_us,
        _ac=k.achieved_occupancy_pct * k.duration_us,
        _tp=k.tensor_pipe_pct * k.duration_us,
    )
    keys = [
        "config",
        "kernel_class",
        "block_size",
        "registers_per_thread",
        "shared_mem_per_block_bytes",
    ]
    g = k.groupby(keys, observed=True)
    out = g.agg(
        kernels=("_w", "size"),
        time_us=("_w", "sum"),
        _th=("_th", "sum"),
        _ac=("_ac", "sum"),
        _tp=("_tp", "sum"),
        grid_min=("grid_size", "min"),
        grid_max=("grid_size", "max"),
        waves_max=("waves_per_sm", "max"),
        **{c: (c, "min") for c in LIMITS},
    ).reset_index()
    out["theoretical_occupancy_tw_pct"] = out._th / out.time_us
    out["achieved_occupancy_tw_pct"] = out._ac / out.time_us
    out["tensor_pipe_tw_pct"] = out._tp / out.time_us
    out["time_share"] = out.time_us / out.groupby("config").time_us.transform("sum")
    out["limiter"] = out.apply(_limiters, axis=1)
    out["shared_mem_kib"] = out.shared_mem_per_block_bytes / 1024
    out["kernel_family"] = (
        out.kernel_class
        + " · "
        + out.block_size.astype(int).astype(str)
        + " thr · "
        + out.registers_per_thread.astype(int).astype(str)
        + " reg · "
        + (out.shared_mem_per_block_bytes / 1024).round(1).astype(str)
        + " KiB"
    )
    out = with_config(out.drop(columns=["_th", "_ac", "_tp"]))
    return out.sort_values(["width", "time_us"], ascending=[True, False]).reset_index(drop=True)


# ---- notebook 02: precision speed-ups and missing points -------------------------------------


def precision_speedup(sweep, *, baseline: str = "fp32"):
    """Same-run latency ratio ``baseline / precision`` (above 1: faster than fp32) per width,
    layout, batch and backend, only where both were measured. ``minutes_apart``: how far apart
    the two points were measured (``prov_date_utc``); a sweep resumed over several device calls
    can pair points of two calls where one call stopped, and a device call lasts at most 10
    minutes, so pairs more than 10 minutes apart come from different calls."""
    import pandas as pd

    index = ["width", "layout", "batch", "backend"]
    r = same_run_ratio(sweep, baseline=baseline, index=tuple(index))
    r = r.dropna(subset=["ratio"]).reset_index(drop=True)
    if "prov_date_utc" in sweep and len(r):
        ok = sweep[sweep["status"] == "ok"] if "status" in sweep else sweep
        t = pd.to_datetime(ok["prov_date_utc"], utc=True, errors="coerce")
        minutes = ok.assign(_m=(t - pd.Timestamp(0, tz="UTC")).dt.total_seconds() / 60)
        wide = minutes.pivot_table(index=index, columns="precision", values="_m", aggfunc="min")
        apart = wide.drop(columns=[baseline]).sub(wide[baseline], axis=0).abs().reset_index()
        apart = apart.melt(id_vars=index, var_name="precision", value_name="minutes_apart")
        r = r.merge(apart, on=[*index, "precision"], how="left")
    return r


def missing_points(sweep, *, step="sweep_precision_core", plan_path=None):
    """The points of plan step ``step`` (``data/plans/h200.yaml``; a list of steps: all their
    points) that ``sweep`` lacks, grouped per precision, layout and backend: the widths and
    batches still to measure, with the step that measures them (``step``)."""
    import pandas as pd

    plan = collect.load_plan(plan_path or datasets.data_dir() / "plans" / "h200.yaml")
    names = [step] if isinstance(step, str) else list(step)
    by_name = {s.name: s for s in plan.steps}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UserError(f"plan {plan.name} has no step {', '.join(unknown)}")
    pts = [
        (n, p)
        for n in names
        for p in SweepSpec.from_mapping({"device": plan.device, **by_name[n].params}).points()
    ]
    have = {
        (r.width, r.precision, r.layout, r.backend, int(r.batch))
        for r in sweep.itertuples(index=False)
    }
    miss = [
        {
            "step": n,
            "precision": p.precision,
            "layout": p.layout,
            "backend": p.backend,
            "width": p.width,
            "batch": p.batch,
        }
        for n, p in pts
        if (p.width, p.precision, p.layout, p.backend, p.batch) not in have
    ]
    cols = ["step", "precision", "layout", "backend", "widths", "batches", "points"]
    if not miss:
        return pd.DataFrame(columns=cols).assign(planned=len(pts))
    m = pd.DataFrame(miss)
    out = (
        m.groupby(["step", "precision", "layout", "backend"], sort=False)
        .agg(
            widths=("width", lambda s: ", ".join(f"{w:g}" for w in sorted(set(s)))),
            batches=("batch", lambda s: ", ".join(str(b) for b in sorted(set(s)))),
            points=("width", "size"),
        )
        .reset_index()
        .groupby(["step", "precision", "layout", "widths", "batches"], sort=False)
        .agg(backend=("backend", " + ".join), points=("points", "sum"))
        .reset_index()
    )
    step_order = {n: i for i, n in enumerate(names)}
    out = _order_configs(out)[cols].sort_values(
        "step", kind="stable", key=lambda c: c.map(step_order)
    )
    out = out.reset_index(drop=True)
    out["planned"] = len(pts)
    return out


# ---- notebook 02: kernels per precision (Nsight Compute) -------------------------------------


def _order_configs(df):
    import pandas as pd

    order = {p: i for i, p in enumerate(PRECISION_ORDER)}
    key = df.precision.map(order).fillna(99) * 10 + (df.layout == "nhwc")
    return df.assign(_k=key).sort_values("_k").drop(columns="_k").pipe(pd.DataFrame)


def precision_forward(ncu):
    """Per config (precision x layout): kernels and GPU kernel time per forward, time-weighted
    theoretical and achieved occupancy, and the time shares of SIMT convolutions, tensor-core
    kernels and layout transforms."""

    k = add_kernel_class(ncu) if "kernel_class" not in ncu else ncu
    out = time_weighted(k, "config").set_index("config")
    t = k.groupby(["config", "kernel_class"]).duration_us.sum().unstack(fill_value=0.0)
    tot = t.sum(axis=1)
    tc = [c for c in t if c.startswith("tensor_core")]
    simt = [c for c in t if c.startswith("simt")]
    out["time_ms"] = out.time_us / 1e3
    hi = k[k.theoretical_occupancy_pct >= 75].groupby("config").duration_us.sum()
    out["high_occupancy_share"] = hi.reindex(out.index, fill_value=0.0) / tot.reindex(out.index)
    out["tensor_core_share"] = t[tc].sum(axis=1) / tot
    out["simt_share"] = t[simt].sum(axis=1) / tot
    lt = t["layout_transform"] if "layout_transform" in t else 0.0
    out["layout_transform_share"] = lt / tot
    out["layout_transform_kernels"] = (
        k[k.kernel_class == "layout_transform"].groupby("config").size()
    ).reindex(out.index, fill_value=0)
    out = with_config(out.reset_index())
    return _order_configs(out).reset_index(drop=True)


def precision_class_shares(ncu):
    """Share of kernel time per kernel class per config (``kernels.class_shares``), configs
    ordered fp32 -> bf16, NCHW before NHWC; ready for ``plots.plot_class_shares(y="config")``."""

    s = with_config(class_shares(ncu, by=["config"]))
    return _order_configs(s).reset_index(drop=True)


def precision_matmul(ncu):
    """Convolution and GEMM kernels per config, class and operand type: kernels, time, and
    time-weighted occupancy, registers per thread and shared memory per block."""

    k = add_kernel_class(ncu) if "kernel_class" not in ncu else ncu
    mm = k[k.kernel_class.isin(MATMUL_CLASSES)]
    out = time_weighted(
        mm,
        ["config", "kernel_class", "kernel_precision"],
        (
            "theoretical_occupancy_pct",
            "achieved_occupancy_pct",
            "registers_per_thread",
            "shared_mem_per_block_bytes",
        ),
    )
    out["shared_mem_per_block_kib_tw"] = out.pop("shared_mem_per_block_bytes_tw") / 1024
    out = with_config(out)
    return _order_configs(out).reset_index(drop=True)


# ---- notebook 02: numerical error --------------------------------------------------------------


def error_table(*sweeps):
    """Per precision and layout over the ok rows of ``sweeps``: points, median and max
    ``rel_err`` (relative L2 of the head output against eager fp32 on the GPU), the precision's
    tolerance (``engines.config.TOLERANCE``) and the headroom ``tolerance / max``."""
    import pandas as pd

    d = pd.concat([_ok(s) for s in sweeps], ignore_index=True)
    out = (
        d.groupby(["precision", "layout"])
        .rel_err.agg(points="size", median="median", max="max")
        .reset_index()
    )
    out["tolerance"] = out.precision.map(lambda p: TOLERANCE[Precision(p)])
    out["headroom"] = out.tolerance / out["max"].where(out["max"] > 0)
    return _order_configs(out).reset_index(drop=True)


def precision_layer_delta(ncu, a: str = "bf16", b: str = "fp16", layout: str = "nhwc"):
    """Per layer of one Nsight Compute forward in precision ``a`` against ``b`` (same layout,
    e.g. ``h200/ncu_precision_w1``): GPU kernel time in each (us), ``delta_us`` = a - b, and the
    kernel classes each ran (``classes_a`` / ``classes_b``, '+'-joined), largest delta first.
    Empty when the table lacks either config."""
    import pandas as pd

    k = with_config(add_kernel_class(ncu) if "kernel_class" not in ncu else ncu)
    k = k[k.layout == layout]
    cols = ["layer", f"{a}_us", f"{b}_us", "delta_us", f"classes_{a}", f"classes_{b}"]
    if not {a, b} <= set(k.precision):
        return pd.DataFrame(columns=cols)
    out = {}
    for prec in (a, b):
        g = k[k.precision == prec].groupby("layer")
        out[f"{prec}_us"] = g.duration_us.sum()
        out[f"classes_{prec}"] = g.kernel_class.agg(lambda c: "+".join(sorted(set(c))))
    t = pd.DataFrame(out).reset_index()
    t["delta_us"] = t[f"{a}_us"].fillna(0.0) - t[f"{b}_us"].fillna(0.0)
    t = t.sort_values("delta_us", ascending=False, key=abs).reset_index(drop=True)
    return t[cols]


# ---- notebook 01: the standard presets (yolov8 / yolo11 n-x) ---------------------------------


def presets_table(sweep, peak_tflops: float):
    """One row per preset point of a presets sweep: family, preset (n/s/m/l/x), its width and
    depth, precision, backend, batch, GFLOPs per image, img/s, TFLOP/s and share of
    ``peak_tflops``; ``status`` and ``message`` say why a point has no figures."""
    cols = ["family", "scale", "width", "depth", "precision", "backend", "batch", "status"]
    extra = [c for c in ("prov_date_utc",) if c in sweep]
    t = sweep[cols + ["message", "flops_per_img", "img_per_s", "median_ms", "tflops", *extra]]
    t = t.copy()
    t["gflops_per_img"] = t.flops_per_img / 1e9
    t["peak_frac"] = t.tflops / peak_tflops
    order = {s: i for i, s in enumerate("nsmlx")}
    t["_o"] = t.scale.map(order)
    t = t.sort_values(["family", "precision", "backend", "batch", "_o"])
    return t.drop(columns=["_o", "flops_per_img"]).reset_index(drop=True)


def measurement_runs(times, gap_minutes: float = 10.0):
    """How many runs (device calls) a table's rows come from: its ``prov_date_utc`` values split
    wherever consecutive rows are more than ``gap_minutes`` apart; (count, first, last) with
    the first and last time as text."""
    import pandas as pd

    t = pd.to_datetime(pd.Series(times), utc=True, errors="coerce").dropna().sort_values()
    if t.empty:
        return 0, "", ""
    runs = int((t.diff().dt.total_seconds() > 60 * gap_minutes).sum()) + 1
    return runs, t.iloc[0].strftime("%Y-%m-%d %H:%M"), t.iloc[-1].strftime("%H:%M UTC")


# ---- notebook 01: torch.compile per width (from the fast-engines bench) ----------------------

COMPILE_VARIANTS = {
    "cudagraph/fp16/nhwc": "CUDA graph",
    "compile/fp16/nhwc": "compile",
    "compile:reduce-overhead/fp16/nhwc": "compile reduce-overhead",
}


def compile_by_width(bench):
    """torch.compile (default mode and reduce-overhead) and a plain CUDA graph of the eager
    model, each over eager fp16 NHWC, per width and batch. From the fast-engines bench
    (``h200/bench_fast_engines``): each ratio is inside one (width, batch) unit, whose variants
    ran one after another in one process. Columns: width, batch, eager img/s, one ratio column
    per variant (img/s over eager; above 1 is faster); a failed variant is an empty cell."""

    ok = _ok(bench)
    ok = ok[ok["scope"] == "model_only"] if "scope" in ok else ok
    base = ok[ok.variant == BASELINE].set_index(["width", "batch"])["img_per_s"]
    eng = ok[ok.variant.isin(list(COMPILE_VARIANTS))]
    wide = eng.pivot_table(index=["width", "batch"], columns="variant", values="vs_baseline")
    wide = wide.reindex(columns=[v for v in COMPILE_VARIANTS if v in wide.columns])
    wide = wide.rename(columns=COMPILE_VARIANTS)
    wide.columns.name = None
    out = wide.join(base.rename("eager_img_per_s"), how="outer").reset_index()
    cols = [
        "width",
        "batch",
        "eager_img_per_s",
        *[c for c in out.columns if c in COMPILE_VARIANTS.values()],
    ]
    return out[cols].sort_values(["batch", "width"]).reset_index(drop=True)


# ---- notebook 02: fp8 numerics, CPU emulation next to the H200 bench's check -----------------

_CHECK_ERROR = r"relative L2 error ([0-9.]+(?:e[-+]?\d+)?)"


def bench_check_errors(bench, variant: str = "cudagraph/fp8/nhwc", min_batch: int = 4):
    """The numerical check of ``variant`` in the fast-engines bench, per width: the relative L2
    error of the head output against eager fp32 on the photos (``rel_err`` of ok rows, read from
    the message of rows that failed the check), its range over the batches of at least
    ``min_batch``, and how many of them failed. The check's input is the four calibration images
    (two photos and their mirror images) repeated to the batch: a smaller batch checks on fewer
    images (batch 1: the bus photo alone), a multiple of four on the same images as
    ``analysis.photo_errors``."""
    import pandas as pd

    b = bench[(bench.variant == variant) & (bench.batch >= min_batch)].copy()
    if b.empty:
        return pd.DataFrame(columns=["width", "gpu_err_min", "gpu_err_max", "failed", "batches"])
    parsed = b.message.fillna("").str.extract(_CHECK_ERROR, expand=False).astype(float)
    b["err"] = b.rel_err.where(b.status == "ok", parsed)
    b = b[b.err.notna()]  # rows that failed otherwise (out of memory, ...) carry no error
    b["over"] = b.status != "ok"
    return (
        b.groupby("width")
        .agg(
            gpu_err_min=("err", "min"),
            gpu_err_max=("err", "max"),
            failed=("over", "sum"),
            batches=("batch", lambda x: ", ".join(f"{v:g}" for v in sorted(set(x)))),
        )
        .reset_index()
    )


def fp8_error_table(cpu_errors, bench=None):
    """Per width: the CPU-measured head-output error (``analysis.photo_errors_by_width``) of
    fp16, bf16 and fp8 on the model as built and with the bench's class prior, and, from
    ``bench``, the H200 fp8 engine's check on the prior model (:func:`bench_check_errors`)."""
    wide = cpu_errors.pivot_table(
        index="width", columns=["class_prior", "precision"], values="rel_err"
    )
    wide.columns = [f"{p}{', class prior' if prior else ''}" for prior, p in wide.columns]
    order = [c for c in ("fp16", "bf16", "fp8") if c in wide]
    order += [c for c in wide.columns if c not in order]
    out = wide[order].reset_index()
    if bench is not None:
        g = bench_check_errors(bench).set_index("width")
        out = out.join(g[["gpu_err_min", "gpu_err_max", "failed", "batches"]], on="width")
        out = out.rename(
            columns={
                "gpu_err_min": "fp8 H200 (class prior), min",
                "gpu_err_max": "fp8 H200 (class prior), max",
                "failed": "H200 batches over tolerance",
                "batches": "H200 batches",
            }
        )
    return out
