"""A root's ``manifest.json``: :func:`register` adds a dataset, first embedding the registration
in the table's metadata so that a lost or corrupt manifest is rebuilt from the tables."""

from __future__ import annotations

import datetime as dt
import json
import os
import warnings
from pathlib import Path, PurePosixPath

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.schema import DERIVED, SCHEMAS, validate
from yolo_sm.contract.store import (
    inside,
    output_lock,
    read_arrow,
    read_metadata,
    remove_stale_partials,
    with_metadata,
    write_table_atomic,
    write_text_atomic,
)

#: the provenance a manifest entry records (yolo_sm_source, gpu_uuid: absent in older tables)
PROVENANCE_FIELDS = tuple(
    "gpu_name sm_count compute_capability driver cuda torch cudnn ultralytics python "
    "sm_clock_max_mhz yolo_sm_source cpu_model gpu_uuid".split()
)
MANIFEST = "manifest.json"
#: what a table's metadata records of each registration of it (enough to rebuild the entry)
REGISTRATION_KEYS = ("kind", "description", "command", "params", "registered_utc")


def _text(value) -> str:
    """``value`` as provenance text, a whole float as an integer (132.0 -> "132")."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def provenance_from_rows(df) -> dict:
    """Provenance from a table's ``prov_*`` columns (unique values), with its first/last dates."""
    prov = {}
    for f in PROVENANCE_FIELDS:
        col = f"prov_{f}"
        if col in df:
            vals = sorted({_text(v) for v in df[col].dropna()})
            if vals:  # a field no row records (a CPU's gpu_name) is left out
                prov[f] = vals[0] if len(vals) == 1 else vals
    if "prov_date_utc" in df and df["prov_date_utc"].notna().any():
        prov["date_utc_first"] = str(df["prov_date_utc"].min())
        prov["date_utc_last"] = str(df["prov_date_utc"].max())
    if "prov_sm_clock_start_mhz" in df and df["prov_sm_clock_start_mhz"].notna().any():
        clocks = df.prov_sm_clock_start_mhz
        prov["sm_clock_start_mhz_range"] = [float(clocks.min()), float(clocks.max())]
    return prov


#: what a root's ``machine`` entry records, from its datasets' provenance
MACHINE_KEYS = ("gpu_uuid", "gpu_name", "sm_count", "driver", "cpu_model")


def measured_provenance(datasets: dict) -> list[dict]:
    """The provenance of the GPU-measured datasets (all where none was), derived tables left out:
    a table counted on another host (the shape-only model table) does not describe a root."""
    provs = [d.get("provenance", {}) for d in datasets.values() if d.get("kind") not in DERIVED]
    return [p for p in provs if p.get("gpu_name")] or provs


def machine_of(datasets: dict, keys=MACHINE_KEYS) -> dict:
    """Per field of ``keys``, the sorted distinct values of :func:`measured_provenance`."""
    provs = measured_provenance(datasets)
    out = {}
    for key in keys:
        vs = [v if isinstance(v, list) else [v] for v in (p.get(key) for p in provs)]
        vals = {_text(x) for v in vs for x in v if x not in (None, "")}
        if vals:
            out[key] = sorted(vals)
    return out


def root_gpus(folder: str | os.PathLike) -> list[str]:
    """The GPU models the tables of ``folder`` were measured on (empty: none or CPU only)."""
    try:
        manifest = read_manifest(folder)
    except UserError:
        manifest = _from_tables(Path(folder))
    machine = manifest.get("machine") or machine_of(manifest["datasets"])
    return list(machine.get("gpu_name", []))


def make_entry(df, file: str, kind: str, description: str, command: str, params=None) -> dict:
    """The manifest entry of table ``df`` (its columns validated for ``kind``)."""
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
    return entry


def register(
    folder: str | os.PathLike,
    name: str,
    file: str,
    kind: str,
    description: str,
    command: str,
    params: dict | None = None,
) -> dict:
    """Add or replace dataset ``name`` (``file`` inside ``folder``) in its manifest, after
    embedding it in the table; under the manifest's ``flock``, written atomically."""
    folder = Path(folder)
    path = inside(folder, file, f"dataset {name}'s file")
    reg = {
        "kind": kind,
        "description": description,
        "command": command,
        "params": params,
        "registered_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    with _manifest_lock(folder), output_lock(path):
        remove_stale_partials(path)  # a registration killed half-way left them
        remove_stale_partials(folder / MANIFEST)
        table = read_arrow(path)
        df = validate(table.to_pandas(), kind, name, path)
        entry = make_entry(df, file, kind, description, command, params)
        report = path.with_name(f"{path.stem}.ncu-rep.gz")
        if kind == "ncu" and report.is_file():  # Nsight Compute's own report, compressed
            entry["report"] = str(PurePosixPath(file).with_name(report.name))
        meta = read_metadata(path)
        regs = dict(meta.get("registrations") or {})
        if _same(regs.get(name), reg):
            reg = regs[name]  # registered so before: the table is not rewritten
        else:
            regs[name] = reg
            write_table_atomic(with_metadata(table, {**meta, "registrations": regs}), path)
        manifest = read_manifest(folder, repair=True, locked=True)
        manifest["datasets"][name] = entry
        manifest["machine"] = machine_of(manifest["datasets"])
        _write_manifest(folder, manifest)
    return entry


def _same(old, new) -> bool:
    if not isinstance(old, dict):
        return False
    return all(old.get(k) == new.get(k) for k in REGISTRATION_KEYS if k != "registered_utc")


def _manifest_lock(folder: Path):
    """The exclusive lock of ``folder``'s manifest (waits for its holder; re-entrant)."""
    return output_lock(Path(folder) / MANIFEST, wait=True)


#: the type each manifest entry field must have where present (``file`` must be)
ENTRY_TYPES = {
    "file": str,
    "kind": str,
    "role": str,
    "description": (str, type(None)),
    "command": (str, type(None)),
    "rows": (int, type(None)),
    "provenance": dict,
    "columns": dict,
    "params": (dict, type(None)),
    "gpu_seconds": (dict, type(None)),
}


def shape_problem(manifest) -> str | None:
    """What makes parsed JSON not a manifest (``datasets`` of :data:`ENTRY_TYPES`), or None."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("datasets"), dict):
        return "no 'datasets' mapping"
    if not isinstance(manifest.get("machine", {}), dict):
        return "its 'machine' is not a mapping"
    for name, entry in manifest["datasets"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            return f"dataset {name[:60]!r} is not a mapping with a 'file' name"
        for key, kind in ENTRY_TYPES.items():
            if key in entry and (not isinstance(entry[key], kind) or isinstance(entry[key], bool)):
                return f"dataset {name[:60]!r} has a {key} of type {type(entry[key]).__name__}"
    return None


def _write_manifest(folder: Path, manifest: dict) -> None:
    write_text_atomic(Path(folder) / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")


def read_manifest(folder: str | os.PathLike, repair: bool = False, locked: bool = False):
    """The manifest of ``folder`` (empty if none); unreadable: a UserError, or with ``repair``
    rebuilt from the tables (the old file kept). ``locked``: the caller holds the lock."""
    folder = Path(folder)
    mf = folder / MANIFEST
    if not mf.exists() and not mf.is_symlink():
        return _from_tables(folder) if repair else {"datasets": {}}
    try:
        manifest = json.loads(mf.read_text())
        problem = shape_problem(manifest)
        if problem:
            raise ValueError(problem)
        return manifest
    except (OSError, ValueError, UnicodeDecodeError) as e:
        if not repair:
            raise UserError(
                f"{mf} is not a readable dataset manifest ({type(e).__name__}); "
                f"yolo-sm collect with --out {folder} repairs it from the tables"
            ) from None
        if not locked:
            with _manifest_lock(folder):
                return read_manifest(folder, repair=True, locked=True)
        kept = mf.with_name(MANIFEST + ".corrupt")
        os.replace(mf, kept)
        manifest = _from_tables(folder)
        _write_manifest(folder, manifest)
        warnings.warn(
            f"{mf} was unreadable: rebuilt from the tables' own registrations "
            f"({len(manifest['datasets'])} datasets), the old file kept as {kept.name}",
            stacklevel=2,
        )
        return manifest


def _from_tables(folder: Path) -> dict:
    """A manifest rebuilt from the tables' embedded registrations, with its machine entry."""
    datasets = rebuild(folder)
    return {"datasets": datasets, "machine": machine_of(datasets)}


def rebuild(folder: str | os.PathLike) -> dict:
    """Manifest entries rebuilt from the registrations embedded in the tables under ``folder``
    (the latest of a name wins; unreadable tables left out)."""
    folder = Path(folder)
    found: dict[str, tuple[str, str, dict]] = {}
    for path in sorted(folder.rglob("*.parquet")):
        if path.name.startswith(".") or path.is_symlink():
            continue
        for name, reg in (read_metadata(path).get("registrations") or {}).items():
            when = str(reg.get("registered_utc", ""))
            if name not in found or when >= found[name][0]:
                found[name] = (when, path.relative_to(folder).as_posix(), reg)
    out = {}
    for name, (_, file, reg) in sorted(found.items()):
        try:
            df = validate(read_arrow(folder / file).to_pandas(), reg["kind"], name)
        except (UserError, KeyError, ValueError):
            continue
        out[name] = make_entry(
            df, file, reg["kind"], reg.get("description", ""), reg.get("command", ""),
            reg.get("params"),
        )  # fmt: skip
        for k in ("provenance", "columns"):  # written by hand where the table does not say
            if isinstance(reg.get(k), dict):
                out[name][k] = reg[k]
    return out


def embed_registrations(folder: str | os.PathLike) -> list[str]:
    """Embed every manifest entry of ``folder`` in its table; returns the names rewritten."""
    folder = Path(folder)
    done = []
    with _manifest_lock(folder):
        entries = read_manifest(folder, locked=True)["datasets"]
        for name, e in entries.items():
            path = inside(folder, e["file"], f"dataset {name}'s file")
            table = read_arrow(path)
            reg = {k: e.get(k) for k in REGISTRATION_KEYS if k != "registered_utc"}
            derived = make_entry(table.to_pandas(), e["file"], e["kind"], "", "")
            for k in ("provenance", "columns"):
                if e.get(k) != derived[k]:
                    reg[k] = e.get(k)
            meta = read_metadata(path)
            regs = dict(meta.get("registrations") or {})
            old = regs.get(name) or {}
            if _given(old) == _given(reg):
                continue  # a hand-written key that the entry no longer holds is dropped
            reg["registered_utc"] = old.get("registered_utc") or (
                (e.get("provenance") or {}).get("date_utc_last") or ""
            )
            regs[name] = reg
            write_table_atomic(with_metadata(table, {**meta, "registrations": regs}), path)
            done.append(name)
    return done


def _given(reg: dict) -> dict:
    """A registration's keys that say something (None and the registration time left out)."""
    return {k: v for k, v in reg.items() if v is not None and k != "registered_utc"}


def entry_problem(folder: str | os.PathLike, name: str, file: str, kind: str) -> str | None:
    """What is wrong with dataset ``name``'s manifest entry against its table ``file``, or None."""
    import pyarrow.parquet as pq

    try:
        entry = read_manifest(folder)["datasets"].get(name)
    except UserError:
        return "the manifest is unreadable"
    if not isinstance(entry, dict):
        return "no manifest entry"
    if entry.get("file") != file or entry.get("kind") != kind:
        return "a manifest entry of another file or kind"
    try:
        rows = pq.read_metadata(Path(folder) / file).num_rows
    except Exception:  # noqa: BLE001 - an unreadable table: collect reports it when it reads it
        return None
    if entry.get("rows") != rows:
        return f"a manifest entry of {entry.get('rows')} rows for a table of {rows}"
    return None
