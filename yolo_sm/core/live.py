"""Live collection as a dataset root: ``live_root(DATA, plan=...)`` collects each dataset its plan
has a step for on this machine (once, resumable) before loading it, and gives the others from
the root it stands in for."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from yolo_sm.contract.datasets import MACHINE_FIELDS, DataRoot, load_entry, open_root
from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.plans import Plan, Step, load_plan
from yolo_sm.core.plans import run_plan, step_state
from yolo_sm.core.provenance import collect, gpu_name


@dataclass(frozen=True)
class LiveRoot(DataRoot):
    """The folder ``plan`` collects into on this machine, in front of root ``base`` (or None)."""

    plan: Plan | None = None
    base: DataRoot | None = None
    max_minutes: float | None = None

    def step(self, name: str) -> Step | None:
        return next((s for s in self.plan.steps if s.name == name), None) if self.plan else None

    def names(self) -> list[str]:
        own = {s.name for s in self.plan.steps} if self.plan else set()
        return sorted(own | set(self.entries()) | set(self.base.names() if self.base else ()))

    def has(self, name: str) -> bool:
        """Whether the plan collects ``name``, this folder or the base root holds it."""
        return (
            self.step(name) is not None
            or name in self.entries()
            or bool(self.base and self.base.has(name))
        )

    def info(self, name: str) -> dict:
        """``name``'s manifest entry here, else its plan step's, else the base root's."""
        entries = self.entries()
        if name in entries:
            return entries[name]
        step = self.step(name)
        if step is not None:
            return {
                "file": step.out,
                "kind": step.dataset_kind,
                "description": step.description,
                "command": f"yolo-sm collect --plan {self.plan.path} --out {self.path} "
                f"--only {name}",
                "params": step.params,
            }
        if self.base is not None and self.base.has(name):
            return self.base.info(name)
        return DataRoot.info(self, name)  # raises, naming what this folder holds

    def load(self, name: str):
        """Dataset ``name``, its plan step collected here first; else from the base root."""
        step = self.step(name)
        if step is None:
            if name not in self.entries() and self.base is not None and self.base.has(name):
                return self.base.load(name)
            return DataRoot.load(self, name)
        if step_state(step, self.plan, self.path) != "done":
            run_plan(self.plan, self.path, only=[name], max_minutes=self.max_minutes)
        entries = self.entries()
        if name not in entries:
            raise UserError(
                f"live collection of {name} did not finish (see the messages above); run it "
                "again or set LIVE = False"
            )
        return load_entry(f"{self.name}/{name}", self.path, entries[name])

    def machine(self) -> dict:
        """This machine as its datasets record it, else as provenance reads it now."""
        if self.entries():
            return DataRoot.machine(self)
        prov = collect(self.plan.device if self.plan else "cpu")
        return {f: str(prov[f]) for f in MACHINE_FIELDS if prov.get(f) not in (None, "")}


#: where live collection writes unless told: one folder per GPU model under it
LIVE_DIR = Path("results") / "live"


def machine_folder(device: str) -> str:
    """This machine's live folder name: its GPU model in lower case with dashes, else ``cpu``."""
    name = gpu_name(device)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") if name else "cpu"


def live_root(
    data: str | os.PathLike | DataRoot | None = "h200",
    plan: str | os.PathLike | None = None,
    out: str | os.PathLike | None = None,
    max_minutes: float | None = None,
) -> LiveRoot:
    """A :class:`LiveRoot` collecting ``plan`` (default: the one ``data`` was collected with) into
    ``out`` (default: :data:`LIVE_DIR`/:func:`machine_folder`), in front of root ``data``."""
    import torch

    base = data if isinstance(data, DataRoot) or data is None else open_root(data)
    if plan is None:
        if base is None:
            raise UserError("live_root needs a plan when it stands in for no root")
        plan = base.plan_file()
        if plan is None:
            raise UserError(f"root {base.name} names no plan it was collected with: give plan=")
    plan = load_plan(plan)
    if plan.device.startswith("cuda") and not torch.cuda.is_available():
        raise NotAvailableError(
            f"plan {plan.name} collects on a CUDA GPU and torch sees none here; set LIVE = False "
            "to read the shipped data, or collect with a CPU plan (data/plans/cpu.yaml)"
        )
    out = Path(out if out is not None else LIVE_DIR / machine_folder(plan.device)).resolve()
    return LiveRoot(out, out.name, plan=plan, base=base, max_minutes=max_minutes)
