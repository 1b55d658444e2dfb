"""``yolo-sm collect`` (a plan into a dataset root), ``render`` (the notebooks as a site) and
``claims`` (every rule's verdict); render and claims import no torch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from yolo_sm.cli.common import comma_list, device, print_table
from yolo_sm.contract import values
from yolo_sm.contract.datasets import open_root
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.manifest import embed_registrations
from yolo_sm.contract.plans import Plan, default_plan, load_plan, with_input
from yolo_sm.contract.scrub import scrub_root

#: longest --max-minutes (a week)
MAX_MINUTES = 7 * 24 * 60.0
#: step kinds that run on the host's CPU whatever the plan's device
HOST_KINDS = ("model_tables",)


def add_parser(sub) -> None:
    c = sub.add_parser("collect", help="run a collection plan (resumable, splittable)")
    arg = c.add_argument
    arg("--plan", help="plan YAML (default: data/plans/quick.yaml; data/plans/full.yaml: all)")
    arg("--model", help="model spec for steps that name none: family:width, YAML, .pt, mod:fn")
    arg("--device", help="cpu, cuda or cuda:N instead of the plan's device")
    arg("--input-shape", dest="input_shape", help="C,H,W of one image (module:function models)")
    arg("--out", required=True, help="dataset folder, e.g. results/my_gpu")
    arg("--only", help="comma list of step names")
    arg("--max-minutes", help="stop before a step that would end later by its estimate")
    redo = "re-measure the error rows (only those whose message holds TEXT)"
    arg("--redo-errors", nargs="?", const="", metavar="TEXT", help=redo)
    arg("--workers", type=int, metavar="N", help="run units on a local Dask cluster of N GPUs")
    arg("--scheduler", metavar="ADDRESS", help="run units on this Dask scheduler's cluster")
    arg("--status", action="store_true", help="only show which steps are done and what is left")
    c.set_defaults(run=collect)

    r = sub.add_parser("render", help="execute the notebooks and render them into a static site")
    r.add_argument("--notebooks", default="notebooks", help="folder of NN_topic.ipynb files")
    r.add_argument("--out", default="site", help="output folder (index.html + one page each)")
    r.add_argument("--data", help="dataset root: a name under data/ or a folder (default: DATA)")
    r.add_argument("--timeout", default="900", help="seconds per cell")
    r.add_argument("--only", help="comma list of notebook name prefixes to render")
    r.set_defaults(run=render)

    k = sub.add_parser("claims", help="every rule's verdict on a dataset root (the claims table)")
    k.add_argument("--data", default="h200", help="dataset root: a name under data/ or a folder")
    k.add_argument("--against", help="a second dataset root: add the rules over two roots")
    k.add_argument("--json", action="store_true", help="print JSON, one object per rule")
    k.set_defaults(run=claims)

    s = sub.add_parser("scrub", help="drop host names and absolute paths from provenance")
    s.add_argument("roots", nargs="+", help="dataset folders, e.g. data/h200 data/cpu")
    s.set_defaults(run=scrub)


def scrub(args) -> int:
    for root in args.roots:
        changed = scrub_root(open_root(root).path)
        embedded = embed_registrations(open_root(root).path)
        print(f"{root}: {len(changed)} file(s) scrubbed, {len(embedded)} registration(s) embedded")
    return 0


def check_steps(plan: Plan, out_dir: Path, names: list[str]) -> None:
    """Check what the plan's steps ``names`` need before the first runs: sweep and bench
    parameters, backends' packages, and the device of every step not done yet."""
    from yolo_sm.core import plan_runners, plans
    from yolo_sm.core.environment import check_backends

    needs_device = False
    for step in plan.steps:
        if step.name not in names:
            continue
        where = f"plan {plan.path or plan.name}: step {step.name}"
        try:
            if step.kind == "sweep":
                check_backends(plan_runners.sweep_spec(step, plan).backends)
            elif step.kind == "bench":
                spec = plan_runners.bench_spec(step, plan)
                check_backends(e[0] for e in (*spec.engines, spec.pipeline_engine_here()))
        except UserError as e:
            raise type(e)(f"{where}: {e}") from None
        if step.kind not in HOST_KINDS and plans.step_state(step, plan, out_dir) != "done":
            needs_device = True
    if needs_device:
        device(plan.device, f"plan {plan.path or plan.name} device")


def collect(args) -> int:
    plan = load_plan(args.plan or default_plan())  # the whole plan checked before torch loads
    from yolo_sm.core import plans

    if args.model:
        plan = dataclasses.replace(plan, model=values.text(args.model, "--model"))
    if args.device is not None or args.input_shape is not None:
        from yolo_sm.core.models.spec import parse_shape

        dev = None if args.device is None else values.device_name(args.device)
        plan = with_input(plan, dev, parse_shape(args.input_shape))
    out_dir = Path(values.text(args.out, "--out"))
    minutes = args.max_minutes
    if minutes is not None:
        minutes = values.number(minutes, "--max-minutes", above=0, hi=MAX_MINUTES, unit="minutes")
    if args.status:
        table = plans.status(plan, out_dir)
        print(table.to_string(index=False))
        left = int((table.state != "done").sum())
        print(f"{len(table) - left} of {len(table)} step(s) done, {left} left")
        return 0
    only = comma_list(args.only)
    plans.check_only(plan, only)
    redo = None if args.redo_errors is None else str(args.redo_errors)
    workers = (
        None if args.workers is None else values.whole(args.workers, "--workers", lo=1, hi=1024)
    )
    values.output_path(out_dir, folder=True)
    check_steps(plan, out_dir, only or [s.name for s in plan.steps])
    kw = {"only": only, "max_minutes": minutes, "progress": not args.quiet, "redo": redo}
    if args.workers is not None or args.scheduler:
        from yolo_sm.core import distributed

        kw.update(workers=workers, scheduler=args.scheduler)
        table = distributed.run_plan(plan, out_dir, **kw)
    else:
        table = plans.run_plan(plan, out_dir, **kw)
    print(table.to_string(index=False))
    return 0


def render(args) -> int:
    from yolo_sm.report.render import notebooks_in, render_site

    timeout = values.whole(args.timeout, "--timeout", lo=1, hi=86_400, unit="s")
    only = comma_list(args.only)
    extra = {}
    if args.data is not None:
        open_root(args.data)  # an unknown root is one sentence before any notebook runs
        extra["data"] = args.data
    notebooks_in(args.notebooks, only)  # no notebook to render: one sentence, nothing made
    values.output_path(args.out, folder=True)
    index = render_site(args.notebooks, args.out, timeout=timeout, only=only, **extra)
    print(f"rendered {index}")
    return 0


#: the verdict table's columns as `yolo-sm claims` prints them
CLAIM_COLUMNS = ("id", "verdict", "measured", "unit", "op", "threshold", "statement")


def claims(args) -> int:
    import pandas as pd

    from yolo_sm.report import catalog

    root = open_root(args.data)
    verdicts = catalog.verdict_table(root)
    if args.against:  # the baseline first, as the pair rules read their two roots
        pair = catalog.pair_verdict_table(open_root(args.against), root)
        verdicts = pd.concat([verdicts, pair], ignore_index=True)
    if args.json:
        print(catalog.to_json(verdicts))
        return 0
    if verdicts.empty:
        print(f"no rules decide anything on {args.data} yet")
        return 0
    print_table(verdicts[[c for c in CLAIM_COLUMNS if c in verdicts]], floats=None)
    counts = verdicts.verdict.value_counts().to_dict()
    print("verdicts: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 0
