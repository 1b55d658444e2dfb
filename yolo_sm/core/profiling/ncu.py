"""Nsight Compute: run ``ncu`` on NVTX-scoped forwards; load ``--csv`` output (raw or details
page, log preamble allowed) or a ``.ncu-rep`` (via ``ncu_report``) into one row per kernel.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path

from yolo_sm.contract.errors import NotAvailableError, UserError, need, refuse_malformed
from yolo_sm.contract.store import atomic_file, temp_path
from yolo_sm.core.environment import find_ncu
from yolo_sm.core.profiling.nvtx import FORWARD_RANGE, parse_range

# Named metric sets. "occupancy" needs one replay pass (launch statistics are free; duration and
# warps-active are one pass together): seen on the H200 at 24-44 s for five to six forwards.
METRIC_SETS = {
    "occupancy": (
        "launch__block_size",
        "launch__grid_size",
        "launch__registers_per_thread",
        "launch__shared_mem_per_block_static",
        "launch__shared_mem_per_block_dynamic",
        "launch__occupancy_limit_registers",
        "launch__occupancy_limit_shared_mem",
        "launch__occupancy_limit_warps",
        "launch__occupancy_limit_blocks",
        "sm__maximum_warps_per_active_cycle_pct",
        "launch__waves_per_multiprocessor",
        "launch__shared_mem_config_size",
        "gpu__time_duration.sum",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
    ),
    "throughput": (
        "gpu__time_duration.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    ),
}
METRIC_SETS["full"] = tuple(dict.fromkeys(METRIC_SETS["occupancy"] + METRIC_SETS["throughput"]))

# why warps wait (warps stalled per issue cycle, per reason), spills, threads per instruction,
# L1/L2 hit rates
STALL_REASONS = tuple(
    "barrier branch_resolving dispatch_stall drain imc_miss lg_throttle long_scoreboard "
    "math_pipe_throttle membar mio_throttle misc no_instruction not_selected selected "
    "short_scoreboard sleeping tex_throttle wait".split()
)
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
METRIC_SETS["stalls"] = (
    "gpu__time_duration.sum",
    "launch__grid_size",
    "launch__block_size",
    "launch__registers_per_thread",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
    "smsp__thread_inst_executed_per_inst_executed.ratio",
    "l1tex__t_sector_hit_rate.pct",
    "lts__t_sector_hit_rate.pct",
    *(STALL_METRIC.format(r) for r in STALL_REASONS),
)

# ncu metric -> tidy column (unit in the name)
COLUMNS = {
    "gpu__time_duration.sum": "duration_ns",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical_occupancy_pct",
    "launch__registers_per_thread": "registers_per_thread",
    "launch__shared_mem_per_block_static": "shared_mem_static_bytes",
    "launch__shared_mem_per_block_dynamic": "shared_mem_dynamic_bytes",
    "launch__shared_mem_config_size": "shared_mem_config_bytes",
    "launch__block_size": "block_size",
    "launch__grid_size": "grid_size",
    "launch__waves_per_multiprocessor": "waves_per_sm",
    "launch__occupancy_limit_registers": "limit_registers",
    "launch__occupancy_limit_shared_mem": "limit_shared_mem",
    "launch__occupancy_limit_warps": "limit_warps",
    "launch__occupancy_limit_blocks": "limit_blocks",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor_pipe_pct",
    "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue_active_pct",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum": "local_load_sectors",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum": "local_store_sectors",
    "smsp__thread_inst_executed_per_inst_executed.ratio": "threads_per_instruction",
    "l1tex__t_sector_hit_rate.pct": "l1_hit_rate_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_rate_pct",
    **{STALL_METRIC.format(r): f"stall_{r}_cycles" for r in STALL_REASONS},
}
UNIT_SCALE = {  # to ns, bytes and sectors; the report module spells units out (nsecond...)
    **dict.fromkeys(("ns", "nsecond", "byte", "sector"), 1),
    **dict.fromkeys(("us", "usecond", "Kbyte", "KB", "Ksector"), 1e3),
    **dict.fromkeys(("ms", "msecond", "Mbyte", "MB", "Msector"), 1e6),
    **dict.fromkeys(("s", "second", "Gsector"), 1e9),
    "KiB": 1024,
}
_NVTX_RANGE = re.compile(r"<default domain>:([^:\"]+):")
PERM_HELP = (
    "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): an administrator must "
    "allow it, e.g. load the nvidia module with NVreg_RestrictProfilingToAdminUsers=0 (see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM), or run as root"
)


def _ncu() -> str:
    ncu = find_ncu()
    if ncu is None:
        raise NotAvailableError("ncu (Nsight Compute) was not found: install it or set YOLO_SM_NCU")
    return ncu


def report_path(out_csv: str | os.PathLike) -> Path:
    """The ``.ncu-rep`` beside ``out_csv`` (``n.csv``, ``n.ncu.csv`` -> ``n.ncu-rep``; kept
    gzipped as ``.gz`` by :func:`profile`)."""
    out_csv = Path(out_csv)
    stem = out_csv.name.removesuffix(".csv").removesuffix(".ncu")
    return out_csv.with_name(f"{stem}.ncu-rep")


def command(
    target: list[str],
    out_csv: str | os.PathLike,
    metric_set: str = "occupancy",
    nvtx_include: str = "profiled_forward/",
    clock_control: str = "none",
    report: str | os.PathLike | None = None,
    kernel_regex: str | None = None,
) -> list[str]:
    """The ncu command line profiling ``target`` into ``out_csv`` (raw page), optionally a
    ``report`` (.ncu-rep) and only kernels matching ``kernel_regex``."""
    if metric_set not in METRIC_SETS:
        raise UserError(
            f"unknown metric set {metric_set!r}: choose one of {', '.join(METRIC_SETS)}"
        )
    cmd = [_ncu(), "--clock-control", clock_control, "--metrics", ",".join(METRIC_SETS[metric_set])]
    cmd += ["--csv", "--page", "raw", "--log-file", str(out_csv)]
    if report is not None:
        cmd += ["--export", str(report), "--force-overwrite"]
    if nvtx_include:
        cmd += ["--nvtx", "--nvtx-include", nvtx_include]
    if kernel_regex:
        try:
            re.compile(kernel_regex)
        except re.error as e:
            msg = f"kernel regex {kernel_regex!r} is not a regular expression ({e})"
            raise UserError(msg) from None
        cmd += ["--kernel-name-base", "demangled", "--kernel-name", f"regex:{kernel_regex}"]
    return cmd + list(target)


def _print_report(report: str | os.PathLike, timeout_s: float = 600) -> str:
    """A report's raw page as CSV text (``ncu --import``; no profiling)."""
    cmd = [_ncu(), "--import", str(report), "--csv", "--page", "raw"]
    try:
        printed = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise UserError(f"ncu --import {report} did not finish within {timeout_s:g} s") from None
    if printed.returncode != 0:
        tail = " ".join((printed.stderr or printed.stdout).strip().splitlines()[-1:])
        raise UserError(f"{report} is not a readable Nsight Compute report ({tail})")
    return printed.stdout


def profile(
    target: list[str],
    out_csv: str | os.PathLike,
    metric_set: str = "occupancy",
    nvtx_include: str = "profiled_forward/",
    timeout_s: float = 600,
    report: str | os.PathLike | None = None,
    kernel_regex: str | None = None,
):
    """Run ``target`` argv under ncu (CSV and gzipped ``.ncu-rep`` written atomically) and
    return :func:`load_ncu` of it."""
    out_csv = Path(out_csv)
    report = Path(report) if report is not None else report_path(out_csv)
    # no ncu, an unknown set or a bad regex: one sentence, no file made
    command(target, out_csv, metric_set, nvtx_include, kernel_regex=kernel_regex)
    tmp = temp_path(out_csv)  # unique names, created exclusively: no planted link is followed
    tmp_rep = temp_path(report.with_name(report.name.removesuffix(".ncu-rep")), ".ncu-rep")
    cmd = command(target, tmp, metric_set, nvtx_include, report=tmp_rep, kernel_regex=kernel_regex)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        text = tmp.read_text(errors="replace") if tmp.exists() else ""
        if "ERR_NVGPUCTRPERM" in proc.stdout + proc.stderr + text:
            raise NotAvailableError(PERM_HELP)
        if proc.returncode != 0 or not (_written(tmp) or _written(tmp_rep)):
            tail = " ".join((proc.stderr or proc.stdout).strip().splitlines()[-1:])
            raise UserError(f"ncu failed with exit code {proc.returncode}: {tail}")
        if _written(tmp_rep):
            if not any(line.startswith('"') for line in text.splitlines()):  # no CSV rows
                tmp.write_text(_print_report(tmp_rep, timeout_s))
            # kept gzip-compressed (gunzip it for the Nsight Compute GUI)
            with open(tmp_rep, "rb") as src, atomic_file(f"{report}.gz", "wb") as raw:
                with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(tmp, out_csv)
    except subprocess.TimeoutExpired:
        raise UserError(
            f"ncu did not finish within {timeout_s:g} s; profile fewer forwards or "
            "raise the timeout"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)
        tmp_rep.unlink(missing_ok=True)
    return load_ncu(out_csv)


def _written(path: Path) -> bool:
    """Whether ncu wrote into ``path`` (created empty beforehand)."""
    return path.exists() and path.stat().st_size > 0


@refuse_malformed(
    "an Nsight Compute table", "a column is missing or holds a value of the wrong kind"
)
def load_ncu(path: str | os.PathLike, long: bool = False):
    """One row per kernel (ids, NVTX range and path, duration_us, occupancies, launch config,
    ``limit_*``, throughputs); ``long=True``: one row per (kernel, metric) with value, unit."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path} does not exist")
    if path.suffix == ".ncu-rep":  # ncu_report's IMetric.unit() crashed on Nsight 2025.3
        long_df = _parse_csv(_print_report(path), path) if find_ncu() else _load_report(path)
    else:
        long_df = _parse_csv(path.read_text(errors="replace"), path)
    return long_df if long else _wide(long_df)


def _parse_csv(text: str, path: Path):
    import pandas as pd

    if "ERR_NVGPUCTRPERM" in text:
        raise NotAvailableError(PERM_HELP)
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        raise UserError(f"{path} holds no ncu CSV rows (was the range empty, or the run killed?)")
    try:
        rows = list(csv.reader(io.StringIO("\n".join(lines))))
    except csv.Error as e:
        raise UserError(f"{path} is not a readable ncu CSV ({e})") from None
    header = rows[0]
    if any(len(r) != len(header) for r in rows[1:]):
        raise UserError(f"{path} is truncated or corrupt: rows differ in length from its header")
    if "Metric Name" in header:  # --page details: long already
        df = pd.DataFrame(rows[1:], columns=header)
        df = df.rename(
            columns={"Metric Name": "metric", "Metric Unit": "unit", "Metric Value": "value"}
        )
        ident = [c for c in ("ID", "Kernel Name", _nvtx_col(header)) if c]
        return _tidy_long(df[ident + ["metric", "unit", "value"]])
    if len(rows) < 3:
        raise UserError(f"{path} has a header but no kernel rows")
    units = dict(zip(header, rows[1], strict=True))
    df = pd.DataFrame(rows[2:], columns=header)
    ident = [c for c in ("ID", "Kernel Name", _nvtx_col(header)) if c]
    metrics = [c for c in header if "__" in c]
    long_df = df.melt(id_vars=ident, value_vars=metrics, var_name="metric", value_name="value")
    long_df["unit"] = long_df["metric"].map(units)
    return _tidy_long(long_df)


def _nvtx_col(header) -> str | None:
    return next((c for c in header if "Push/Pop_Range" in c), None)


def _tidy_long(df):
    import pandas as pd

    nv = _nvtx_col(df.columns)
    out = pd.DataFrame(
        {
            "kernel_id": pd.to_numeric(df["ID"]).astype(int),
            "kernel_name": df["Kernel Name"],
            "nvtx_path": df[nv].map(lambda c: "/".join(_NVTX_RANGE.findall(str(c)))) if nv else "",
            "metric": df["metric"],
            "unit": df["unit"].fillna(""),
            "value_text": df["value"],
        }
    )
    out["value"] = pd.to_numeric(out["value_text"].str.replace(",", ""), errors="coerce")
    return out


def _wide(long_df):
    import pandas as pd

    keep = long_df[long_df.metric.isin(COLUMNS)].copy()
    keep["value"] = keep.apply(lambda r: r.value * UNIT_SCALE.get(r.unit, 1), axis=1)
    ident = ["kernel_id", "kernel_name", "nvtx_path"]
    wide = keep.pivot_table(index=ident, columns="metric", values="value", aggfunc="first")
    # a kernel whose metrics all read n/a is kept, its values NaN, and counted (never dropped)
    kernels = pd.MultiIndex.from_frame(long_df[ident].drop_duplicates())
    blank = len(kernels.difference(wide.index))
    wide = wide.reindex(kernels).reset_index()
    wide.columns.name = None
    if blank:
        warnings.warn(
            f"{blank} kernel(s) of the ncu output have no numeric metric (n/a): kept with "
            "empty values (the table's attrs['kernels_without_metrics'])",
            stacklevel=3,
        )
    wide = wide.rename(columns=COLUMNS)
    if "duration_ns" in wide:
        wide["duration_us"] = wide.pop("duration_ns") / 1e3
    if {"shared_mem_static_bytes", "shared_mem_dynamic_bytes"} <= set(wide.columns):
        wide["shared_mem_per_block_bytes"] = (
            wide.shared_mem_static_bytes + wide.shared_mem_dynamic_bytes
        )
    if "threads_per_instruction" in wide:
        wide["warp_execution_efficiency_pct"] = wide.threads_per_instruction / 32 * 100  # 32 a warp
    parts = wide.nvtx_path.str.split("/")
    wide["nvtx_range"] = parts.str[-1]
    # config: the range under profiled_forward; layer, module_type, stage: the layer range's
    wide["config"] = [
        p[1] if len(p) > 1 and p[0] == FORWARD_RANGE and parse_range(p[1]) is None else ""
        for p in parts
    ]
    parsed = [parse_range(p[-1]) or {} for p in parts]
    for key in ("layer", "module_type", "stage"):
        wide[key] = [d.get(key, "") for d in parsed]
    counts = "block_size grid_size registers_per_thread limit_registers limit_shared_mem"
    for c in (*counts.split(), "limit_warps", "limit_blocks"):
        if c in wide:
            wide[c] = wide[c].astype("Int64")
    wide = wide.sort_values("kernel_id", ignore_index=True).pipe(pd.DataFrame)
    wide.attrs["kernels_without_metrics"] = blank
    return wide


def _load_report(path: Path):
    """Long table of a ``.ncu-rep`` through Nsight Compute's ``ncu_report`` module (NVTX path:
    the default domain's push/pop ranges)."""
    import pandas as pd

    ncu_report = need(
        "ncu_report",
        "reading .ncu-rep needs ncu on PATH (or YOLO_SM_NCU) or Nsight Compute's ncu_report "
        "module (the ncu extra); or export CSV: ncu --import FILE --csv --page raw",
    )
    try:
        ctx = ncu_report.load_report(str(path))
    except Exception as e:  # noqa: BLE001
        raise UserError(f"{path} is not a readable Nsight Compute report ({e})") from None
    rows, kid = [], 0
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            act = rng.action_by_idx(a)
            nvtx = _report_nvtx_path(act.nvtx_state())
            for name in act.metric_names():
                m = act.metric_by_name(name)
                if m is None:
                    continue
                value = m.as_string() if m.kind() == m.ValueKind_STRING else m.as_double()
                rows.append(
                    {
                        "ID": kid,
                        "Kernel Name": act.name(),
                        "nvtx": nvtx,
                        "metric": name,
                        "unit": m.unit() or "",
                        "value": "" if value is None else str(value),
                    }
                )
            kid += 1
    if not rows:
        raise UserError(f"{path} holds no profiled kernels (was the NVTX range empty?)")
    df = pd.DataFrame(rows)
    out = _tidy_long(df)
    out["nvtx_path"] = df["nvtx"]
    return out


def _report_nvtx_path(state) -> str:
    """``a/b/c`` from an action's NVTX state: the push/pop ranges of the default domain (the
    one ``torch.cuda.nvtx`` writes to), else of every domain."""
    if not state:
        return ""
    domains = [state.domain_by_id(d) for d in state.domains()]
    default = [d for d in domains if (d.name() or "") in ("", "<default domain>")]
    return "/".join(r for d in default or domains for r in d.push_pop_ranges())
