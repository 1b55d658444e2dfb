"""``yolo-sm collect`` (a plan into a dataset root), ``render`` (the notebooks as a site) and
``claims`` (every rule's verdict); render and claims import no torch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from yolo_sm.cli.common import backends_available, comma_list, device, dispatch, output, progress
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
    c.add_argument(
        "--plan",
        default=None,
        help="plan YAML (default: data/plans/quick.yaml beside the package, each notebook's "
        "headline in about ten minutes of GPU time; data/plans/full.yaml adds every width, "
        "batch, precision and engine the notebooks compare, in hours)",
    )
    c.add_argument(
        "--model",
        default=None,
        help="model spec for the plan's steps that name none (overrides the plan's 'model:'): "
        "family:width, an ultralytics YAML by path or name, a .pt checkpoint, or "
        "package.module:function (imports and runs your code, by design)",
    )
    c.add_argument(
        "--device",
        default=None,
        help="cpu, cuda or cuda:N: run the plan there instead of on its own device (the GPU "
        "profilers' steps need a GPU)",
    )
    c.add_argument(
        "--input-shape",
        dest="input_shape",
        default=None,
        help="C,H,W of one image (needed by a module:function model): every step measures and "
        "counts at it",
    )
    c.add_argument("--out", required=True, help="dataset folder, e.g. results/my_gpu")
    c.add_argument("--only", default=None, help="comma list of step names")
    c.add_argument(
        "--max-minutes",
        default=None,
        help="stop before a step that would end later by its estimate (for time-limited hosts; "
        "above 0, leave it out for no limit)",
    )
    c.add_argument(
        "--redo-errors",
        nargs="?",
        const="",
        default=None,
        metavar="TEXT",
        help="measure again the error rows (not oom) of the sweep and bench steps it runs, or "
        "only those whose message contains TEXT (e.g. NumericalMismatch); a bench re-measures "
        "such a row's whole (model, batch) unit",
    )
    c.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="run the plan's units as tasks on a local Dask cluster of N worker processes, one "
        "GPU each (needs the distributed extra; docs/distributed.md)",
    )
    c.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the plan's units on the Dask cluster of this scheduler (tcp://host:8786), "
        "whose workers offer the resource GPU=1",
    )
    c.add_argument(
        "--status", action="store_true", help="only show which steps are done and what is left"
    )
    c.set_defaults(run=run)

    r = sub.add_parser("render", help="execute the notebooks and render them into a static site")
    r.add_argument("--notebooks", default="notebooks", help="folder of NN_topic.ipynb files")
    r.add_argument("--out", default="site", help="output folder (index.html + one page each)")
    r.add_argument(
        "--data",
        default=None,
        help="dataset root the notebooks read: a name under data/ or a folder with a "
        "manifest.json (default: each notebook's own DATA parameter)",
    )
    r.add_argument("--timeout", default="900", help="seconds per cell")
    r.add_argument("--only", default=None, help="comma list of notebook name prefixes to render")
    r.set_defaults(run=run)

    k = sub.add_parser("claims", help="every rule's verdict on a dataset root (the claims table)")
    k.add_argument(
        "--data",
        default="h200",
        help="dataset root: a name under data/ or a folder with a manifest.json (default h200)",
    )
    k.add_argument(
        "--against",
        default=None,
        help="a second dataset root: add the rules over two roots (two machines side by side, "
        "several GPUs of a host against one)",
    )
    k.add_argument("--json", action="store_true", help="print JSON, one object per rule")
    k.set_defaults(run=run)

    s = sub.add_parser(
        "scrub",
        help="rewrite a dataset root's provenance without host names or absolute paths "
        "(measured values unchanged)",
    )
    s.add_argument("roots", nargs="+", help="dataset folders, e.g. data/h200 data/cpu")
    s.set_defaults(run=run)


def run(args) -> int:
    return dispatch({"collect": collect, "render": render, "claims": claims, "scrub": scrub}, args)


def scrub(args) -> int:
    for root in args.roots:
        changed = scrub_root(open_root(root).path)
        embedded = embed_registrations(open_root(root).path)
        print(f"{root}: {len(changed)} file(s) scrubbed, {len(embedded)} registration(s) embedded")
    return 0


def check_steps(plan: Plan, out_dir: Path, names: list[str]) -> None:
    """Everything the plan's steps ``names`` need, checked before the first one runs: the
    parameters of each sweep and bench as their specs read them, the backends' optional
    packages, and the plan's device for every step not done yet that runs on it."""
    from yolo_sm.core import plan_runners, plan_status

    needs_device = False
    for step in plan.steps:
        if step.name not in names:
            continue
        where = f"plan {plan.path or plan.name}: step {step.name}"
        try:
            if step.kind == "sweep":
                backends_available(plan_runners.sweep_spec(step, plan).backends)
            elif step.kind == "bench":
                spec = plan_runners.bench_spec(step, plan)
                backends_available(e[0] for e in (*spec.engines, spec.pipeline_engine_here()))
        except UserError as e:
            raise type(e)(f"{where}: {e}") from None
        if step.kind not in HOST_KINDS and plan_status.step_state(step, plan, out_dir) != "done":
            needs_device = True
    if needs_device:
        device(plan.device, f"plan {plan.path or plan.name} device")


def collect(args) -> int:
    plan = load_plan(args.plan or default_plan())  # the whole plan checked before torch loads
    from yolo_sm.core import plan_status, plans

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
        table = plan_status.status(plan, out_dir)
        print(table.to_string(index=False))
        left = int((table.state != "done").sum())
        print(f"{len(table) - left} of {len(table)} step(s) done, {left} left")
        return 0
    only = comma_list(args.only)
    names = [s.name for s in plan.steps]
    for o in only:
        if o not in names:
            steps = ", ".join(sorted(names))
            raise UserError(f"plan {plan.name} has no step {o!r}; steps: {steps}")
    redo = None if args.redo_errors is None else str(args.redo_errors)
    workers = (
        None if args.workers is None else values.whole(args.workers, "--workers", lo=1, hi=1024)
    )
    output(out_dir, folder=True)
    check_steps(plan, out_dir, only or names)
    if args.workers is not None or args.scheduler:
        from yolo_sm.core import distributed

        table = distributed.run_plan(
            plan,
            out_dir,
            workers=workers,
            scheduler=args.scheduler,
            only=only,
            max_minutes=minutes,
            progress=progress(args),
            redo=redo,
        )
        print(table.to_string(index=False))
        return 0
    table = plans.run_plan(
        plan,
        out_dir,
        only=only,
        max_minutes=minutes,
        progress=progress(args),
        redo=redo,
    )
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
    output(args.out, folder=True)
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
    cols = [c for c in CLAIM_COLUMNS if c in verdicts]
    with pd.option_context(
        "display.width", 250, "display.max_rows", 1000, "display.max_colwidth", 90
    ):
        print(verdicts[cols].to_string(index=False))
    counts = verdicts.verdict.value_counts().to_dict()
    print("verdicts: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 0
