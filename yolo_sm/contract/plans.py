"""Plans: the YAML that names the steps of a collection (sweeps, profiler captures, benches),
read and checked without torch, so that analysis can compare a table with the plan behind it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from yolo_sm.contract.errors import UserError


def load_yaml(path: str) -> dict:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UserError(f"config file {path} is not valid YAML{where}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(
            f"config file {path} must hold a mapping of sweep keys, not a {type(data).__name__}"
        )
    return data


KINDS = ("sweep", "ncu", "trace", "gpm", "ceilings", "bench", "probe", "model_tables")


# kinds that resume part-way and stop themselves at the deadline (the others run whole, so
# they start only when their est_s fits in the time left)
RESUMABLE = ("sweep", "bench")

KINDS += ("numerics",)  # numerical error per width and precision (collect.numerics)


@dataclass(frozen=True)
class Step:
    name: str
    kind: str
    out: str  # file name inside the output folder
    params: dict = field(default_factory=dict)
    description: str = ""
    est_s: float = 60.0  # rough cost, for deciding whether a step still fits

    @property
    def dataset_kind(self) -> str:
        return {"trace": "kernels"}.get(self.kind, self.kind)


@dataclass(frozen=True)
class Plan:
    name: str
    device: str
    steps: tuple[Step, ...]
    path: str = ""  # the YAML it was read from (for the command recorded in the manifest)
    model: str = ""  # model spec(s) of the steps that name none (collect.models.spec)


def load_plan(path: str | os.PathLike) -> Plan:
    """Read and check a plan YAML (``name``, ``device``, ``steps`` with name/kind/out/params)."""

    data = load_yaml(str(path))
    steps = data.get("steps")
    if not isinstance(steps, list) or not steps:
        raise UserError(f"plan {path} needs a non-empty 'steps' list")
    out, seen = [], set()
    for i, s in enumerate(steps):
        if not isinstance(s, dict) or not {"name", "kind", "out"} <= set(s):
            raise UserError(f"plan {path}: step {i + 1} needs name, kind and out")
        if s["kind"] not in KINDS:
            raise UserError(
                f"plan {path}: step {s['name']} has unknown kind {s['kind']!r} "
                f"(choose {', '.join(KINDS)})"
            )
        if s["name"] in seen:
            raise UserError(f"plan {path}: step name {s['name']!r} appears twice")
        seen.add(s["name"])
        unknown = set(s) - {"name", "kind", "out", "params", "description", "est_s"}
        if unknown:
            raise UserError(f"plan {path}: step {s['name']} has unknown keys {sorted(unknown)}")
        out.append(
            Step(
                s["name"],
                s["kind"],
                s["out"],
                dict(s.get("params") or {}),
                str(s.get("description", "")),
                float(s.get("est_s", 60)),
            )
        )
    return Plan(
        str(data.get("name", Path(path).stem)),
        str(data.get("device", "cuda")),
        tuple(out),
        str(path),
        _csv(data.get("model", "")),
    )


def _csv(v) -> str:
    return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v or "")
