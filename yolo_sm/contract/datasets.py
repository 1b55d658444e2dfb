"""Shipped reference datasets: list, load, provenance.

``data/<machine>/manifest.json`` names each dataset (file, kind, description, the command that
made it, and provenance read from its rows). Loaders validate columns and never mutate input.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.schema import validate


def data_dir() -> Path:
    """``YOLO_SM_DATA`` or the repository's ``data/`` folder."""
    env = os.environ.get("YOLO_SM_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "data"


def manifests() -> dict[str, tuple[Path, dict]]:
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
    for name, (_, e) in manifests().items():
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
    known_sets = manifests()
    if name not in known_sets:
        known = ", ".join(known_sets) or "none"
        raise UserError(f"unknown dataset {name!r}; shipped datasets: {known}")
    return known_sets[name][1]


def path(name: str) -> Path:
    """The file of dataset ``name`` (its manifest's folder and ``file``)."""
    info(name)  # raises with the list of known names
    folder, entry = manifests()[name]
    return folder / entry["file"]


def load(name: str):
    """The dataset as a DataFrame, its columns validated against its kind's schema."""
    return load_entry(name, *manifests().get(name, (None, None)))


def is_available(name: str) -> bool:
    """Whether :func:`load` can give ``name`` (it is shipped)."""
    return name in manifests()


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


def load_entry(name: str, folder, entry):
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


# ---- one dataset root: data/<machine>/ with its manifest -------------------------------------

MACHINE_FIELDS = (
    "gpu_name",
    "sm_count",
    "compute_capability",
    "driver",
    "cuda",
    "torch",
    "cudnn",
    "ultralytics",
    "python",
    "cpu_model",
)


@dataclass(frozen=True)
class DataRoot:
    """A folder of datasets with its ``manifest.json`` (``data/h200``, ``data/cpu``, a user's
    ``results/<machine>``). Notebooks read every table through one root, so the same notebook
    renders any machine's data."""

    path: Path
    name: str

    def entries(self) -> dict:
        """The manifest's datasets (name -> entry); empty when the root has no manifest."""
        mf = self.path / "manifest.json"
        if not mf.exists():
            return {}
        try:
            return json.loads(mf.read_text())["datasets"]
        except (OSError, ValueError, KeyError) as e:
            raise UserError(f"{mf} is not a readable dataset manifest ({e})") from None

    def names(self) -> list[str]:
        return sorted(self.entries())

    def has(self, name: str) -> bool:
        """Whether the root holds dataset ``name`` (a short name: ``sweep_fp16_nhwc``)."""
        return name in self.entries()

    def info(self, name: str) -> dict:
        entries = self.entries()
        if name not in entries:
            known = ", ".join(sorted(entries)) or "none"
            raise UserError(f"{self.name} has no dataset {name!r}; it holds: {known}")
        return entries[name]

    def load(self, name: str):
        """Dataset ``name`` as a DataFrame, its columns validated against its kind's schema;
        ``attrs``: ``dataset`` (``<root>/<name>``) and ``provenance``."""
        return load_entry(f"{self.name}/{name}", self.path, self.info(name))

    def machine(self) -> dict:
        """What the root was measured on: per field of :data:`MACHINE_FIELDS`, the value its
        datasets agree on (several values joined by ", "), plus ``date_utc_first`` / ``_last``."""
        values: dict[str, set] = {f: set() for f in MACHINE_FIELDS}
        dates = []
        for e in self.entries().values():
            prov = e.get("provenance", {})
            for f in MACHINE_FIELDS:
                v = prov.get(f)
                for x in v if isinstance(v, list) else [v]:
                    if x not in (None, ""):
                        values[f].add(_plain(f, x))
            dates += [prov[k] for k in ("date_utc_first", "date_utc_last") if prov.get(k)]
        out = {f: ", ".join(sorted(v)) for f, v in values.items() if v}
        if dates:
            out["date_utc_first"], out["date_utc_last"] = min(dates), max(dates)
        return out

    def device_name(self) -> str:
        """The GPU's name from provenance, else the CPU's (``cpu_model``), else the root's name."""
        m = self.machine()
        return m.get("gpu_name") or m.get("cpu_model") or self.name


def _plain(field: str, x) -> str:
    """Provenance mixes ints, floats and strings: the integer fields (SM count, cuDNN's version
    number) as integers, so ``132.0`` and ``"132"`` read alike."""
    if field in ("sm_count", "cudnn"):
        try:
            return str(int(float(x)))
        except (TypeError, ValueError):
            pass
    return str(x)


def open_root(data: str | os.PathLike = "h200") -> DataRoot:
    """The dataset root ``data``: a folder name under :func:`data_dir` (``"h200"``, ``"cpu"``)
    or a path to a folder holding a ``manifest.json``."""
    p = Path(data)
    if not p.is_absolute() and not (p / "manifest.json").exists():
        p = data_dir() / str(data)
    if not (p / "manifest.json").exists():
        known = ", ".join(sorted(m.parent.name for m in data_dir().glob("*/manifest.json")))
        raise UserError(
            f"no dataset root {str(data)!r} (no manifest.json in {p}); shipped roots: "
            f"{known or 'none'}"
        )
    return DataRoot(p.resolve(), p.name)
