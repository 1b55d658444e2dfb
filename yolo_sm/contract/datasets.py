"""Dataset roots: ``data/<machine>/manifest.json`` names each dataset (file, kind, description,
command, provenance). :func:`open_root` gives a :class:`DataRoot`, through which notebooks read
every table; the module-level functions name a dataset ``<root>/<name>`` across every root."""

from __future__ import annotations

import functools
import json
import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.manifest import machine_of, measured_provenance, shape_problem
from yolo_sm.contract.plans import Plan, load_plan
from yolo_sm.contract.schema import SCHEMAS, validate
from yolo_sm.contract.store import inside, read_frame


def data_dir() -> Path:
    """``YOLO_SM_DATA`` or the repository's ``data/`` folder."""
    env = os.environ.get("YOLO_SM_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "data"


_READ: dict[Path, tuple[tuple, dict]] = {}


def read_entries(mf: Path) -> dict:
    """The ``datasets`` of manifest file ``mf``, its shape checked; parsed once per version."""
    try:
        st = mf.stat()
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if mf in _READ and _READ[mf][0] == stamp:
            return _READ[mf][1]
        manifest = json.loads(mf.read_text())
    except (OSError, ValueError, RecursionError) as e:
        reason = getattr(e, "strerror", None) or type(e).__name__
        raise UserError(f"{mf} is not a readable dataset manifest ({reason})") from None
    problem = shape_problem(manifest)
    if problem:
        raise UserError(f"{mf} is not a dataset manifest: {problem}")
    _READ[mf] = (stamp, manifest["datasets"])
    return manifest["datasets"]


def manifests() -> dict[str, tuple[Path, dict]]:
    out = {}
    for mf in sorted(data_dir().glob("*/manifest.json")):
        entries = read_entries(mf)
        for name, entry in entries.items():
            out[f"{mf.parent.name}/{name}"] = (mf.parent, entry)
    return out


def info(name: str) -> dict:
    """The manifest entry of dataset ``name`` (e.g. ``"h200/sweep_fp16_nhwc"``)."""
    known_sets = manifests()
    if name not in known_sets:
        known = ", ".join(known_sets) or "none"
        raise UserError(f"unknown dataset {name!r}; shipped datasets: {known}")
    return known_sets[name][1]


def path(name: str) -> Path:
    """The file of dataset ``name`` (its manifest's folder and ``file``)."""
    info(name)  # raises with the list of known names
    folder, entry = manifests()[name]
    return inside(folder, entry["file"], f"dataset {name}'s manifest file")


def load(name: str):
    """The dataset as a DataFrame, its columns validated against its kind's schema."""
    return load_entry(name, *manifests().get(name, (None, None)))


def _version(path: Path) -> tuple[int, int] | None:
    """(mtime, size) of the file ``path`` (one stat), or None where it is not a file."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size) if stat.S_ISREG(st.st_mode) else None


@functools.lru_cache(maxsize=64)
def _table(path: Path, version, kind: str, name: str):
    """The validated table at ``path``, read once per ``version`` (its mtime and size)."""
    try:
        df = read_frame(path)  # page checksums verified where the table carries them
    except UserError as e:
        raise UserError(f"dataset {name} cannot be read: {e}") from None
    return validate(df, kind, name, path)


#: provenance in a table's ``attrs``, read only: pandas passes it on, never deep-copied
_Shared = type("_Shared", (dict,), {"__deepcopy__": lambda self, memo: self})


def load_entry(name: str, folder, entry):
    if entry is None:
        info(name)  # raises with the list of known names
    path = inside(folder, entry["file"], f"dataset {name}'s manifest file")
    df = _table(path, _version(path), entry.get("kind", ""), name).copy()  # callers may change it
    df.attrs = {"provenance": _Shared(entry.get("provenance", {})), "dataset": name}
    return df


# ---- one dataset root: data/<machine>/ with its manifest -------------------------------------


#: facts table ``fn(root)`` per version of the root's files: a page's rules read it again
_facts = functools.lru_cache(maxsize=64)(lambda fn, root, *versions: fn(root))


#: how collect's registration of a step that stopped part-way begins its description
PARTIAL_PREFIX = "PARTIAL ("
MACHINE_FIELDS = tuple(
    "gpu_name sm_count compute_capability driver cuda torch cudnn ultralytics python cpu_model "
    "gpu_uuid".split()
)


@dataclass(frozen=True)
class DataRoot:
    """A folder of datasets with its ``manifest.json``: the same notebook renders any root."""

    path: Path
    name: str

    def entries(self) -> dict:
        """The manifest's datasets (name -> entry); empty when the root has no manifest."""
        mf = self.path / "manifest.json"
        if not mf.exists():
            return {}
        return read_entries(mf)

    def names(self) -> list[str]:
        return sorted(self.entries())

    def facts(self, fn):
        """``fn(self)`` (a facts table), computed once per version of the manifest and tables."""
        files = ["manifest.json", *(str(e.get("file")) for e in self.entries().values())]
        at = [v for v in map(_version, map(self.path.joinpath, files)) if v is not None]
        return _facts(fn, self, *at).copy()  # callers may change what they get

    def has(self, name: str) -> bool:
        """Whether the root holds dataset ``name`` (a short name: ``sweep_fp16_nhwc``)."""
        return name in self.entries()

    def info(self, name: str) -> dict:
        entries = self.entries()
        if name not in entries:
            known = ", ".join(sorted(entries)) or "none"
            raise UserError(f"{self.name} has no dataset {name!r}; it holds: {known}")
        return entries[name]

    def partial(self, name: str) -> str:
        """What a partial dataset holds (``4 of 6 (width, scope) units``), ``""`` if complete."""
        desc = str(self.info(name).get("description", ""))
        if not desc.startswith(PARTIAL_PREFIX) or "): " not in desc:
            return ""
        return desc[len(PARTIAL_PREFIX) : desc.index("): ")].split(";")[0]

    def load(self, name: str):
        """Dataset ``name`` as a validated DataFrame (``attrs``: dataset, provenance)."""
        return load_entry(f"{self.name}/{name}", self.path, self.info(name))

    def machine(self) -> dict:
        """What the root was measured on (:func:`~yolo_sm.contract.manifest.machine_of` of
        :data:`MACHINE_FIELDS`, values joined by ", "), plus ``date_utc_first`` / ``_last``."""
        entries = self.entries()
        out = {f: ", ".join(v) for f, v in machine_of(entries, MACHINE_FIELDS).items()}
        keys = ("date_utc_first", "date_utc_last")
        dates = [p[k] for p in measured_provenance(entries) for k in keys if p.get(k)]
        if dates:
            out["date_utc_first"], out["date_utc_last"] = min(dates), max(dates)
        return out

    def device_name(self) -> str:
        """The GPU's name from provenance, else the CPU's (``cpu_model``), else the root's name."""
        m = self.machine()
        return m.get("gpu_name") or m.get("cpu_model") or self.name

    def find_all(self, role: str) -> list[str]:
        """The datasets that play ``role`` (a key of :data:`ROLES`) in manifest order: those
        whose entry says ``"role": role`` first, then those of the role's kind."""
        if role not in ROLES:
            raise UserError(f"unknown dataset role {role!r}; roles: {', '.join(ROLES)}")
        infos = [(n, self.info(n)) for n in self.names()]
        order = {n: i for i, n in enumerate(self.entries())}
        infos.sort(key=lambda ne: order.get(ne[0], len(order)))
        named = [n for n, e in infos if e.get("role") == role]
        by_kind = [n for n, e in infos if e.get("kind") == ROLES[role] and not e.get("role")]
        return named + by_kind

    def find(self, role: str) -> str | None:
        """The first dataset of :meth:`find_all` for ``role``, None when the root has none."""
        found = self.find_all(role)
        return found[0] if found else None

    def plan_file(self) -> Path | None:
        """The ``--plan`` of a manifest command, else ``data/plans/<root name>.yaml``, or None."""
        repo = data_dir().parent
        for e in self.entries().values():
            cmd = shlex.split(str(e.get("command") or ""))
            if "--plan" in cmd and cmd.index("--plan") + 1 < len(cmd):
                p = Path(cmd[cmd.index("--plan") + 1])
                p = p if p.is_absolute() else repo / p
                if p.is_file():
                    return p
        p = data_dir() / "plans" / f"{self.name}.yaml"
        return p if p.is_file() else None

    def missing(self, name: str) -> str:
        """One sentence for a section whose dataset ``name`` this root lacks: the plan step
        that collects it (this root's own plan first) and why a GPU kind may never be here."""
        plans = _plans_with_step(name)
        mine = self.plan_file()
        own = [(f, p) for f, p in plans if mine and Path(p.path).resolve() == mine.resolve()]
        if own:
            file, plan = own[0]
            return (
                f"This root ({self.name}) holds no {name} yet: yolo-sm collect --plan {file} "
                f"--out {_shown(self.path)} --only {name} collects it."
            )
        if not plans:
            return f"This root ({self.name}) holds no {name}, and no plan in data/plans makes it."
        file, plan = plans[0]
        kind = next(s.kind for s in plan.steps if s.name == name)
        why = NEEDS.get(kind) or f"its plan collects it on a {plan.device} device"
        return (
            f"This root ({self.name}) holds no {name}: {why} "
            f"(yolo-sm collect --plan {file} --only {name})."
        )

    def adds(self, names) -> str:
        """A clause naming, per plan, the command that collects the ``names`` this root lacks
        (``the full plan adds a, b (...)``), ``""`` when it holds them all."""
        lacking = [n for n in dict.fromkeys(names) if not self.has(n)]
        if not lacking:
            return ""
        by_plan: dict[str, list[str]] = {}
        for n in lacking:
            plans = _plans_with_step(n)
            by_plan.setdefault(plans[0][0] if plans else "", []).append(n)
        parts = [
            f"the {Path(file).stem} plan adds {', '.join(steps)} (yolo-sm collect --plan {file} "
            f"--out {_shown(self.path)} --only {','.join(steps)})"
            for file, steps in by_plan.items()
            if file
        ]
        if "" in by_plan:
            parts.append(f"no plan in data/plans makes {', '.join(by_plan[''])}")
        return "; ".join(parts)


#: Dataset roles (DataRoot.find) and the manifest kind of the datasets that play them.
ROLES = {
    "sweep": "sweep",
    "trace": "kernels",
    "ncu": "ncu",
    "model_layers": "model_tables",
    "ceilings": "ceilings",
    "layers": "layers",
    "gpm": "gpm",
    "numerics": "numerics",
    "probe": "probe",
}


#: Why a plan step kind's tables come from NVIDIA GPUs only (DataRoot.missing).
NEEDS = {
    "ncu": "Nsight Compute tables are collected on NVIDIA GPUs",
    "gpm": "NVML GPM timelines are collected on NVIDIA GPUs (Hopper and later)",
    "bench": "the fast-engines bench times CUDA engines on an NVIDIA GPU",
    "probe": "the pipeline probe times a CUDA pipeline on an NVIDIA GPU",
    "ceilings": "the ceilings are a GPU's matmul and copy peaks",
    "wide_vs_deep": "the wide-against-deep pairs are timed with CUDA graphs and Kineto's "
    "occupancy estimates on an NVIDIA GPU",
    "resolutions": "the per-resolution engines are CUDA graphs on an NVIDIA GPU",
}
NEEDS["sharing"] = "two engines sharing a GPU are timed with CUDA events on an NVIDIA GPU"
NEEDS["int8_kernels"] = "the int8 convolution kernels (cuDNN, cuBLASLt, Triton) run on NVIDIA GPUs"


def _shown(p: Path) -> str:
    """``p`` relative to the repository (``data/cpu``) when it lies inside it."""
    try:
        return str(Path(p).resolve().relative_to(Path(__file__).resolve().parents[2]))
    except ValueError:
        return str(p)


#: tables written beside a plan's steps (by ``yolo-sm profile`` and the sharing step)
OTHER_TABLES = ("profile_layers", "sharing_gpm", "ncu_occupancy")


def known_names() -> frozenset[str]:
    """Every dataset name a root may hold: plan steps, table kinds and :data:`OTHER_TABLES`."""
    steps = {s.name for f in (data_dir() / "plans").glob("*.yaml") for s in load_plan(f).steps}
    return frozenset(steps | set(SCHEMAS) | set(OTHER_TABLES))


def _plans_with_step(name: str) -> list[tuple[str, Plan]]:
    """(shown path, plan) of every plan under ``data_dir()/plans`` with a step ``name``, the
    plan of most steps first."""
    out = []
    for f in sorted((data_dir() / "plans").glob("*.yaml")):
        try:
            plan = load_plan(f)
        except UserError:
            continue
        if any(s.name == name for s in plan.steps):
            out.append((_shown(f), plan))
    return sorted(out, key=lambda fp: -len(fp[1].steps))


def open_root(data: str | os.PathLike = "h200") -> DataRoot:
    """The dataset root ``data``: a folder name under :func:`data_dir` or a path."""
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
