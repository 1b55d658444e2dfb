"""Shipped reference datasets: list, load, provenance.

``data/<machine>/manifest.json`` names each dataset (file, kind, description, the command that
made it, and provenance read from its rows). Loaders validate columns and never mutate input.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from yolo_sm.errors import UserError
from yolo_sm.schema import validate

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
    "yolo_sm_source",  # from session 7's code on (source_digest); absent in older tables
    "cpu_model",
)


def data_dir() -> Path:
    """``YOLO_SM_DATA`` or the repository's ``data/`` folder."""
    env = os.environ.get("YOLO_SM_DATA")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "data"


def _manifests() -> dict[str, tuple[Path, dict]]:
    out = {}
    for mf in sorted(data_dir().glob("*/manifest.json")):
        try:
            entries = json.loads(mf.read_text())["datasets"]
        except (OSError, ValueError, KeyError) as e:
            raise UserError(f"{mf} is not a readable dataset manifest ({e})") from None
        for name, entry in entries.items():
            out[f"{mf.parent.name}/{name}"] = (mf.parent, entry)
    return out


def list_datasets():
    """One row per shipped dataset: name, kind, rows, description, GPU, date, command."""
    import pandas as pd

    rows = []
    for name, (_, e) in _manifests().items():
        prov = e.get("provenance", {})
        rows.append(
            {
                "name": name,
                "kind": e.get("kind"),
                "rows": e.get("rows"),
                "description": e.get("description"),
                "gpu_name": prov.get("gpu_name"),
                "date_utc": prov.get("date_utc_last"),
                "command": e.get("command"),
            }
        )
    return pd.DataFrame(rows)


def info(name: str) -> dict:
    """The manifest entry of dataset ``name`` (e.g. ``"h200/foundation_sweep"``)."""
    manifests = _manifests()
    if name not in manifests:
        known = ", ".join(manifests) or "none"
        raise UserError(f"unknown dataset {name!r}; shipped datasets: {known}")
    return manifests[name][1]


def path(name: str) -> Path:
    """The file of dataset ``name`` (its manifest's folder and ``file``)."""
    info(name)  # raises with the list of known names
    folder, entry = _manifests()[name]
    return folder / entry["file"]


def load(name: str):
    """The dataset as a DataFrame, its columns validated against its kind's schema. After
    :func:`go_live`, datasets the plan can make are collected on this machine first."""
    if _LIVE:
        return _load_live(name)
    return _load_entry(name, *_manifests().get(name, (None, None)))


def is_available(name: str) -> bool:
    """Whether :func:`load` can give ``name`` without failing for a missing dataset: it is
    shipped, or (after :func:`go_live`) the plan has a step that collects it."""
    return (bool(_LIVE) and _live_step(name) is not None) or name in _manifests()


def not_shipped_message(name: str, plan: str | os.PathLike = "data/plans/h200.yaml") -> str:
    """One sentence for a notebook cell whose dataset ``name`` is not shipped yet: the collect
    command that makes it on a GPU machine (its plan step is the name after the folder)."""
    folder, _, step = name.rpartition("/")
    return (
        f"{name} is not shipped yet; on a GPU machine: yolo-sm collect --plan {plan} "
        f"--out data/{folder or 'h200'} --only {step}"
    )


def load_many(names):
    """The datasets of ``names`` that are available (:func:`is_available`), loaded and
    concatenated with a ``dataset`` column; ``attrs["not_available"]`` lists the others (a plan
    step not collected yet), ``attrs["datasets"]`` the loaded ones and
    ``attrs["provenance_by_dataset"]`` their provenance. Raises if none is available."""
    import pandas as pd

    have = [n for n in names if is_available(n)]
    if not have:
        raise UserError(f"none of {', '.join(names)} is shipped or collectable here")
    frames = [load(n).assign(dataset=n) for n in have]
    out = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    out.attrs = {
        "datasets": have,
        "not_available": [n for n in names if n not in have],
        "provenance_by_dataset": {
            n: f.attrs.get("provenance", {}) for n, f in zip(have, frames, strict=True)
        },
    }
    return out


def _load_entry(name: str, folder, entry):
    import pandas as pd

    if entry is None:
        info(name)  # raises with the list of known names
    path = folder / entry["file"]
    try:
        df = pd.read_parquet(path)
    except Exception as e:  # noqa: BLE001
        raise UserError(f"dataset {name} ({path}) cannot be read: {type(e).__name__}") from None
    df.attrs["provenance"] = entry.get("provenance", {})
    df.attrs["dataset"] = name
    return validate(df, entry["kind"], name)


# ---- live collection (a notebook's LIVE = True on a GPU machine) ---------------------------

_LIVE: dict = {}
DEFAULT_PLAN = Path(__file__).resolve().parent.parent / "data" / "plans" / "h200.yaml"


def go_live(
    out: str | os.PathLike = "results/live",
    plan: str | os.PathLike = DEFAULT_PLAN,
    max_minutes: float | None = None,
) -> Path:
    """From now on :func:`load` collects each dataset that ``plan`` has a step for on this
    machine's GPU (once: into ``out``, resumable, with provenance) and reads it from there;
    datasets the plan cannot make (profile joins, the provisional tables) still come from the
    shipped data. Needs a CUDA GPU. Returns the live folder."""
    import torch

    from yolo_sm.collect import load_plan
    from yolo_sm.errors import NotAvailableError

    if not torch.cuda.is_available():
        raise NotAvailableError(
            "live collection needs a CUDA GPU and torch sees none here; set LIVE = False to "
            "read the shipped H200 data"
        )
    _LIVE.update(out=Path(out), plan=load_plan(plan), max_minutes=max_minutes)
    return Path(out)


def stop_live() -> None:
    """Back to the shipped data."""
    _LIVE.clear()


def _live_step(name: str):
    """The step of the live plan that makes dataset ``name`` (``h200/x``: step ``x``), or None."""
    short = name.split("/", 1)[-1]
    return next((s for s in _LIVE["plan"].steps if s.name == short), None)


def _load_live(name: str):
    from yolo_sm.collect import run_plan, step_state

    plan, out = _LIVE["plan"], _LIVE["out"]
    step = _live_step(name)
    if step is None:  # not something the plan makes: the shipped table
        return _load_entry(name, *_manifests().get(name, (None, None)))
    short = step.name
    if step_state(step, plan, out) != "done":
        run_plan(plan, out, only=[short], max_minutes=_LIVE["max_minutes"])
    mf = out / "manifest.json"
    entries = json.loads(mf.read_text())["datasets"] if mf.exists() else {}
    if short not in entries:
        raise UserError(
            f"live collection of {name} did not finish (see the messages above); run it again "
            f"or set LIVE = False"
        )
    return _load_entry(f"live/{short}", out, entries[short])


def provenance_from_rows(df) -> dict:
    """Provenance of a sweep-like table from its ``prov_*`` columns (unique values), plus the
    first and last UTC timestamps."""
    prov = {}
    for f in PROVENANCE_FIELDS:
        col = f"prov_{f}"
        if col in df:
            vals = sorted({str(v) for v in df[col].dropna()})
            prov[f] = vals[0] if len(vals) == 1 else vals
    if "prov_date_utc" in df:
        prov["date_utc_first"] = str(df["prov_date_utc"].min())
        prov["date_utc_last"] = str(df["prov_date_utc"].max())
    if "prov_sm_clock_start_mhz" in df:
        prov["sm_clock_start_mhz_range"] = [
            float(df.prov_sm_clock_start_mhz.min()),
            float(df.prov_sm_clock_start_mhz.max()),
        ]
    return prov


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
    plan's to notice an edited step)."""
    import pandas as pd

    folder = Path(folder)
    df = validate(pd.read_parquet(folder / file), kind, name)
    mf = folder / "manifest.json"
    manifest = json.loads(mf.read_text()) if mf.exists() else {"datasets": {}}
    from yolo_sm.schema import SCHEMAS

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
    manifest["datasets"][name] = entry
    tmp = mf.with_name(mf.name + ".partial")
    tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    os.replace(tmp, mf)
    return entry
