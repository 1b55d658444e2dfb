"""Plans: the YAML that names the steps of a collection (sweeps, profiler captures, benches),
read and checked without torch, so that analysis can compare a table with the plan behind it.

A plan is checked whole when it is read: its fields, every step's fields and every step's
parameters (:data:`PARAMS`: the keys each kind takes, their types and ranges, finite numbers),
so that a typo in the last step is one sentence before the first step runs. The limits of a run
(:data:`MAX_WARMUP_MS`, :data:`MAX_BUDGET_MS`, :data:`MAX_RUN_S`) bound what a flag or a plan
may ask for: a warm-up or budget past them is refused, not waited for.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

import yaml

from yolo_sm.contract import values
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.vocab import (
    INT8_CALIBRATIONS,
    INT8_CONV_KERNELS,
    INT8_MODEL_KERNELS,
    PIPELINE_MODES,
    Backend,
    Layout,
    Precision,
)

#: longest warm-up per timed point (ms): 1 minute
MAX_WARMUP_MS = 60_000.0
#: longest timed budget per point (ms): 10 minutes
MAX_BUDGET_MS = 600_000.0
#: longest wall time of one timed row (a pipeline, a predict loop, a GPM run; s): 10 minutes
MAX_RUN_S = 600.0
#: largest batch a flag or plan may ask for
MAX_BATCH = 65_536
#: largest square input size (pixels)
MAX_IMGSZ = 8192
#: most profiled forwards of one trace
MAX_ITERS = 1000
#: widest width multiplier any model family takes (each family checks its own range)
MAX_WIDTH_ANY = 16.0
#: most values a config or plan may hold once its aliases are expanded (a 1 MiB file without
#: aliases holds fewer): a few nested aliases (``*a``) can stand for billions of values in a
#: file of a few hundred bytes
MAX_YAML_VALUES = 1_000_000
#: file names in a collection's folder that no step may write
RESERVED_OUTS = ("manifest.json", "notebook_parameters.yaml")


def _expanded_values(node) -> int:
    """How many values a YAML node stands for with every alias expanded (each node counted
    once per place it appears), computed once per node."""
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
    """The mapping in a YAML file (empty for an empty file). A missing, unreadable, binary,
    UTF-16 or oversized file, YAML that does not parse, or a top level that is not a mapping of
    names is one UserError naming the file."""
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


# kinds whose params are their points, resumed part-way point by point or unit by unit (their
# error rows can be measured again, and the distributed collection splits them in shards);
# TO_DEADLINE names every kind that stops itself at a deadline
RESUMABLE = ("sweep", "bench")
# the kinds whose runner starts a unit (a sweep's model, a bench's (model, batch), a
# compile-cache or int8-kernels unit, a trace step's model) only where its estimate ends before
# the deadline and writes its table after each unit, resuming the units it holds: a
# time-limited run measures the units that fit and the next run goes on. The other kinds start
# only where their whole est_s fits, and run whole.
TO_DEADLINE = (*RESUMABLE, "compile_cache", "int8_kernels", "trace")
# params that say how long a unit takes, not what is measured: editing them leaves a step's
# table as it is
SCHEDULING_PARAMS = ("est_unit_s", "mode_est_s")


# --- the parameters of each kind ------------------------------------------------------------

Check = Callable[[object, str], object]
PRESETS = ("n", "s", "m", "l", "x")


def _choices(enum) -> tuple[str, ...]:
    return tuple(m.value for m in enum)


def _widths(v, what):
    """Width multipliers, or preset letters n/s/m/l/x."""
    out = []
    for x in values.items(v, what):
        if isinstance(x, str) and x.strip().lower() in PRESETS:
            out.append(x.strip().lower())
        else:
            out.append(values.number(x, what, above=0, hi=MAX_WIDTH_ANY))
    return out


def _depths(v, what):
    return [
        None if x in ("", "none", "None") else values.number(x, what, above=0, hi=4)
        for x in values.items(v, what)
    ]


def _batches(v, what):
    return values.wholes(v, what, lo=1, hi=MAX_BATCH)


def _imgsz(v, what):
    out = values.wholes(v, what, lo=32, hi=MAX_IMGSZ, unit="pixels")
    if any(s % 32 for s in out):
        raise UserError(f"{what} must be multiples of 32, got {','.join(map(str, out))}")
    return out


def _one_imgsz(v, what):
    sizes = _imgsz(v, what)
    if len(sizes) != 1:
        raise UserError(f"{what} takes one size, got {len(sizes)}")
    return sizes[0]


def _one(check: Check) -> Check:
    """``check`` of a list, for a key that takes exactly one value."""

    def one(v, what):
        got = check(v, what)
        if len(got) != 1:
            raise UserError(f"{what} takes one value, got {len(got)}")
        return got[0]

    return one


def _texts(v, what):
    return values.texts(v, what)


def _precisions(v, what):
    return values.texts(v, what, _choices(Precision))


def _layouts(v, what):
    return values.texts(v, what, _choices(Layout))


def _backends(v, what):
    return values.texts(v, what, _choices(Backend))


def _warmup_ms(v, what):
    return values.number(v, what, lo=0, hi=MAX_WARMUP_MS, unit="ms")


def _budget_ms(v, what):
    return values.number(v, what, above=0, hi=MAX_BUDGET_MS, unit="ms")


def _run_s(v, what):
    return values.number(v, what, above=0, hi=MAX_RUN_S, unit="s")


def _positive(v, what):
    return values.number(v, what, above=0, hi=7 * 86400)


def _count(hi: int) -> Check:
    return lambda v, what: values.whole(v, what, lo=1, hi=hi)


def _text_of(choices) -> Check:
    return lambda v, what: values.text(v, what, choices)


def _model_entries(v, what):
    """model_tables' ``models``: mappings with ``model`` and optional widths, depth,
    max_channels."""
    entries = v if isinstance(v, (list, tuple)) else [v]
    if not entries:
        raise UserError(f"{what} needs at least one model")
    for e in entries:
        values.mapping(e, what)
        unknown = sorted(set(e) - {"model", "widths", "depth", "max_channels"})
        if "model" not in e or unknown:
            raise UserError(
                f"each entry of {what} needs 'model' and may have widths, depth, max_channels"
                + (f"; unknown {', '.join(unknown)}" if unknown else "")
            )
        values.text(e["model"], f"{what} model")
        if "widths" in e:
            values.numbers(e["widths"], f"{what} widths", above=0, hi=MAX_WIDTH_ANY)
        if "depth" in e:
            values.number(e["depth"], f"{what} depth", above=0, hi=4)
        if "max_channels" in e:
            values.whole(e["max_channels"], f"{what} max_channels", lo=1, hi=1 << 20)
    return entries


#: a step's own model spec(s) (collect.models.spec) and a module's input shape (C,H,W)
_MODEL = {
    "model": _texts,
    "models": _texts,
    "input_shape": lambda v, w: values.wholes(v, w, lo=1, hi=1 << 16),
}
_GRID = {  # the model grid of a profiling step (collect.profiling.target)
    **_MODEL,
    "family": _text_of(None),
    "widths": lambda v, w: values.numbers(v, w, above=0, hi=MAX_WIDTH_ANY),
    "precisions": _precisions,
    "layouts": _layouts,
    "batches": _batches,
    "imgsz": _one_imgsz,
}
#: per kind, the parameter keys a step may have and how each is checked
PARAMS: dict[str, dict[str, Check]] = {
    "sweep": {
        **_MODEL,
        "family": _texts,
        "widths": _widths,
        "depth": _depths,
        "precisions": _precisions,
        "layouts": _layouts,
        "backends": _backends,
        "batches": _batches,
        "imgsz": _imgsz,
        "device": lambda v, w: values.device_name(v, w),
        "max_channels": _count(1 << 20),
        "compile_mode": values.compile_mode,
        "warmup_ms": _warmup_ms,
        "budget_ms": _budget_ms,
        "check": values.flag,
        "extra": values.mapping,
    },
    "bench": {
        **_MODEL,
        "models": _texts,
        "family": _text_of(None),
        "widths": lambda v, w: values.numbers(v, w, above=0, hi=MAX_WIDTH_ANY),
        "batches": _batches,
        "engines": _texts,
        "pipeline_engine": _text_of(None),
        "pipeline_streams": lambda v, w: values.wholes(v, w, lo=1, hi=64),
        "pipeline_modes": lambda v, w: values.texts(v, w, PIPELINE_MODES),
        "pipeline_nms_topk": lambda v, w: values.whole(v, w, lo=1, hi=1 << 20),
        "device": lambda v, w: values.device_name(v, w),
        "imgsz": _one_imgsz,
        "budget_ms": _budget_ms,
        "warmup_ms": _warmup_ms,
        "seconds": _run_s,
        "predict": values.flag,
        "est_unit_s": _positive,
    },
    # compile_mode: the torch.compile mode (and rewrites) of a compile backend's engines
    "trace": {
        **_GRID,
        "iters": _count(MAX_ITERS),
        "backend": _one(_backends),
        "compile_mode": values.compile_mode,
    },
    "ncu": {
        **_GRID,
        "metric_set": _text_of(("occupancy", "throughput", "full", "stalls")),
        "timeout_s": _positive,
        # only the kernels whose demangled name matches (ncu --kernel-name regex:...)
        "kernel_regex": _text_of(None),
    },
    "gpm": {
        **_GRID,
        "seconds": _run_s,
        "gap_s": lambda v, w: values.number(v, w, lo=0, hi=60, unit="s"),
        "hz": lambda v, w: values.number(v, w, above=0, hi=1000, unit="Hz"),
        "backend": _one(_backends),
    },
    "ceilings": {
        "n": lambda v, w: values.wholes(v, w, lo=1, hi=65_536),
        "copy_bytes": lambda v, w: values.whole(v, w, lo=1, hi=1 << 40, unit="bytes"),
        "budget_ms": _budget_ms,
        "fill": _text_of(("randn", "zeros")),
    },
    "probe": {
        "family": _text_of(None),
        "width": lambda v, w: values.number(v, w, above=0, hi=MAX_WIDTH_ANY),
        "batch": _one(_batches),
        "reps": _count(100_000),
        "imgsz": _one_imgsz,
        "frames": _text_of(None),
    },
    "model_tables": {
        "models": _model_entries,
        "imgsz": _one_imgsz,
        "bytes_per_element": _count(8),
    },
    "numerics": {
        "widths": lambda v, w: values.numbers(v, w, above=0, hi=MAX_WIDTH_ANY),
        "family": _text_of(None),
        "precisions": _precisions,
        "photo_precisions": _precisions,
        "box_precisions": _precisions,
        "box_reference": _one(_precisions),
        "imgsz": _one_imgsz,
        "photo_imgsz": _one_imgsz,
        "batch": _one(_batches),
        "seeds": lambda v, w: values.wholes(v, w, lo=0, hi=2**32 - 1),
        "layout": _one(_layouts),
        "device": lambda v, w: values.device_name(v, w),
        # int8 without TensorRT (collect.engines.int8): calibrations measured, percentile
        "int8_calibrations": lambda v, w: values.texts(v, w, INT8_CALIBRATIONS),
        "int8_percentile": lambda v, w: values.number(v, w, lo=50, hi=100),
        "class_priors": lambda v, w: [values.flag(x, w) for x in values.items(v, w)],
    },
}


def check_params(kind: str, params, where: str, *, flags: bool = False) -> dict:
    """Check a step's (or a command's) parameters against :data:`PARAMS` of ``kind``: every key
    known, every value of its type and in its range; ``where`` names them in the message (with
    ``flags``, each value is named as its flag: ``budget_ms`` as ``--budget-ms``). Returns
    ``params`` unchanged (the runners parse them); a None value means the default."""
    values.mapping(params, f"{where} params")
    spec = PARAMS[kind]
    unknown = sorted(set(params) - set(spec))
    if unknown:
        raise UserError(
            f"{where} has unknown {kind} parameter(s) {', '.join(unknown)}; known: "
            f"{', '.join(sorted(spec))}"
        )
    for key, value in params.items():
        if value is not None:
            spec[key](value, "--" + key.replace("_", "-") if flags else f"{where} {key}")
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
    """Read and check a plan YAML (``name``, ``device``, ``steps`` with name/kind/out/params):
    the whole plan, every step's parameters included, before anything runs."""

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
    """The quick plan (:data:`DEFAULT_PLAN` under :data:`PLANS_DIR`), wherever the command runs."""
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


# --- techniques: fusion, autocast, batch buffer (yolo_sm.topics.techniques.collect)
# -----------------
RESNET_DEPTHS = (18, 34, 50, 101, 152)


def _resnet_depth(v, what):
    depth = values.whole(v, what, lo=18, hi=152)
    if depth not in RESNET_DEPTHS:
        raise UserError(f"{what} must be one of {', '.join(map(str, RESNET_DEPTHS))}, got {depth}")
    return depth


PARAMS["techniques"] = {
    "techniques": lambda v, w: values.texts(v, w, ("fusion", "autocast", "batch_buffer")),
    "backends": lambda v, w: values.texts(v, w, ("eager", "cudagraph")),
    "resnet_depth": lambda v, w: _resnet_depth(v, w),
    "resnet_imgsz": _one_imgsz,
    "resnet_batches": _batches,
    "widths": lambda v, w: values.numbers(v, w, above=0, hi=MAX_WIDTH_ANY),
    "autocast_batches": _batches,
    "buffer_width": lambda v, w: values.number(v, w, above=0, hi=MAX_WIDTH_ANY),
    "buffer_batches": _batches,
    "imgsz": _one_imgsz,
    "warmup_ms": _warmup_ms,
    "budget_ms": _budget_ms,
    "profile_iters": _count(20),
}


# --- cold and warm torch.compile builds (collect.cache_builds) -------------------------------


def _cache_modes(v, what):
    """compile_cache's ``modes``: compile modes built at every width of ``widths``, or a
    mapping from a width to the modes built at it."""
    if isinstance(v, dict):
        if not v:
            raise UserError(f"{what} names no width")
        return {
            values.number(w, f"{what} width", above=0, hi=MAX_WIDTH_ANY): [
                values.compile_mode(x, f"{what} at width {w}") for x in values.items(m, what)
            ]
            for w, m in v.items()
        }
    return [values.compile_mode(x, what) for x in values.items(v, what)]


def _mode_seconds(v, what):
    """compile_cache's ``mode_est_s``: a mapping from a compile mode to the seconds a unit of
    it takes before the table holds one."""
    if not isinstance(v, dict) or not v:
        raise UserError(f"{what} must map compile modes to seconds, e.g. {{max-autotune: 560}}")
    return {values.compile_mode(m, what): _positive(s, f"{what} of {m}") for m, s in v.items()}


PARAMS["compile_cache"] = {
    "family": _text_of(None),
    "widths": lambda v, w: values.numbers(v, w, above=0, hi=MAX_WIDTH_ANY),
    "batch": _one(_batches),
    "modes": _cache_modes,
    "precision": _one(_precisions),
    "layout": _one(_layouts),
    "imgsz": _one_imgsz,
    "warmup_ms": _warmup_ms,
    "budget_ms": _budget_ms,
    "timeout_s": _run_s,
    "mode_est_s": _mode_seconds,
}


# --- activation lifetimes and the caching allocator's pool (collect.memory) -----------------


def _lifetime_entries(v, what):
    """memory_lifetimes' ``models``: mappings with ``model`` and optional ``widths``."""
    entries = v if isinstance(v, (list, tuple)) else [v]
    if not entries:
        raise UserError(f"{what} needs at least one model")
    for e in entries:
        values.mapping(e, what)
        unknown = sorted(set(e) - {"model", "widths"})
        if "model" not in e or unknown:
            raise UserError(
                f"each entry of {what} needs 'model' and may have widths"
                + (f"; unknown {', '.join(unknown)}" if unknown else "")
            )
        values.text(e["model"], f"{what} model")
        if "widths" in e:
            values.numbers(e["widths"], f"{what} widths", above=0, hi=MAX_WIDTH_ANY)
    return entries


_MEMORY_COMMON = {
    "imgsz": _one_imgsz,
    "precision": _one(_precisions),
    "layout": _one(_layouts),
}
PARAMS["memory_lifetimes"] = {
    **_MEMORY_COMMON,
    "models": _lifetime_entries,
    "batch": _one(_batches),
}
PARAMS["memory_pool"] = {
    **_MEMORY_COMMON,
    "family": _text_of(None),
    "width": lambda v, w: values.number(v, w, above=0, hi=MAX_WIDTH_ANY),
    "forwards": _count(100_000),
    "batch_min": _one(_batches),
    "batch_max": _one(_batches),
    "seed": lambda v, w: values.whole(v, w, lo=0, hi=2**32 - 1),
    "cudnn_benchmark": values.flag,
    "confs": _texts,
    "timeout_s": _run_s,
}


# --- model shapes and input shapes (collect.wide_deep, collect.resolutions) ------------------


def _pairs(v, what):
    """wide_vs_deep ``pairs``: [wide_width, wide_depth, deep_width, deep_depth] per pair."""
    items = v if isinstance(v, (list, tuple)) else [v]
    if not items:
        raise UserError(f"{what} needs at least one pair")
    for p in items:
        nums = values.numbers(p, what, above=0, hi=MAX_WIDTH_ANY)
        if len(nums) != 4:
            raise UserError(
                f"each of {what} is [wide_width, wide_depth, deep_width, deep_depth], got {p!r}"
            )
    return items


def _frames(v, what):
    """Frame sizes WIDTHxHEIGHT (1280x720), each side 1 to MAX_IMGSZ pixels."""
    out = values.texts(v, what)
    for f in out:
        m = re.fullmatch(r"(\d+)x(\d+)", f.strip().lower())
        if not m or not all(1 <= int(g) <= MAX_IMGSZ for g in m.groups()):
            raise UserError(f"{what} are WIDTHxHEIGHT sizes such as 1280x720, got {f!r}")
    return out


PARAMS["wide_vs_deep"] = {
    "pairs": _pairs,
    "family": _text_of(None),
    "backends": _backends,
    "batches": _batches,
    "precision": _one(_precisions),
    "layout": _one(_layouts),
    "imgsz": _one_imgsz,
    "warmup_ms": _warmup_ms,
    "budget_ms": _budget_ms,
    "tolerance": lambda v, w: values.number(v, w, above=0, hi=0.5),
    "occupancy": values.flag,
    "check": values.flag,
}
PARAMS["resolutions"] = {
    "widths": lambda v, w: values.numbers(v, w, above=0, hi=MAX_WIDTH_ANY),
    "family": _text_of(None),
    "depth": lambda v, w: values.number(v, w, above=0, hi=4),
    "batch": _one(_batches),
    "frames": _frames,
    "fixed_backend": _text_of(("eager", "cudagraph", "compile")),
    "dynamic": lambda v, w: values.texts(v, w, ("eager", "compile")),
    "precision": _one(_precisions),
    "layout": _one(_layouts),
    "warmup_ms": _warmup_ms,
    "budget_ms": _budget_ms,
    "check": values.flag,
}


# --- two models sharing one GPU (collect.sharing) ---------------------------------------------


#: one side of a sharing pair: ``WIDTHxBATCH`` (``1.0x16``)
_SIDE = re.compile(r"(?P<width>[0-9]*\.?[0-9]+)x(?P<batch>[0-9]{1,6})")


def parse_pair(text: str, what: str = "pair") -> tuple[tuple[float, int], tuple[float, int]]:
    """``"1.0x16+0.25x1"`` -> ``((1.0, 16), (0.25, 1))``: the (width, batch) of the two engines
    of a sharing pair (engine ``a`` first); anything else is one UserError."""
    sides = str(text).replace(" ", "").split("+")
    parsed = [_SIDE.fullmatch(s) for s in sides]
    if len(sides) != 2 or not all(parsed):
        raise UserError(
            f"{what} must be two WIDTHxBATCH joined by '+' (1.0x16+0.25x1), got {text!r}"
        )
    out = []
    for m in parsed:
        width = values.number(m["width"], f"{what} width", above=0, hi=MAX_WIDTH_ANY)
        batch = values.whole(m["batch"], f"{what} batch", lo=1, hi=MAX_BATCH)
        out.append((width, batch))
    return out[0], out[1]


def _pairs(v, what):
    return [parse_pair(t, what) for t in values.texts(v, what)]


PARAMS["sharing"] = {
    "family": _text_of(None),
    "pairs": _pairs,
    "precision": _one(_precisions),
    "layout": _one(_layouts),
    "backend": _one(_backends),
    "imgsz": _one_imgsz,
    "seconds": _run_s,
    "gap_s": lambda v, w: values.number(v, w, lo=0, hi=60, unit="s"),
    "depth": _count(16),
    "hz": lambda v, w: values.number(v, w, above=0, hi=1000, unit="Hz"),
    "processes": values.flag,
    "trace_s": lambda v, w: values.number(v, w, lo=0, hi=10, unit="s"),
}


# --- live monitoring beside a bench (collect.plan_runners._run_monitor) ---------------------------
PARAMS["monitor"] = {
    **PARAMS["bench"],
    "interval": lambda v, w: values.number(v, w, lo=0.2, hi=60, unit="s"),
    "port": lambda v, w: values.whole(v, w, lo=0, hi=65535),
    "idle_s": lambda v, w: values.number(v, w, lo=0, hi=60, unit="s"),
}


# --- the int8 convolution kernels side by side (collect.int8_kernels) ------------------------
PARAMS["int8_kernels"] = {
    "widths": lambda v, w: values.numbers(v, w, above=0, hi=MAX_WIDTH_ANY),
    "family": _text_of(None),
    "batch": _one(_batches),
    "imgsz": _one_imgsz,
    "conv_kernels": lambda v, w: values.texts(v, w, INT8_CONV_KERNELS),
    "model_kernels": lambda v, w: values.texts(v, w, INT8_MODEL_KERNELS),
    "warmup_ms": _warmup_ms,
    "budget_ms": _budget_ms,
}


#: every step kind: one per entry of PARAMS (a kind is declared once, by its parameters)
KINDS: tuple[str, ...] = tuple(PARAMS)


def with_input(plan: Plan, device: str | None = None, shape=None) -> Plan:
    """``plan`` on ``device`` (``collect --device``) with every step's input at ``shape``
    ((C, H, W), ``collect --input-shape``): its ``imgsz`` becomes H and, where its kind takes
    one, its ``input_shape`` the shape, so that every table and FLOP count uses it."""
    steps = []
    for s in plan.steps:
        p = dict(s.params)
        if shape is not None:
            if "imgsz" in PARAMS.get(s.kind, {}):
                p["imgsz"] = int(shape[1])
            if "input_shape" in PARAMS.get(s.kind, {}):
                p["input_shape"] = [int(x) for x in shape]
        text = s.description
        if shape is not None:  # the description names the image size the step now measures
            text = re.sub(r"\b(\d{3,})x\1\b", f"{shape[1]}x{shape[2]}", text)
        steps.append(replace(s, params=p, description=text))
    flags = (f" --device {device}" if device else "") + (
        f" --input-shape {','.join(map(str, shape))}" if shape is not None else ""
    )
    return replace(plan, device=device or plan.device, steps=tuple(steps), flags=flags)
