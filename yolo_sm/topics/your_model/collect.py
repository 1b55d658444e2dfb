"""Notebook 11's plan for one model on this GPU (``LIVE = True``): sweep, trace, ncu occupancy
and layer table into ``results/<machine>/<model>/``. ``model``: a label (``yolov8_w0.25``), a
preset (``yolov8n``) or anything a step's ``model`` takes."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.plans import Plan, Step
from yolo_sm.contract.store import write_text_atomic
from yolo_sm.core.live import LiveRoot, live_root

# fmt: off

#: the sweep's batches, and the batch of the trace and the Nsight Compute pass
SWEEP_BATCHES = (1, 2, 4, 8, 16, 32, 64)
PROFILE_BATCH = 8
PRECISION, LAYOUT = "fp16", "nhwc"
_LABEL = re.compile(r"^(?P<family>[a-z0-9]+?)_w(?P<width>[0-9.]+)$")
_PRESET = re.compile(r"^(?P<family>yolov8|yolo11)(?P<scale>[nsmlx])$")


def model_params(model: str) -> dict:
    """The step parameters naming ``model``: ``{family, widths}`` for a label or preset,
    else ``{model}``."""
    if not model:
        raise UserError("set MODEL: a label (yolov8_w0.25), a preset (yolov8n) or a model path")
    m = _LABEL.match(model)
    if m:
        return {"family": m["family"], "widths": [float(m["width"])]}
    m = _PRESET.match(model)
    if m:
        return {"family": m["family"], "widths": [m["scale"]]}
    return {"model": model}


def slug(model: str) -> str:
    """A folder name for ``model`` (a path's stem), other characters as ``_``."""
    name = Path(model).stem if ("/" in model or model.endswith((".pt", ".yaml"))) else model
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "model"


def plan_for(model: str, device: str = "cuda", imgsz: int = 640) -> Plan:
    """The notebook's plan for ``model`` (steps named by role)."""
    who = model_params(model)
    one = {"precisions": PRECISION, "layouts": LAYOUT, "batches": PROFILE_BATCH}
    layers = {"imgsz": imgsz, "bytes_per_element": 2}
    if "model" in who:
        layers["models"] = [{"model": who["model"]}]
    else:
        layers["models"] = [{"model": who["family"], "widths": who["widths"]}]
    steps = (
        Step(
            "sweep",
            "sweep",
            "sweep.parquet",
            {
                **who, "precisions": [PRECISION], "layouts": [LAYOUT],
                "backends": ["eager", "cudagraph"], "batches": list(SWEEP_BATCHES),
                "imgsz": [imgsz], "budget_ms": 200,
            },
            f"{model}: {PRECISION} {LAYOUT}, eager and CUDA graph, batch "
            f"{SWEEP_BATCHES[0]}-{SWEEP_BATCHES[-1]}, {imgsz} px",
        ),
        Step(
            "trace", "trace", "trace.parquet", {**who, **one, "iters": 2},
            f"{model}: PyTorch-profiler kernels per layer, batch {PROFILE_BATCH}", est_s=60,
        ),
        Step(
            "ncu", "ncu", "ncu.parquet", {**who, **one, "metric_set": "occupancy"},
            f"{model}: Nsight Compute occupancy per kernel and layer, batch {PROFILE_BATCH}",
            est_s=150,
        ),
        Step(
            "model_layers", "model_tables", "model_layers.parquet", layers,
            f"{model}: channels, FLOPs and activation bytes per layer, {imgsz} px", est_s=60,
        ),
    )
    return Plan(f"your_model_{slug(model)}", device, steps, "")


def your_model_root(
    model: str, results: str = "results", device: str = "cuda", max_minutes: float | None = None
) -> LiveRoot:
    """A :class:`LiveRoot` collecting :func:`plan_for` ``model`` into
    ``<results>/<machine>/<model>/``."""
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(
            "LIVE = True collects on a CUDA GPU and torch sees none here; set LIVE = False"
        )
    gpu = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    machine = re.sub(r"[^A-Za-z0-9]+", "_", gpu).strip("_").lower()
    out = Path(results) / machine / slug(model)
    out.mkdir(parents=True, exist_ok=True)
    plan = plan_for(model, device)
    return live_root(None, plan=_written(plan, out), out=out, max_minutes=max_minutes)


def _written(plan: Plan, out: Path) -> Path:
    """The plan as ``plan.yaml`` in ``out`` (live_root reads a plan file)."""
    import yaml

    f = out / "plan.yaml"
    steps = [asdict(s) for s in plan.steps]
    write_text_atomic(f, yaml.safe_dump({"name": plan.name, "device": plan.device, "steps": steps}))
    return f
