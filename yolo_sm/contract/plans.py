"""Plans: the YAML that names the steps of a collection, read and checked whole without torch
(every step's parameters parsed by its kind's spec) before the first step runs."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

import yaml

from yolo_sm.contract import values
from yolo_sm.contract.errors import UserError
from yolo_sm.topics import STEPS

#: most values a config or plan may hold once its aliases are expanded: a few nested aliases
#: (``*a``) can stand for billions of values in a file of a few hundred bytes
MAX_YAML_VALUES = 1_000_000
#: file names in a collection's folder that no step may write
RESERVED_OUTS = ("manifest.json", "notebook_parameters.yaml")
#: every step kind, as the topics and the generic table declare them
KINDS: tuple[str, ...] = tuple(STEPS)


def _expanded_values(node) -> int:
    """How many values a YAML node stands for with every alias expanded."""
    sizes: dict[int, int] = {}
    stack = [(node, False)]
    while stack:
        n, ready = stack.pop()
        if id(n) in sizes:
            continue
        kids = [] if isinstance(n, yaml.ScalarNode) else n.value
        if isinstance(n, yaml.MappingNode):
            kids = [x for pair in kids for x in pair]
        if ready or not kids:
            sizes[id(n)] = min(1 + sum(sizes[id(k)] for k in kids), MAX_YAML_VALUES + 1)
            continue
        stack.append((n, True))
        stack.extend((k, False) for k in kids if id(k) not in sizes)
    return sizes[id(node)]


def _safe_yaml(body: str, path: str):
    """The data in YAML text, refusing one that expands past :data:`MAX_YAML_VALUES`."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(body)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_values(node) > MAX_YAML_VALUES:
            raise UserError(
                f"config file {path} expands to more than {MAX_YAML_VALUES} values "
                "(nested aliases?): not a config"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_yaml(path: str) -> dict:
    """The mapping in a YAML file (empty for an empty file); anything else is one UserError."""
    body = values.read_text(path, "config file")
    try:
        data = _safe_yaml(body, path)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UserError(f"config file {path} is not valid YAML{where}") from None
    except UserError:
        raise
    except (ValueError, TypeError, OverflowError, RecursionError):  # e.g. a date 2001-02-30
        raise UserError(f"config file {path} holds a value YAML cannot read") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(
            f"config file {path} must hold a mapping of sweep keys, not a {type(data).__name__}"
        )
    values.mapping(data, f"config file {path}")
    return data


# kinds whose params are their points, resumed point by point (and split in shards)
RESUMABLE = ("sweep", "bench")
# kinds run unit by unit up to a deadline, their table written after each unit (the others run
# whole where their est_s fits)
TO_DEADLINE = (*RESUMABLE, "compile_cache", "int8_kernels", "trace")
# params that say how long a unit takes, not what is measured
SCHEDULING_PARAMS = ("est_unit_s", "mode_est_s")


def check_params(kind: str, params, where: str) -> dict:
    """``params`` once the ``kind`` step's spec has parsed them (the runners parse them again)."""
    STEPS[kind][0].from_mapping(params, where)
    return params


# --- the plan -------------------------------------------------------------------------------

#: what a step name (a dataset name, part of file names) may look like
STEP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
PLAN_KEYS = ("name", "device", "steps", "description", "model")
STEP_KEYS = ("name", "kind", "out", "params", "description", "est_s")


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
    flags: str = ""  # collect's --device / --input-shape it runs with (see with_input)


def _out_name(v, where: str) -> str:
    """A step's ``out``: a relative path inside the output folder (no ``..``, not absolute)."""
    out = values.text(v, f"{where} out")
    p = PurePosixPath(out.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or not p.parts or out.startswith("~") or ":" in out:
        raise UserError(f"{where} out must be a file name inside the output folder, got {out!r}")
    if any(len(part) > values.MAX_NAME_CHARS for part in p.parts):
        raise UserError(f"{where} out has a name longer than {values.MAX_NAME_CHARS} characters")
    if str(p) in RESERVED_OUTS:
        raise UserError(f"{where} out {out!r} is the collection's own {p} file: name another")
    return str(p)


def _step(s, i: int, path) -> Step:
    where = f"plan {path}: step {i + 1}"
    if not isinstance(s, dict) or not {"name", "kind", "out"} <= set(s):
        raise UserError(f"{where} needs name, kind and out")
    values.mapping(s, where)
    name = values.text(s["name"], f"{where} name")
    if not STEP_NAME.fullmatch(name):
        raise UserError(
            f"{where} name {name[:60]!r} must be letters, digits, '_', '.' or '-' "
            "(at most 100, starting with a letter or digit)"
        )
    where = f"plan {path}: step {name}"
    unknown = sorted(set(s) - set(STEP_KEYS))
    if unknown:
        raise UserError(f"{where} has unknown keys {unknown}")
    kind = s["kind"]
    if not isinstance(kind, str) or kind not in KINDS:
        raise UserError(f"{where} has unknown kind {kind!r} (choose {', '.join(KINDS)})")
    params = s.get("params")
    params = {} if params is None else dict(check_params(kind, params, where))
    description = s.get("description")
    if description is not None and not isinstance(description, (str, int, float)):
        raise UserError(f"{where} description must be text")
    est = values.number(s.get("est_s", 60), f"{where} est_s", above=0, hi=7 * 86400, unit="s")
    return Step(name, kind, _out_name(s["out"], where), params, str(description or ""), est)


def load_plan(path: str | os.PathLike) -> Plan:
    """Read and check a whole plan YAML, every step's parameters included."""
    data = load_yaml(str(path))
    unknown = sorted(set(data) - set(PLAN_KEYS))
    if unknown:
        raise UserError(f"plan {path} has unknown keys {unknown}; known: {', '.join(PLAN_KEYS)}")
    steps = data.get("steps")
    if not isinstance(steps, list) or not steps:
        raise UserError(f"plan {path} needs a non-empty 'steps' list")
    out, names, files = [], set(), set()
    for i, s in enumerate(steps):
        step = _step(s, i, path)
        if step.name in names:
            raise UserError(f"plan {path}: step name {step.name!r} appears twice")
        if step.out in files:
            raise UserError(f"plan {path}: two steps write {step.out!r}")
        names.add(step.name)
        files.add(step.out)
        out.append(step)
    name = data.get("name", None)
    return Plan(
        values.text(name, f"plan {path} name") if name is not None else _stem(path),
        values.device_name(data.get("device", "cuda"), f"plan {path} device"),
        tuple(out),
        str(path),
        _csv(data.get("model", "")),
    )


#: the plans that ship beside the package (the repository's data/plans)
PLANS_DIR = Path(__file__).resolve().parents[2] / "data" / "plans"
#: the plan ``yolo-sm collect`` runs without ``--plan``: each notebook's headline in minutes
DEFAULT_PLAN = "quick.yaml"


def default_plan() -> Path:
    """The quick plan (:data:`DEFAULT_PLAN` under :data:`PLANS_DIR`)."""
    path = PLANS_DIR / DEFAULT_PLAN
    if not path.is_file():
        raise UserError(
            f"no --plan given and the default plan {path} is missing (this install has no "
            "data/plans beside the package): pass --plan PLAN.yaml"
        )
    return path


def _stem(path) -> str:
    return PurePosixPath(str(path).replace("\\", "/")).stem


def _csv(v) -> str:
    return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v or "")


def with_input(plan: Plan, device: str | None = None, shape=None) -> Plan:
    """``plan`` on ``device`` with every step's input at ``shape`` (C, H, W): its ``imgsz``
    becomes H and, where its kind takes one, its ``input_shape`` the shape."""
    steps = []
    for s in plan.steps:
        p = dict(s.params)
        if shape is not None:
            fields = STEPS[s.kind][0].params()
            if "imgsz" in fields:
                p["imgsz"] = int(shape[1])
            if "input_shape" in fields:
                p["input_shape"] = [int(x) for x in shape]
        text = s.description
        if shape is not None:  # the description names the image size the step now measures
            text = re.sub(r"\b(\d{3,})x\1\b", f"{shape[1]}x{shape[2]}", text)
        steps.append(replace(s, params=p, description=text))
    flags = (f" --device {device}" if device else "") + (
        f" --input-shape {','.join(map(str, shape))}" if shape is not None else ""
    )
    return replace(plan, device=device or plan.device, steps=tuple(steps), flags=flags)
