"""Wide against deep at equal FLOPs: pairs of YOLO models timed as sweep points in one process,
each with a short Kineto pass; a pair whose FLOPs differ beyond ``tolerance`` is refused first."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path

from yolo_sm.contract.errors import UserError
from yolo_sm.core.grid import free_memory, run_grid
from yolo_sm.core.models import build_yolo, model_flops
from yolo_sm.core.models.matching import yolo_flops
from yolo_sm.core.profiling.kineto import occupancy_summary
from yolo_sm.core.sweep import Point, SweepSpec, check_environment, run_point
from yolo_sm.core.timing import engine_call
from yolo_sm.topics.wide_deep import WideDeepStep

#: the columns that name a point of a wide_vs_deep table
KEY = ("pair", "role", "backend", "batch")
ROLES = ("wide", "deep")


class WideDeepSpec(WideDeepStep):
    """A wide_vs_deep step's spec with the sweep's own checks of its grid."""

    def validated(self) -> WideDeepSpec:
        SweepSpec(
            family=(self.family,),
            widths=tuple(w for p in self.pairs for w, _ in p),
            backends=self.backends,
            batches=self.batches,
            device=self.device,
        ).validated()
        return self

    def sweep(self) -> SweepSpec:
        """The sweep spec each point runs under."""
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
        """(pair, role, point) in run order: pair by pair, wide then deep."""
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


def check_pairs(spec: WideDeepSpec, flops=yolo_flops) -> list[dict]:
    """FLOPs of both models per pair (at 64 px) and their relative difference; a pair
    beyond ``spec.tolerance`` is a :class:`UserError` before timing."""
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
    """Time every (pair, role, backend, batch) point of ``spec`` into ``out``
    (resumable, rewritten after every point); ``deadline`` skips a model that would end past it."""
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
