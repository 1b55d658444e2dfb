"""Ultralytics model YAMLs, found by name as ``YOLO(name)`` finds them and read as data: safe
loader, capped in bytes and nodes, activation in :data:`ACTIVATIONS` and every module a layer
class of torch.nn, torchvision.ops or ultralytics.nn.modules, checked before ultralytics sees it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

from yolo_sm.contract import values
from yolo_sm.contract.errors import UserError
from yolo_sm.core.offline import prepare_ultralytics

#: activations a model YAML may name (``nn.X(...)`` or ``torch.nn.X(...)``, literal arguments)
ACTIVATIONS = (
    "CELU", "ELU", "GELU", "Hardsigmoid", "Hardswish", "Hardtanh", "Identity", "LeakyReLU",
    "Mish", "PReLU", "ReLU", "ReLU6", "SELU", "SiLU", "Sigmoid", "Softplus", "Tanh",
)  # fmt: skip
#: largest model YAML (bytes) and most YAML nodes after alias expansion
MAX_BYTES, MAX_NODES = 256 << 10, 20_000
#: largest repeat count and largest whole number in a layer's arguments (channels, classes)
MAX_REPEATS, MAX_ARG = 64, 1 << 16
_BARE = re.compile(r"^[\w.-]+\.ya?ml$")


def locate(name: str) -> tuple[Path, str] | None:
    """(the file, the scale letter or "") of model YAML ``name``, or None where nothing is
    found (see the module docstring)."""
    p = Path(name)
    bare = _BARE.match(name) is not None  # a name, not a path: ultralytics' folder too
    if p.stem in (f"yolov{d}{x}6" for x in "nsmlx" for d in (5, 8)):  # ultralytics' P6 rename
        p = p.with_name(re.sub(r"(\d+)([nslmx])6(.+)?$", r"\1\2-p6\3", p.stem) + p.suffix)
    unified = Path(re.sub(r"(\d+)([nslmx])(.+)?$", r"\1\3", str(p)))  # yaml_model_load's rule
    found = next((c for c in (p, unified) if c.is_file()), None)
    if found is None and bare:
        from ultralytics.utils.checks import check_yaml

        prepare_ultralytics()
        hits = [check_yaml(c.name, hard=False) for c in (p, unified)]
        found = next((Path(h) for h in hits if h), None)
    if found is None:
        return None
    from ultralytics.nn.tasks import guess_model_scale

    return found, guess_model_scale(p)


def not_found(name: str) -> str:
    """The sentence for a model YAML ``name`` that :func:`locate` does not find."""
    unified = re.sub(r"(\d+)([nslmx])(.+)?$", r"\1\3", Path(name).name)
    names = name if unified == Path(name).name else f"{name} or {unified}"
    where = "" if "/" in name else " nor among ultralytics' model YAMLs (cfg/models)"
    return f"model file {names} does not exist here{where}"


def read(name: str) -> dict:
    """The model dict of YAML ``name`` as ultralytics' ``yaml_model_load`` gives it (``scale``
    from the name, ``yaml_file``), checked (module docstring); else one UserError."""
    hit = locate(name)
    if hit is None:
        raise UserError(not_found(name))
    path, scale = hit
    if path.stat().st_size > MAX_BYTES:
        raise UserError(f"model YAML {name} is larger than {MAX_BYTES >> 10} KiB: not a model")
    body = values.read_text(path, "model YAML")
    try:
        d = yaml.load(body, Loader=yaml.SafeLoader)  # noqa: S506 - the safe loader
    except yaml.YAMLError:
        raise UserError(f"model YAML {name} is not valid YAML") from None
    except (ValueError, TypeError, OverflowError, RecursionError):
        raise UserError(f"model YAML {name} holds a value YAML cannot read") from None
    _count_nodes(d, name)
    check(d, name)
    d["scale"] = scale
    d["yaml_file"] = str(path)
    return d


def _count_nodes(d, name: str) -> None:
    stack, n = [d], 0
    while stack:
        n += 1
        if n > MAX_NODES:
            raise UserError(
                f"model YAML {name} expands to more than {MAX_NODES} values (aliases?): not a model"
            )
        o = stack.pop()
        if isinstance(o, dict):
            stack += [*o.keys(), *o.values()]
        elif isinstance(o, list):
            stack += o


def check(d, name: str) -> None:
    """A UserError unless ``d`` is a model dict ultralytics may evaluate safely (activation made
    canonical; repeats and numbers within :data:`MAX_REPEATS` / :data:`MAX_ARG`)."""
    if not isinstance(d, dict) or not isinstance(d.get("backbone"), list) or not d["backbone"]:
        raise UserError(f"model YAML {name} is not an ultralytics model (no backbone list)")
    if not isinstance(d.get("head", []), list):
        raise UserError(f"model YAML {name}: head must be a list of layers")
    d.setdefault("head", [])
    if "activation" in d and d["activation"] is not None:
        d["activation"] = activation(d["activation"], name)
    nc = d.get("nc", 80)
    if isinstance(nc, bool) or not isinstance(nc, int) or not 0 < nc <= MAX_ARG:
        raise UserError(f"model YAML {name}: nc must be a whole number from 1 to {MAX_ARG}")
    for i, layer in enumerate(d["backbone"] + d["head"]):
        if not (isinstance(layer, list) and len(layer) == 4 and isinstance(layer[3], list)):
            raise UserError(f"model YAML {name}: layer {i} is not [from, repeats, module, args]")
        _, n, module, args = layer
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= MAX_REPEATS:
            raise UserError(f"model YAML {name}: layer {i} repeats must be 1 to {MAX_REPEATS}")
        if layer_class(module) is None:
            raise UserError(
                f"model YAML {name}: layer {i} names {str(module)[:80]!r}, which is not a layer "
                "of torch.nn, torchvision.ops or ultralytics.nn.modules"
            )
        if _too_big(args):
            raise UserError(f"model YAML {name}: layer {i} asks for a number above {MAX_ARG}")
        if module == "TorchVision" and len(args) > 2:
            args[2] = None  # no pretrained weights: nothing downloaded, random like every YAML


def _too_big(v) -> bool:
    if isinstance(v, list):
        return any(_too_big(x) for x in v)
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) > MAX_ARG


def activation(text, name: str) -> str:
    """``text`` as ``nn.X(args)`` when it names one of :data:`ACTIVATIONS` with literal
    arguments; else a UserError. The returned text is built here, not copied from the file."""
    try:
        call = ast.parse(str(text).strip(), mode="eval").body
        parts, func = [], call.func
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        parts.append(func.id)
        args = [ast.literal_eval(a) for a in call.args]
        kws = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        ok = parts[0] in ACTIVATIONS and parts[1:] in (["nn"], ["nn", "torch"])
        ok = ok and None not in kws
        ok = ok and all(isinstance(v, (int, float, bool)) for v in [*args, *kws.values()])
    except (SyntaxError, AttributeError, ValueError, TypeError, MemoryError, RecursionError):
        ok = False
    if not ok:
        raise UserError(
            f"model YAML {name}: activation {str(text)[:80]!r} is not allowed; use one of "
            f"nn.{', nn.'.join(ACTIVATIONS)} with number arguments, e.g. nn.SiLU()"
        )
    text = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kws.items())])
    return f"nn.{parts[0]}({text})"


def layer_class(module):
    """The ``nn.Module`` class ultralytics' parser builds for ``module``, or None unless it is a
    layer of torch.nn, torchvision.ops or ultralytics.nn.modules."""
    import torch
    from ultralytics.nn import tasks

    if not isinstance(module, str) or not re.fullmatch(r"[\w.]{1,80}", module):
        return None
    if module.startswith("nn."):
        cls = getattr(torch.nn, module[3:], None)
    elif module.startswith("torchvision.ops."):
        import torchvision.ops

        cls = getattr(torchvision.ops, module[16:], None)
    else:
        cls = vars(tasks).get(module)
        if not str(getattr(cls, "__module__", "")).startswith("ultralytics.nn.modules"):
            return None
    ok = isinstance(cls, type) and issubclass(cls, torch.nn.Module)
    return cls if ok else None


def model_class(d: dict):
    """The ultralytics model class ``YOLO(name)`` builds ``d`` with: YOLOE / World by the
    file's name, RT-DETR by its decoder head, else the class of its task (``YOLO.task_map``)."""
    from ultralytics import YOLO
    from ultralytics.nn import tasks

    stem = Path(d.get("yaml_file", "")).stem
    head = str(d["head"][-1][2] if d["head"] else d["backbone"][-1][2])
    if "yoloe" in stem:
        return tasks.YOLOESegModel if "seg" in stem else tasks.YOLOEModel
    if "-world" in stem:
        return tasks.WorldModel
    if "RTDETR" in head:
        return tasks.RTDETRDetectionModel
    task = tasks.guess_model_task(d) or "detect"
    return YOLO.task_map.fget(None)[task]["model"]
