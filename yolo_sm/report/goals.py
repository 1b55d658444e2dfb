"""The fast-engines targets (notebook 10) as rules: one rule per check, per width the target
names, over the facts of :func:`yolo_sm.analyse.fast.facts`. A width the bench has not measured
reads "not tested"; so does the share of the fp16 peak on a root without measured ceilings.

The targets, against the eager fp16 NHWC baseline of the same width and batch:

1. batch-1 latency of the best 16-bit engine: <= 0.30x for widths 0.25-1.0, <= 0.5x above;
2. batch-64 img/s of the best 16-bit engine: >= 1.5x for widths 0.25-1.0, >= 1.3x and >= half
   the measured fp16 matmul peak for widths 1.5-2.0;
3. batch 64, widths >= 1.0: an 8-bit engine with usable output >= 1.3x the fp16 engine of its
   backend;
4. frames to boxes at batch 16, width 0.5: the fastest pipeline >= 6x YOLO.predict and within
   15 % of its engine's model-only img/s.
"""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse import collection_time, compile_cache, fast, frames
from yolo_sm.analyse import eight_bit_goal as goal8
from yolo_sm.analyse import precision_8bit as p8
from yolo_sm.analyse.bench_table import incomplete_units, planned_engines, unit_of
from yolo_sm.analyse.facts import concat, facts_table
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.schema import COLLECTION_TIME
from yolo_sm.report.rules import (
    FAILS,
    HOLDS,
    NOT_TESTED,
    PARTLY,
    Rule,
    check_unique,
    evaluate,
)

#: the widths the targets name (the bench plan's widths)
WIDTHS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)
BENCH = ("bench_fast_engines",)


def _goal(
    gid: str,
    statement: str,
    key: str,
    width: float,
    batch: int,
    op: str,
    thr: float,
    datasets=BENCH,
    group: str = "goals",
) -> Rule:
    return Rule(
        id=gid,
        statement=statement,
        fact=f"fast.{key}",
        op=op,
        threshold=thr,
        unit="x",
        datasets=datasets,
        scope=fast.scope(width, batch),
        group=group,
    )


def _rules():
    for w in WIDTHS:
        thr = 0.30 if w <= 1.0 else 0.5
        yield _goal(
            f"goal_1_w{w:g}",
            f"Batch 1, width {w:g}: the best 16-bit engine's latency is at most {thr:g}x the "
            "baseline's",
            "best16_latency_over_baseline",
            w,
            1,
            "<=",
            thr,
        )
    for w in WIDTHS:
        if 1.0 < w < 1.5:
            continue  # width 1.25 is named by neither range of target 2
        thr = 1.5 if w <= 1.0 else 1.3
        yield _goal(
            f"goal_2_w{w:g}",
            f"Batch 64, width {w:g}: the best 16-bit engine delivers at least {thr:g}x the "
            "baseline's img/s",
            "best16_img_per_s_over_baseline",
            w,
            64,
            ">=",
            thr,
        )
    for w in (x for x in WIDTHS if x >= 1.5):
        yield _goal(
            f"goal_2_peak_w{w:g}",
            f"Batch 64, width {w:g}: the best 16-bit engine delivers at least half the "
            "measured fp16 matmul TFLOP/s",
            "best16_tflops_over_fp16_peak",
            w,
            64,
            ">=",
            0.5,
            (*BENCH, "ceilings"),
        )
    for w in (x for x in WIDTHS if x >= 1.0):
        yield _goal(
            f"goal_3_w{w:g}",
            f"Batch 64, width {w:g}: an 8-bit engine with usable output delivers at least 1.3x "
            "the img/s of the fp16 engine of its backend (0 where every 8-bit engine failed "
            "its numerical check)",
            "usable_8bit_over_fp16",
            w,
            64,
            ">=",
            1.3,
        )
    yield _goal(
        "goal_4_predict",
        "Batch 16, width 0.5: the fastest frames-to-boxes pipeline delivers at least 6x the "
        "frames/s of YOLO.predict",
        "pipeline_over_predict",
        0.5,
        16,
        ">=",
        6.0,
        frames.PIPELINE_DATASETS,
    )
    yield _goal(
        "goal_4_model_only",
        "Batch 16, width 0.5: the fastest frames-to-boxes pipeline keeps at least 0.85x its "
        "engine's model-only img/s",
        "pipeline_over_model_only",
        0.5,
        16,
        ">=",
        0.85,
        frames.PIPELINE_DATASETS,
    )


#: speed goal 1: the pipeline's frames/s over the fastest engine's model-only img/s
PIPELINE_OVER_FASTEST = 0.85

#: the speed goals' widths and batches
PIPELINE_WIDTHS, PIPELINE_BATCHES = (0.25, 0.5, 0.75, 1.0), (16, 64)
EIGHT_BIT_WIDTHS = (1.0, 1.5, 2.0)
STOCK_WIDTHS = (0.5, 1.0, 2.0)
#: speed goal 3: the longest build of the fastest engine with warm caches
WARM_BUILD_S = 60.0
#: the speed goals file under the notebook that shows them
SPEED_GROUP = "10_fast_engines"


#: the ids of the speed rules that explain a verdict (what holds an engine back, whether a gap
#: is noise) rather than decide a goal: filled as the rules are made
_EXPLAINING: set[str] = set()


def _explains(rule: Rule) -> Rule:
    """``rule``, marked as explaining a goal's verdict, not deciding it."""
    _EXPLAINING.add(rule.id)
    return rule


def _speed_rules():
    """The speed goals: a pipeline at the fastest engine's rate, 8-bit faster than the fastest
    fp16 engine, the fastest engine against the longest-autotuned stock one."""
    for w in PIPELINE_WIDTHS:
        for b in PIPELINE_BATCHES:
            yield _goal(
                f"speed_1_w{w:g}_b{b}",
                f"Width {w:g}, batch {b}: the fastest frames-to-boxes pipeline keeps at least "
                "0.85x the model-only img/s of the fastest engine of the same model and batch "
                "(a unit that lacks an engine its plan step names is left out)",
                "pipeline_over_fastest_model_only",
                w,
                b,
                ">=",
                PIPELINE_OVER_FASTEST,
                datasets=frames.PIPELINE_DATASETS,
                group=SPEED_GROUP,
            )
            if (w, b) == (0.5, 16):
                continue  # the target goal_4_predict is this rule (one rule per fact)
            yield _goal(
                f"speed_1_predict_w{w:g}_b{b}",
                f"Width {w:g}, batch {b}: the fastest frames-to-boxes pipeline delivers at least "
                "6x the frames/s of YOLO.predict",
                "pipeline_over_predict",
                w,
                b,
                ">=",
                6.0,
                datasets=frames.PIPELINE_DATASETS,
                group=SPEED_GROUP,
            )
    ratio = goal8.GOAL_RATIO
    for w in EIGHT_BIT_WIDTHS:
        yield Rule(
            id=f"speed_2_w{w:g}",
            statement=f"Batch 64, width {w:g}: an 8-bit engine that passes its numerical check "
            f"delivers at least {ratio:g}x the img/s of the fastest fp16 engine (same process; "
            "0 where every 8-bit engine failed its check; not tested while the unit lacks an "
            "engine its plan step names)",
            fact="eight_bit.best_over_fastest_fp16",
            op=">=",
            threshold=ratio,
            unit="x",
            datasets=(p8.BENCH_8BIT,),
            scope=fast.scope(w, 64),
            group=SPEED_GROUP,
        )
        # what holds the fastest int8 engine back: its convolutions against the time per
        # forward at that ratio, and the kernels outside them against what the convolutions
        # leave (from the trace that holds that engine's kernels: its facts name it)
        for rid, what, key, op in (
            ("convs_fit", "its convolutions alone take less GPU time than a forward at "
             f"{ratio:g}x the fastest fp16 engine's img/s may take", "int8_conv_over_budget", "<"),
            ("outside_caps", "its kernels outside the convolutions (quantisation, copies and "
             "concatenations, pooling and upsampling, adds) take more GPU time than that "
             f"forward leaves after the convolutions: they alone keep it under {ratio:g}x",
             "int8_outside_conv_over_room", ">"),
        ):  # fmt: skip
            yield _explains(
                Rule(
                    id=f"speed_2_{rid}_w{w:g}",
                    statement=f"Batch 64, width {w:g}, the fastest int8 engine: {what} (its "
                    "8-bit bench forward, split as the Kineto kernels of a traced one)",
                    fact=f"eight_bit.{key}",
                    op=op,
                    threshold=1.0,
                    unit="x",
                    scope=fast.scope(w, 64),
                    group=SPEED_GROUP,
                )
            )
    for w in STOCK_WIDTHS:
        yield _goal(
            f"speed_3_w{w:g}",
            f"Batch 64, width {w:g}: the fastest engine at least matches torch.compile "
            "max-autotune-no-cudagraphs timed in the same run (not tested while the unit lacks "
            "an engine its plan step names)",
            "best_over_max_autotune",
            w,
            64,
            ">=",
            1.0,
            datasets=(fast.AUTOTUNE_DATASET,),
            group=SPEED_GROUP,
        )
        yield _explains(
            Rule(
                id=f"speed_3_gap_in_spread_w{w:g}",
                statement=f"Batch 64, width {w:g}: the fastest engine's median forward is at most "
                "the larger interquartile range of the two rows slower than "
                "max-autotune-no-cudagraphs' (a gap the timings cannot tell from noise)",
                fact="fast.max_autotune_gap_over_iqr",
                op="<=",
                threshold=1.0,
                unit="x",
                datasets=(fast.AUTOTUNE_DATASET,),
                scope=fast.scope(w, 64),
                group=SPEED_GROUP,
            )
        )
        yield Rule(
            id=f"speed_3_warm_build_w{w:g}",
            statement=f"Batch 64, width {w:g}: the fastest engine builds in at most "
            f"{WARM_BUILD_S:g} s with warm caches (a fresh process reading the inductor cache "
            "folder that a cold build filled)",
            fact="fast.fastest_warm_build_s",
            op="<=",
            threshold=WARM_BUILD_S,
            unit="s",
            datasets=(fast.AUTOTUNE_DATASET, compile_cache.DATASET),
            scope=fast.scope(w, 64),
            group=SPEED_GROUP,
        )


#: Speed goal 4: collecting the plan at half the GPU time of a baseline root's snapshot (a
#: rule over two roots: the candidate's collection_time against the baseline's).
COLLECTION_RULES: tuple[Rule, ...] = check_unique(
    (
        Rule(
            id="speed_4",
            statement="Collecting the whole plan takes at most half the GPU time the baseline "
            "root's snapshot says (seconds spent plus those estimated left, each step scaled to "
            "the whole as collect --status scales it)",
            fact="collection.plan_s_over_baseline",
            op="<=",
            threshold=0.5,
            unit="x",
            datasets=(COLLECTION_TIME,),
            group=SPEED_GROUP,
        ),
        _explains(
            Rule(
                id="speed_4_same_units",
                statement="On the units both roots measured, the collection took at most half the "
                "GPU seconds the baseline's took for them (no unit scaled or estimated: a check on "
                "the scaled whole)",
                fact="collection.same_units_s_over_baseline",
                op="<=",
                threshold=0.5,
                unit="x",
                group=SPEED_GROUP,
            )
        ),
        _explains(
            Rule(
                id="speed_4_no_warmer_builds",
                statement="No torch.compile build of this collection found more in inductor's "
                "disk cache than the baseline's build of the same engine and unit did (cold < "
                "partial < warm), so the seconds it saved are not a warmer cache's",
                fact="collection.warmer_builds",
                op="<=",
                threshold=0,
                unit="builds",
                group=SPEED_GROUP,
            )
        ),
    )
)

#: One rule per check of the four targets.
RULES: tuple[Rule, ...] = check_unique(_rules())
#: One rule per check of the speed goals.
SPEED_RULES: tuple[Rule, ...] = check_unique(_speed_rules())
#: Per speed goal, the ids of the rules that decide it (``speed_<goal>_...``, those that only
#: explain a verdict left out): every one must hold for the goal to be met. Goal 1's pipeline
#: against YOLO.predict at width 0.5, batch 16 is the target goal_4_predict (one rule per fact).
GOAL_CRITERIA: dict[int, tuple[str, ...]] = {
    g: tuple(
        r.id
        for r in SPEED_RULES + COLLECTION_RULES
        if (r.id == f"speed_{g}" or r.id.startswith(f"speed_{g}_")) and r.id not in _EXPLAINING
    )
    for g in (1, 2, 3, 4)
}
GOAL_CRITERIA[1] += ("goal_4_predict",)
#: what each speed goal asks, in a few words
GOAL_NAMES = {
    1: "frames-to-boxes pipeline at the fastest engine's rate",
    2: "8-bit faster than the fastest fp16 engine",
    3: "the fastest engine matches the longest stock autotuning and builds warm within "
    f"{WARM_BUILD_S:g} s",
    4: "collecting the plan at half the GPU time",
}
MET, MISSED, OPEN = "met", "missed", "not decided"


def facts(root: DataRoot) -> pd.DataFrame:
    """The facts both rule sets read: the fast-engines facts and the 8-bit goal facts."""
    return concat(fast.facts(root), goal8.goal_facts_of(root))


def verdicts(root: DataRoot) -> pd.DataFrame:
    """The targets' verdict table for ``root``."""
    return evaluate(RULES, fast.facts(root), root.name)


def speed_verdicts(root: DataRoot) -> pd.DataFrame:
    """The speed goals' verdict table for ``root``."""
    return evaluate(SPEED_RULES, facts(root), root.name)


def goal_status(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per speed goal (:data:`GOAL_CRITERIA`), from verdict tables concatenated (the targets',
    the speed goals', goal 4's): how many of its criteria hold, do not hold (``partly``
    included) or were not tested, and ``status``: :data:`MET` when every criterion holds,
    :data:`MISSED` when one does not, else :data:`OPEN` (some not tested, none missed).
    A criterion the tables lack counts as not tested."""
    v = verdicts.drop_duplicates("id").set_index("id")["verdict"]
    rows = []
    for goal, ids in GOAL_CRITERIA.items():
        got = v.reindex(list(ids)).fillna(NOT_TESTED)
        holds, missed = int((got == HOLDS).sum()), int(got.isin([FAILS, PARTLY]).sum())
        status = MET if holds == len(ids) else MISSED if missed else OPEN
        rows.append(
            {"goal": goal, "what": GOAL_NAMES[goal], "criteria": len(ids), "hold": holds,
             "missed": missed, "not_tested": len(ids) - holds - missed, "status": status}
        )  # fmt: skip
    return pd.DataFrame(rows)


def _all_verdicts(root: DataRoot, baseline: DataRoot | None) -> pd.DataFrame:
    """The targets', the speed goals' and goal 4's verdicts of ``root``, from one computation
    of its facts."""
    found = facts(root)
    return pd.concat(
        [
            evaluate(RULES, found, root.name),
            evaluate(SPEED_RULES, found, root.name),
            collection_verdicts(root, baseline),
        ],
        ignore_index=True,
    )


def goals_of(root: DataRoot, baseline: DataRoot | None = None) -> pd.DataFrame:
    """:func:`goal_status` of ``root`` (goal 4 against ``baseline``); the targets and the speed
    goals read one computation of the root's facts."""
    return goal_status(_all_verdicts(root, baseline))


#: the columns of :func:`waiting`
WAITING_COLUMNS = ("goal", "id", "scope", "waits_for")


def waiting(root: DataRoot, baseline: DataRoot | None = None) -> pd.DataFrame:
    """Per criterion of a speed goal (:data:`GOAL_CRITERIA`) that ``root`` leaves not tested,
    what it waits for (:func:`waits_for`): a goal that is not decided, as the measurements
    that would decide it."""
    rows = [
        {"goal": goal, "id": rule.id, "scope": rule.scope,
         "waits_for": waits_for(root, rule, baseline)}
        for goal, rule in _undecided(root, baseline)
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=list(WAITING_COLUMNS))


def _undecided(root: DataRoot, baseline: DataRoot | None) -> list[tuple[int, Rule]]:
    """(goal, rule) per criterion of a speed goal (:data:`GOAL_CRITERIA`) that ``root`` leaves
    not tested, in the goals' order."""
    v = _all_verdicts(root, baseline).drop_duplicates("id").set_index("id")["verdict"]
    rules = {r.id: r for r in RULES + SPEED_RULES + COLLECTION_RULES}
    return [
        (goal, rules[rid])
        for goal, ids in GOAL_CRITERIA.items()
        for rid in ids
        if v.get(rid, NOT_TESTED) == NOT_TESTED
    ]


def waits_for(root: DataRoot, rule: Rule, baseline: DataRoot | None = None) -> str:
    """Why ``rule`` reads "not tested" on ``root``, in one phrase: goal 4's missing baseline or
    snapshot; a dataset the root lacks; the (width, batch) unit of the rule's scope not
    measured in its bench, or measured without an engine its plan step names (which); for
    the fastest engine's warm build, the compile-cache build it needs
    (:func:`yolo_sm.analyse.fast.warm_build_lacks`); else the fact the rule reads, not computed
    from the tables it names."""
    return _waits(root, rule, baseline)[0]


def _waits(root: DataRoot, rule: Rule, baseline: DataRoot | None) -> tuple[str, tuple[str, ...]]:
    """:func:`waits_for`'s phrase, and the datasets whose measurement it waits for (none for
    goal 4, which waits for another root). The fastest engine's warm build waits for its
    compile-cache build too, whatever it waits for first: which build it needs is known only
    once the bench has found the fastest engine."""
    phrase, datasets = _first_wait(root, rule, baseline)
    if rule.fact == "fast.fastest_warm_build_s" and compile_cache.DATASET in rule.datasets:
        datasets = tuple(dict.fromkeys((*datasets, compile_cache.DATASET)))
    return phrase, datasets


def _first_wait(
    root: DataRoot, rule: Rule, baseline: DataRoot | None
) -> tuple[str, tuple[str, ...]]:
    """:func:`_waits` before the warm build's compile-cache step is added."""
    if rule.fact.startswith(collection_time.PREFIX):
        if baseline is None:
            return "a baseline root (BASELINE) to compare with", ()
        lacking = [r.name for r in (root, baseline) if not r.has(COLLECTION_TIME)]
        if lacking:
            return f"a {COLLECTION_TIME} snapshot in {', '.join(lacking)}", ()
        if baseline.path.resolve() == root.path.resolve():
            return "a baseline root other than this one", ()
        return "steps that both snapshots hold", ()
    held = [d for d in rule.datasets if root.has(d)]
    if not held:
        return f"{', '.join(rule.datasets)}: none in this root", tuple(rule.datasets)
    unit = unit_of(rule.scope)
    if unit is not None:
        w, b = unit
        benches = {d: root.load(d) for d in held}
        benches = {d: t for d, t in benches.items() if {"width", "batch", "variant"} <= set(t)}
        if benches:
            measured = [
                d for d, t in benches.items() if ((t["width"] == w) & (t["batch"] == b)).any()
            ]
            if not measured:
                return f"the unit not measured in {', '.join(benches)}", tuple(benches)
            for d in measured:
                gaps = incomplete_units(benches[d], planned_engines(root, d))
                gap = gaps[(gaps["width"] == w) & (gaps["batch"] == b)]
                if len(gap):
                    return f"the unit of {d} lacks {gap['missing'].iloc[0]}", (d,)
            if rule.fact == "fast.fastest_warm_build_s" and fast.AUTOTUNE_DATASET in benches:
                builds = root.load(compile_cache.DATASET) if compile_cache.DATASET in held else None
                lacks = fast.warm_build_lacks(benches[fast.AUTOTUNE_DATASET], builds, w, b)
                if lacks:
                    return lacks, (fast.AUTOTUNE_DATASET,)
    return f"{rule.fact}: not computed from {', '.join(held)}", tuple(held)


#: the columns of :func:`waiting_steps`
WAITING_STEP_COLUMNS = ("step", "goals", "state", "left_s", "left_source")


def waiting_steps(root: DataRoot, baseline: DataRoot | None = None) -> pd.DataFrame:
    """The plan steps whose measurements the speed goals' undecided criteria wait for
    (:func:`waiting`), with what ``root``'s collection_time snapshot (``collect --status
    --save``) says of each: its ``state`` and the GPU seconds it has ``left`` to measure, with
    the estimate's source. A dataset the snapshot names no step for (or a root without a
    snapshot) has no state. Goal 4 waits for another root, not for a step, and is not listed."""
    goals_of_step: dict[str, set[int]] = {}
    for goal, rule in _undecided(root, baseline):
        for d in _waits(root, rule, baseline)[1]:
            goals_of_step.setdefault(d, set()).add(goal)
    snap = collection_time.snapshot(root)
    by_step = snap.set_index("step") if snap is not None else None
    rows = []
    for step, gs in goals_of_step.items():
        known = by_step is not None and step in by_step.index
        r = by_step.loc[step] if known else None
        rows.append(
            {"step": step, "goals": ", ".join(map(str, sorted(gs))),
             "state": r["state"] if known else None,
             "left_s": float(r["left_s"]) if known else None,
             "left_source": (r["left_source"] or None) if known else None}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=list(WAITING_STEP_COLUMNS))


def waiting_cost(
    root: DataRoot, baseline: DataRoot | None = None, steps: pd.DataFrame | None = None
) -> str:
    """What deciding the undecided speed goals costs in GPU time, by ``root``'s own
    collection_time snapshot: the left seconds of the steps they wait for
    (:func:`waiting_steps`; ``steps``: that table, when the caller has made it already) and,
    without a ``baseline``, what a sample root for goal 4 would take
    (:func:`yolo_sm.analyse.collection_time.sample_cost`); where the root has no snapshot, how
    to make one; empty where nothing is waited for."""
    snap = collection_time.snapshot(root)
    if snap is None:
        return (
            f"This root has no {COLLECTION_TIME} snapshot, so the GPU time that deciding the "
            "goals needs is not known here (`yolo-sm collect --plan PLAN --out ROOT --status "
            "--save` writes it)."
        )
    steps = waiting_steps(root, baseline) if steps is None else steps
    parts = [_steps_cost(steps)] if len(steps) else []
    if baseline is None:
        parts.append(_sample_cost(snap))
    return " ".join(parts)


def _steps_cost(steps: pd.DataFrame) -> str:
    """:func:`waiting_cost`'s sentence on the steps the criteria wait for."""
    known = steps.dropna(subset=["left_s"])
    left = float(known["left_s"].sum())
    unknown = steps.loc[steps["left_s"].isna(), "step"].tolist()
    text = (
        f"Deciding the criteria that wait for this root's steps takes up to about {left:,.0f} s "
        f"({left / 60:.1f} min) of GPU time by its {COLLECTION_TIME} snapshot, the whole of "
        "what those steps have left: "
        + ", ".join(f"{r.step} {r.left_s:,.0f} s" for r in known.itertuples())
        + " (a criterion may need only some of a step's units; the seconds are estimates, paced"
        " by the root's own measurements as `collect --status` paces them)"
    )
    if unknown:
        text += f"; the snapshot has no step for {', '.join(unknown)}"
    return text + "."


def _sample_cost(snap: pd.DataFrame) -> str:
    """:func:`waiting_cost`'s sentence on goal 4's second root: a sample of this root's plan."""
    cost = collection_time.sample_cost(snap, 1)
    if cost is None:
        return (
            f"Goal 4 compares this root with a sample of its plan; this root's {COLLECTION_TIME} "
            "snapshot was saved without the steps' sample groups, so what a sample costs is not "
            "known here (`collect --status --save` saves it again)."
        )
    total = float(cost["sample_s"].sum())
    return (
        "Goal 4 compares this root with a second root of its plan, a sample of every step "
        "(`yolo-sm collect --plan PLAN --out NEW --sample 1`, into an empty folder): about "
        f"{total:,.0f} s ({total / 60:.1f} min) of GPU time by this root's seconds, then "
        "rendered with DATA set to the sample and BASELINE to this root."
    )


def collection_verdicts(root: DataRoot, baseline: DataRoot | None) -> pd.DataFrame:
    """Speed goal 4's verdict table: ``root``'s collection_time snapshot against
    ``baseline``'s ("not tested" without a baseline, or where either lacks a snapshot, or
    when the baseline is ``root`` itself)."""
    found = facts_table([]) if baseline is None else collection_time.pair_facts(baseline, root)
    return evaluate(COLLECTION_RULES, found, root.name)
