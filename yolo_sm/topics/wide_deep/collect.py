"""Wide against deep at equal FLOPs: pairs of YOLO models (one wider at a small depth, one
narrower at a larger depth; :func:`yolo_sm.core.models.matching.matched_pairs` finds them)
timed as sweep points in one process, each with a short Kineto pass for the time-weighted
occupancy. A pair whose FLOPs differ by more than ``tolerance`` is refused before timing."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from yolo_sm.contract.errors import UserError
from yolo_sm.core.grid import free_memory, run_grid
from yolo_sm.core.models import build_yolo, model_flops
from yolo_sm.core.models.matching import TOLERANCE, yolo_flops
from yolo_sm.core.profiling.kineto import occupancy_summary
from yolo_sm.core.sweep import Point, SweepSpec, check_environment, run_point
from yolo_sm.core.timing import engine_call

#: the columns that name a point of a wide_vs_deep table
KEY = ("pair", "role", "backend", "batch")
ROLES = ("wide", "deep")


@dataclass(frozen=True)
class WideDeepSpec:
    """``pairs``: ((wide width, wide depth), (deep width, deep depth)) per pair; every pair is
    timed at each backend and batch, fp16 NHWC (``precision`` / ``layout`` to change)."""

    pairs: tuple = (((0.5, 0.33), (0.371, 1.0)),)
    family: str = "yolov8"
    backends: tuple[str, ...] = ("eager", "cudagraph")
    batches: tuple[int, ...] = (1, 16, 64)
    precision: str = "fp16"
    layout: str = "nhwc"
    imgsz: int = 640
    device: str = "cuda"
    warmup_ms: float = 50.0
    budget_ms: float = 150.0
    tolerance: float = TOLERANCE
    occupancy: bool = True  # the Kineto pass per point
    check: bool = True

    @classmethod
    def from_mapping(cls, data: dict) -> WideDeepSpec:
        """From a plan step's params: ``pairs`` as [wide_width, wide_depth, deep_width,
        deep_depth] lists; the other keys as :class:`WideDeepSpec` names them."""
        kw = {k: v for k, v in data.items() if v is not None}
        if "pairs" in kw:
            kw["pairs"] = tuple(_pair(p) for p in kw["pairs"])
        for k in ("backends", "batches"):
            if k in kw:
                v = kw[k]
                kw[k] = tuple(v) if isinstance(v, (list, tuple)) else (v,)
        return cls(**kw).validated()

    def validated(self) -> WideDeepSpec:
        if not self.pairs:
            raise UserError("wide_vs_deep needs at least one pair")
        pairs = tuple(_pair(p) for p in self.pairs)
        # the sweep's own checks (backends, batches, imgsz, budget, device)
        SweepSpec(
            family=(self.family,),
            widths=tuple(w for p in pairs for w, _ in p),
            precisions=(self.precision,),
            layouts=(self.layout,),
            backends=self.backends,
            batches=self.batches,
            imgsz=(self.imgsz,),
            device=self.device,
            warmup_ms=self.warmup_ms,
            budget_ms=self.budget_ms,
        ).validated()
        if not 0 < self.tolerance < 1:
            raise UserError(f"tolerance must be in (0, 1), got {self.tolerance!r}")
        return replace(
            self,
            pairs=pairs,
            backends=tuple(str(b).lower() for b in self.backends),
            batches=tuple(int(b) for b in self.batches),
        )

    def sweep(self) -> SweepSpec:
        """The sweep spec each point runs under (warm-up, budget, check)."""
        return SweepSpec(
            family=(self.family,),
            precisions=(self.precision,),
            layouts=(self.layout,),
            backends=self.backends,
            batches=self.batches,
            imgsz=(self.imgsz,),
            device=self.device,
            warmup_ms=self.warmup_ms,
            budget_ms=self.budget_ms,
            check=self.check,
        ).validated()

    def units(self) -> list[tuple[int, str, Point]]:
        """(pair, role, point) in run order: pair by pair, the wide model's points, then the
        deep one's, each model's backends and batches together."""
        out = []
        for i, pair in enumerate(self.pairs):
            for role, (w, d) in zip(ROLES, pair, strict=True):
                for back in self.backends:
                    for b in self.batches:
                        p = Point(
                            self.family, "", float(w), float(d), 2048, self.precision,
                            self.layout, back, int(b), int(self.imgsz), "default", self.device,
                        )  # fmt: skip
                        out.append((i, role, p))
        return out


def _pair(p) -> tuple:
    """((wide width, wide depth), (deep width, deep depth)) from 4 numbers or 2 pairs."""
    flat = [x for part in p for x in (part if isinstance(part, (list, tuple)) else [part])]
    try:
        nums = [float(x) for x in flat]
    except (TypeError, ValueError):
        nums = []
    if len(nums) != 4 or not all(n > 0 for n in nums):
        raise UserError(
            f"a wide_vs_deep pair is [wide_width, wide_depth, deep_width, deep_depth], got {p!r}"
        )
    return ((nums[0], nums[1]), (nums[2], nums[3]))


def check_pairs(spec: WideDeepSpec, flops=yolo_flops) -> list[dict]:
    """FLOPs per image of both models of each pair (counted at a 64-pixel input: convolution
    FLOPs scale with the pixel count) and the deep one's relative difference; a pair further
    apart than ``spec.tolerance`` is a :class:`UserError` before anything is timed."""
    out = []
    for i, ((ww, wd), (dw, dd)) in enumerate(spec.pairs):
        if not (ww > dw and wd < dd):
            raise UserError(
                f"pair {i}: the wide model (width {ww:g}, depth {wd:g}) must be wider and "
                f"shallower than the deep one (width {dw:g}, depth {dd:g})"
            )
        fw = flops(spec.family, ww, wd, 64)
        fd = flops(spec.family, dw, dd, 64)
        rel = fd / fw - 1
        if abs(rel) > spec.tolerance:
            raise UserError(
                f"pair {i}: width {dw:g} depth {dd:g} has {rel:+.1%} the FLOPs of width {ww:g} "
                f"depth {wd:g}, beyond the {spec.tolerance:.0%} tolerance (find a match with "
                "yolo_sm.core.models.matching.match_flops)"
            )
        out.append({"pair": i, "match_rel_diff": rel})
    return out


def run_wide_vs_deep(
    spec: WideDeepSpec, out: str | os.PathLike, progress: bool = True, deadline: float | None = None
):
    """Time every (pair, role, backend, batch) point of ``spec`` in this process into the
    table ``out`` (sweep columns plus ``pair``, ``role``, ``match_rel_diff`` and, with
    ``spec.occupancy``, the Kineto pass's columns), rewritten after every point; points it
    already holds are skipped (the grid runner resumes). ``deadline`` (``time.monotonic()``)
    skips a model whose points would end past it. Returns the table."""
    spec = spec.validated()
    sweep = spec.sweep()
    check_environment(sweep)
    rel = {r["pair"]: r["match_rel_diff"] for r in check_pairs(spec)}
    extra = None
    if spec.occupancy:

        def extra(engine):
            return occupancy_summary(engine_call(engine), device=engine.config.device, iters=2)

    def open_model(unit):
        p = unit[2]
        try:
            m = build_yolo(p.family, p.width, depth=p.depth, max_channels=p.max_channels)
            return {"model": m, "flops": model_flops(m, p.imgsz)}
        except Exception as e:  # noqa: BLE001 - recorded as the points' error rows
            return {"error": e}

    def measure(unit, state):
        i, role, p = unit
        tag = {"pair": i, "role": role, "match_rel_diff": rel[i] if role == "deep" else 0.0}
        if "error" in state:
            msg = f"{type(state['error']).__name__}: {state['error']}".splitlines()[0][:500]
            return [{**asdict(p), "status": "error", "message": msg, **tag}]
        row = run_point(state["model"], p, sweep, state["flops"], extra=extra)
        return [{**row, **tag}]

    def describe(u):
        return f"pair {u[0]} {u[1]} w{u[2].width:g} d{u[2].depth:g} {u[2].backend} b{u[2].batch}"

    meta = {"spec": asdict(spec), "argv": sys.argv}  # the grid runner scrubs its paths
    df = run_grid(spec.units(), measure, key=lambda u: (u[0], u[1], u[2].backend, u[2].batch),
                  row_key=lambda r: tuple(r[c] for c in KEY), group=lambda u: (u[0], u[1]),
                  open_group=open_model, out=Path(out), columns=KEY, kind="wide_vs_deep",
                  metadata=meta, deadline=deadline, describe=describe, progress=progress,
                  device=spec.device)  # fmt: skip
    free_memory()
    return df
