"""``yolo-sm collect`` (run a collection plan into a dataset root), ``yolo-sm render`` (the
notebooks as a static site) and ``yolo-sm claims`` (every rule's verdict on a root).

``render`` and ``claims`` import no torch: they run wherever the report layer does."""

from __future__ import annotations

from yolo_sm.cli.common import comma_list, dispatch
from yolo_sm.contract.datasets import open_root
from yolo_sm.contract.manifest import embed_registrations
from yolo_sm.contract.scrub import scrub_root


def add_parser(sub) -> None:
    c = sub.add_parser("collect", help="run a collection plan (resumable, splittable)")
    c.add_argument("--plan", required=True, help="plan YAML, e.g. data/plans/h200.yaml")
    c.add_argument("--out", required=True, help="dataset folder, e.g. data/h200")
    c.add_argument("--only", default=None, help="comma list of step names")
    c.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="stop before a step that would end later by its estimate (for time-limited hosts)",
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
    c.add_argument("--status", action="store_true", help="only show which steps are done")
    c.add_argument("--quiet", action="store_true", help="no progress bars")
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
    r.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    r.add_argument("--only", default=None, help="comma list of notebook name prefixes to render")
    r.set_defaults(run=run)

    k = sub.add_parser("claims", help="every rule's verdict on a dataset root (the claims table)")
    k.add_argument(
        "--data",
        default="h200",
        help="dataset root: a name under data/ or a folder with a manifest.json (default h200)",
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


def collect(args) -> int:
    from yolo_sm.collect import plans

    plan = plans.load_plan(args.plan)
    if args.status:
        table = plans.status(plan, args.out)
        print(table.to_string(index=False))
        left = float(table.est_left_s.sum())
        if left:
            print(
                f"left: about {left / 60:.1f} min of GPU time by these estimates "
                f"({sum(table.state != 'done')} step(s) not done)"
            )
        return 0
    table = plans.run_plan(
        plan,
        args.out,
        only=comma_list(args.only),
        max_minutes=args.max_minutes,
        progress=not args.quiet,
        redo=args.redo_errors,
    )
    print(table.to_string(index=False))
    return 0


def render(args) -> int:
    from yolo_sm.report.render import render_site

    extra = {}
    if args.data is not None:
        open_root(args.data)  # an unknown root is one sentence before any notebook runs
        extra["data"] = args.data
    index = render_site(
        args.notebooks, args.out, timeout=args.timeout, only=comma_list(args.only), **extra
    )
    print(f"rendered {index}")
    return 0


#: the verdict table's columns as `yolo-sm claims` prints them
CLAIM_COLUMNS = ("id", "verdict", "measured", "unit", "op", "threshold", "statement")


def claims(args) -> int:
    import pandas as pd

    from yolo_sm.report import catalog

    verdicts = catalog.verdict_table(open_root(args.data))
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
