"""The ``int8_kernels`` step: each int8 conv timed alone per kernel (``scope`` conv: fp16, cudnn,
intmm, triton, triton_prequant), then each width's model per kernel (``scope`` model)."""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
from torch.nn import functional as F

from yolo_sm.contract.errors import UserError
from yolo_sm.core.engines import EngineConfig, build_engine
from yolo_sm.core.engines.base import photo_input, relative_l2
from yolo_sm.core.engines.int8 import Int8Conv, graph_counts, quantize_int8
from yolo_sm.core.engines.int8_triton import conv_int8, int_mm_eligible, last_tile, out_size
from yolo_sm.core.grid import (
    Pace,
    free_memory,
    held,
    longest_by_width,
    run_grid,
    run_pace,
    width_scaled,
)
from yolo_sm.core.models import build_yolo, hooked
from yolo_sm.core.provenance import stamp
from yolo_sm.core.sweep import failure
from yolo_sm.core.timing import engine_call, measure, measure_rounds
from yolo_sm.topics.precision import Int8KernelStep

#: the columns that name a row of an int8_kernels table
KEY = ("width", "batch", "scope", "layer", "kernel")


class Int8KernelSpec(Int8KernelStep):
    """An int8_kernels step's spec with the engine's own checks of its batch and size."""

    def validated(self) -> Int8KernelSpec:
        EngineConfig(batch=self.batch, imgsz=self.imgsz, device=self.device)
        return super().validated()


def conv_ops(mod: Int8Conv, x) -> float:
    """Multiply-adds x 2 of one call of ``mod`` on ``x`` (N, C, H, W)."""
    n, c, h, w = x.shape
    k, _, r, s = mod.weight_int8.shape
    ho, wo = out_size(h, w, r, s, mod.stride, mod.padding)
    return 2.0 * n * ho * wo * k * c * r * s


def captured_inputs(module, x) -> list[tuple[str, Int8Conv, object]]:
    """(name, int8 conv, its input) of every :class:`Int8Conv` of ``module`` in one forward on
    ``x`` (the inputs are kept: the caller frees them)."""
    seen, hooks = [], []
    for name, mod in module.named_modules():
        if isinstance(mod, Int8Conv):

            def hook(m, args, name=name):
                seen.append((name, m, args[0].detach().clone()))

            hooks.append(mod.register_forward_pre_hook(hook))
    with hooked(hooks), torch.inference_mode():
        module(x)
    return seen


def _fp16_call(mod: Int8Conv, conv, x):
    """The fp16 convolution ``mod`` replaced (``conv``: its original weight and bias) + SiLU."""

    w = conv.weight.detach().to(device=x.device, dtype=x.dtype)
    w = w.contiguous(memory_format=torch.channels_last)
    b = None if conv.bias is None else conv.bias.detach().to(device=x.device, dtype=x.dtype)

    def call():
        y = F.conv2d(x, w, b, mod.stride, mod.padding, mod.dilation, mod.groups)
        return F.silu(y) if mod.silu else y

    return call


def conv_rows(spec: Int8KernelSpec, width: float, model, fp16_convs: dict) -> list[dict]:
    """The ``conv`` rows of one width (see the module docstring)."""
    cfg = EngineConfig(
        backend="eager", precision="int8", layout="nhwc", batch=spec.batch, imgsz=spec.imgsz,
        device=spec.device, int8_kernel="cudnn", check=False, int8_handoff=False,
    )  # fmt: skip
    eng = build_engine(model, cfg)  # no hand-off: every conv reads and writes fp16 alone
    rows = []
    try:
        seen = captured_inputs(eng.module, photo_input(cfg))
        for i, (name, mod, x) in enumerate(seen):
            base = {
                "width": width, "batch": spec.batch, "scope": "conv", "layer": name, "index": i,
                "in_channels": mod.in_channels, "out_channels": mod.out_channels,
                "kernel_size": int(mod.weight_int8.shape[2]), "stride": int(mod.stride[0]),
                "in_h": int(x.shape[2]), "in_w": int(x.shape[3]), "ops": conv_ops(mod, x),
            }  # fmt: skip
            ref = mod._emulate(x).float()
            quant = measure(
                lambda x=x, mod=mod: quantize_int8(x, float(mod.input_scale)),
                device=spec.device, warmup_ms=spec.warmup_ms, budget_ms=spec.budget_ms,
                with_provenance=False,
            ).median_ms  # fmt: skip
            conv = fp16_convs[name]
            for kernel in spec.conv_kernels:
                timed = _time_conv(spec, kernel, mod, conv, x, ref, quant, base["ops"])
                rows.append({**base, **timed})
            mod.kernel = "cudnn"
            del x, ref
        del seen
    finally:
        eng.close()
        free_memory()
    return rows


def _time_conv(spec, kernel, mod: Int8Conv, conv, x, ref, quant_ms, ops: float) -> dict:
    """One kernel's row of one convolution: time, ops rate, error against the emulation."""
    (r, s) = mod.weight_int8.shape[2:]
    out = {"kernel": kernel, "status": "ok", "message": "", "tile": ""}
    if kernel == "intmm" and not int_mm_eligible(
        mod.in_channels, mod.out_channels, r, s, mod.stride, mod.padding
    ):
        return {**out, "status": "skipped", "message": "torch._int_mm: 1x1 stride-1 only"}
    try:
        if kernel == "fp16":
            call = _fp16_call(mod, conv, x)
        elif kernel == "triton_prequant":
            w, scale, bias = mod._operands(x, "packed")

            def call():
                xq = quantize_int8(x, float(mod.input_scale))
                return conv_int8(
                    xq, w, scale, bias, r=r, s=s, stride=mod.stride, padding=mod.padding,
                    silu=mod.silu, quantized_input=True, out_dtype=x.dtype,
                )  # fmt: skip
        else:
            mod.kernel = kernel

            def call():
                return mod(x)

        y = call()
        if kernel != "fp16":
            out["rel_err"] = relative_l2(y.float(), ref)
        tile = last_tile() if kernel.startswith("triton") else None
        if tile:
            out["tile"] = "M{BLOCK_M} N{BLOCK_N} K{BLOCK_K} w{num_warps} s{num_stages}"
            out["tile"] = out["tile"].format(**tile)
        m = measure(call, device=spec.device, warmup_ms=spec.warmup_ms, budget_ms=spec.budget_ms,
                    with_provenance=False)  # fmt: skip
    except Exception as e:  # noqa: BLE001 - recorded as the row's error, the others go on
        return {**out, **failure(e)}
    ms = m.median_ms
    out.update(median_ms=ms, iqr_ms=m.iqr_ms, tops=ops / ms / 1e9)
    if kernel != "fp16":
        out["quantize_ms"] = quant_ms
    if kernel in ("cudnn", "intmm") and mod.fallback:
        out.update(status="fallback", message=mod.fallback[:300])
    return out


def model_rows(spec: Int8KernelSpec, width: float, model) -> list[dict]:
    """The ``model`` rows of one width: CUDA-graph engines per kernel, timed interleaved."""
    rows, built = {}, {}
    try:
        for kernel in spec.model_kernels:
            prec, own = ("fp16", "auto") if kernel == "fp16" else ("int8", kernel)
            cfg = EngineConfig(
                backend="cudagraph", precision=prec, layout="nhwc", batch=spec.batch,
                imgsz=spec.imgsz, device=spec.device, int8_kernel=own,
            )  # fmt: skip
            rows[kernel] = {"width": width, "batch": spec.batch, "scope": "model", "layer": "",
                            "kernel": kernel}  # fmt: skip
            t0 = time.perf_counter()
            try:
                eng = built[kernel] = build_engine(model, cfg)
            except Exception as e:  # noqa: BLE001 - a declined engine is a row
                rows[kernel].update(failure(e))
                free_memory()
                continue
            counts = graph_counts(eng.module) if prec == "int8" else {}
            rows[kernel].update(
                rel_err=eng.rel_err, build_s=time.perf_counter() - t0,
                quant_convs=counts.get("int8_convs", math.nan),
                quant_fallbacks=counts.get("fp16", math.nan),
                kernel_convs=_kernel_convs(kernel, counts),
            )  # fmt: skip
        timed = measure_rounds(
            {k: engine_call(e) for k, e in built.items()}, batch=spec.batch, device=spec.device,
            warmup_ms=10 * spec.warmup_ms, budget_ms=10 * spec.budget_ms, with_provenance=False,
        )  # fmt: skip
        for k, m in timed.items():
            if isinstance(m, BaseException):
                rows[k].update(failure(m))
                continue
            rows[k].update(
                status="ok", message="", median_ms=m.median_ms, iqr_ms=m.iqr_ms,
                img_per_s=m.img_per_s, sm_clock_mhz=m.summary()["sm_clock_mhz"],
            )  # fmt: skip
    finally:
        for eng in built.values():
            eng.close()
        built.clear()
        free_memory()
    return list(rows.values())


def _kernel_convs(kernel: str, counts: dict) -> float:
    """Of an int8 engine's convolutions, how many ran the engine's own kernel."""
    if not counts:
        return math.nan
    if kernel == "cudnn":
        return counts["fused_int8"] + counts["fused"] + counts["unfused"]
    return counts.get(kernel, math.nan)


def _unit_key(unit) -> tuple[float, str]:
    return (round(float(unit[0]), 6), unit[1])


def _row_key(row) -> tuple[float, str]:
    return (round(float(row["width"]), 6), row["scope"])


def _held(spec: Int8KernelSpec, out) -> tuple[list[dict], list[tuple[float, str]]]:
    return held(spec.validated().units(), out, KEY, "int8_kernels", _unit_key, _row_key)


def missing_units(spec: Int8KernelSpec, out) -> list[tuple[float, str]]:
    """The (width, scope) units of ``spec`` the table ``out`` lacks."""
    return _held(spec, out)[1]


def unit_estimate(unit, pace: Pace) -> float:
    """Seconds the (width, scope) ``unit`` will take, scaled from the scope's longest unit."""
    width, scope = unit
    est = width_scaled(longest_by_width(pace.rows, lambda r: r.get("scope") == scope), width)
    return run_pace(unit, pace) if est is None else est


def missing_seconds(spec: Int8KernelSpec, out: str | os.PathLike) -> float | None:
    """Seconds the units ``out`` lacks will take (None: a scope with nothing measured)."""
    rows, todo = _held(spec, out)
    timed = (r for r in rows if r.get("unit_s") is not None and math.isfinite(r["unit_s"]))
    scopes = {r.get("scope") for r in timed}
    if any(scope not in scopes for _, scope in todo):
        return None
    pace = Pace(rows=rows)
    return sum(unit_estimate(u, pace) for u in todo)


def run_int8_kernels(
    spec: Int8KernelSpec,
    out: str | os.PathLike,
    progress: bool = True,
    deadline: float | None = None,
    est_unit_s: float | None = None,
):
    """Every (width, scope) unit of ``spec`` into the table ``out`` (resumable, with
    provenance); no unit starts that would end past ``deadline`` (``time.monotonic()``)."""
    spec = spec.validated()
    if not torch.cuda.is_available():
        raise UserError("int8_kernels needs a CUDA device; none is visible here")

    def open_width(unit):
        try:
            m = build_yolo(spec.family, unit[0])
            convs = {}
            if unit[1] == "conv":  # the fp16 convolutions by the names the int8 model gives them
                for name, mod in m.named_modules():
                    conv = getattr(mod, "conv", None)
                    if isinstance(conv, torch.nn.Conv2d):
                        convs[f"{name}.conv" if name else "conv"] = conv
            return {"model": m, "convs": convs}
        except Exception as e:  # noqa: BLE001 - recorded as the unit's error row
            return {"error": e}

    def measure_unit(unit, state):
        width, scope = unit
        head = {"width": width, "batch": spec.batch, "scope": scope, "layer": "", "kernel": ""}
        try:
            if "error" in state:
                raise state["error"]
            if scope == "conv":
                rows = conv_rows(spec, width, state["model"], state["convs"])
            else:
                rows = model_rows(spec, width, state["model"])
        except Exception as e:  # noqa: BLE001 - e.g. the inputs of every conv at once OOM
            rows = [{**head, **failure(e)}]
        prov = stamp(spec.device)
        return [{**r, **prov} for r in rows]

    def estimate(unit, pace: Pace) -> float:
        est = unit_estimate(unit, pace)
        return est if est or not est_unit_s else est_unit_s

    df = run_grid(
        spec.units(),
        measure_unit,
        key=_unit_key,
        row_key=_row_key,
        group=lambda u: u,
        open_group=open_width,
        out=Path(out),
        columns=KEY,
        kind="int8_kernels",
        metadata={"spec": asdict(spec), "argv": sys.argv},
        deadline=deadline,
        estimate=estimate,
        seconds_column="unit_s",
        describe=lambda u: f"width {u[0]:g} {u[1]}s",
        progress=progress,
        device=spec.device,
    )
    free_memory()
    return df
