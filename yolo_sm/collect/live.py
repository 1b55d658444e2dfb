"""live: split from contract.datasets."""

from __future__ import annotations

import json
import os
from pathlib import Path

from yolo_sm.collect.plans import load_plan, run_plan, step_state
from yolo_sm.contract.datasets import load_entry, manifests
from yolo_sm.contract.errors import NotAvailableError, UserError

LIVE: dict = {}


DEFAULT_PLAN = Path(__file__).resolve().parents[2] / "data" / "plans" / "h200.yaml"


def go_live(
    out: str | os.PathLike = "results/live",
    plan: str | os.PathLike = DEFAULT_PLAN,
    max_minutes: float | None = None,
) -> Path:
    """From now on :func:`load` collects each dataset that ``plan`` has a step for on this
    machine's GPU (once: into ``out``, resumable, with provenance) and reads it from there;
    datasets the plan cannot make (profile joins, the provisional tables) still come from the
    shipped data. Needs a CUDA GPU. Returns the live folder."""
    import torch

    if not torch.cuda.is_available():
        raise NotAvailableError(
            "live collection needs a CUDA GPU and torch sees none here; set LIVE = False to "
            "read the shipped H200 data"
        )
    LIVE.update(out=Path(out), plan=load_plan(plan), max_minutes=max_minutes)
    return Path(out)


def stop_live() -> None:
    """Back to the shipped data."""
    LIVE.clear()


def _live_step(name: str):
    """The step of the live plan that makes dataset ``name`` (``h200/x``: step ``x``), or None."""
    short = name.split("/", 1)[-1]
    return next((s for s in LIVE["plan"].steps if s.name == short), None)


def _load_live(name: str):

    plan, out = LIVE["plan"], LIVE["out"]
    step = _live_step(name)
    if step is None:  # not something the plan makes: the shipped table
        return load_entry(name, *manifests().get(name, (None, None)))
    short = step.name
    if step_state(step, plan, out) != "done":
        run_plan(plan, out, only=[short], max_minutes=LIVE["max_minutes"])
    mf = out / "manifest.json"
    entries = json.loads(mf.read_text())["datasets"] if mf.exists() else {}
    if short not in entries:
        raise UserError(
            f"live collection of {name} did not finish (see the messages above); run it again "
            f"or set LIVE = False"
        )
    return load_entry(f"live/{short}", out, entries[short])


def load(name: str):
    """:func:`yolo_sm.contract.datasets.load`, but after :func:`go_live` a dataset the plan can
    make is collected on this machine first."""
    if LIVE:
        return _load_live(name)
    return load_entry(name, *manifests().get(name, (None, None)))


def is_available(name: str) -> bool:
    """Whether :func:`load` can give ``name``: it is shipped, or (after :func:`go_live`) the
    plan has a step that collects it."""
    return (bool(LIVE) and _live_step(name) is not None) or name in manifests()
