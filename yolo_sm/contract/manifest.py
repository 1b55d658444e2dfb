"""A root's ``manifest.json``: :func:`register` adds a dataset with its kind, description, the
command that made it and the provenance read from its rows' ``prov_*`` columns."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from pathlib import Path

from yolo_sm.contract.schema import SCHEMAS, validate

PROVENANCE_FIELDS = (
    "gpu_name",
    "sm_count",
    "compute_capability",
    "driver",
    "cuda",
    "torch",
    "cudnn",
    "ultralytics",
    "python",
    "sm_clock_max_mhz",
    "yolo_sm_source",  # digest of the package source that measured (absent in older tables)
    "cpu_model",
    "gpu_uuid",  # which physical GPU (NVML's UUID; absent in older tables)
)


def provenance_from_rows(df) -> dict:
    """Provenance of a sweep-like table from its ``prov_*`` columns (unique values), plus the
    first and last UTC timestamps."""
    prov = {}
    for f in PROVENANCE_FIELDS:
        col = f"prov_{f}"
        if col in df:
            vals = sorted({str(v) for v in df[col].dropna()})
            if vals:  # a field no row records (a CPU's gpu_name) is left out
                prov[f] = vals[0] if len(vals) == 1 else vals
    if "prov_date_utc" in df and df["prov_date_utc"].notna().any():
        prov["date_utc_first"] = str(df["prov_date_utc"].min())
        prov["date_utc_last"] = str(df["prov_date_utc"].max())
    if "prov_sm_clock_start_mhz" in df and df["prov_sm_clock_start_mhz"].notna().any():
        prov["sm_clock_start_mhz_range"] = [
            float(df.prov_sm_clock_start_mhz.min()),
            float(df.prov_sm_clock_start_mhz.max()),
        ]
    return prov


#: what a root's ``machine`` entry records, from its datasets' provenance
MACHINE_KEYS = ("gpu_uuid", "gpu_name", "sm_count", "driver", "cpu_model")


def machine_of(datasets: dict) -> dict:
    """The machine a root's datasets describe: per field of :data:`MACHINE_KEYS`, the sorted
    distinct values of the datasets measured on a GPU (all datasets where none was), so a root
    measured on two GPUs says so (two ``gpu_uuid`` values). Written as the manifest's
    ``machine`` entry by :func:`register`."""
    provs = [d.get("provenance", {}) for d in datasets.values()]
    provs = [p for p in provs if p.get("gpu_name")] or provs
    out = {}
    for key in MACHINE_KEYS:
        vals = set()
        for p in provs:
            v = p.get(key)
            vals.update(str(x) for x in (v if isinstance(v, list) else [v]) if x not in (None, ""))
        if vals:
            out[key] = sorted(vals)
    return out


def register(
    folder: str | os.PathLike,
    name: str,
    file: str,
    kind: str,
    description: str,
    command: str,
    params: dict | None = None,
) -> dict:
    """Add or replace dataset ``name`` in ``folder/manifest.json`` (written atomically);
    ``params``: the plan step's parameters that made it (``collect`` compares them with the
    plan's to notice an edited step).

    Safe for concurrent writers (several collection commands registering into one folder):
    the read-modify-write of the manifest holds an exclusive lock (``fcntl.flock``) on
    ``.manifest.json.lock`` beside it, and each writer writes its own temporary file before
    the rename, so no entry is lost and no reader sees half a manifest."""
    import pandas as pd

    folder = Path(folder)
    df = validate(pd.read_parquet(folder / file), kind, name)
    entry = {
        "file": file,
        "kind": kind,
        "rows": len(df),
        "description": description,
        "command": command,
        "provenance": provenance_from_rows(df),
        "columns": {c: SCHEMAS[kind].get(c, "") for c in df.columns if not c.startswith("prov_")},
    }
    if params is not None:
        entry["params"] = params
    mf = folder / "manifest.json"
    with open(folder / f".{mf.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        manifest = json.loads(mf.read_text()) if mf.exists() else {"datasets": {}}
        manifest["datasets"][name] = entry
        manifest["machine"] = machine_of(manifest["datasets"])
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{mf.name}.", suffix=".partial")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(json.dumps(manifest, indent=2, default=str) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)  # mkstemp makes it private; the manifest is for everyone
            os.replace(tmp, mf)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return entry
