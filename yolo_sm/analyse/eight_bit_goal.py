"""Speed goal 2, an 8-bit engine faster than the fastest fp16 one: per width and batch of the
``bench_8bit`` dataset, the fastest 8-bit engine's img/s over the fastest fp16 engine's
(:func:`goal_facts`), and where the fastest int8 engine's GPU time goes against the time per
forward the goal allows (:func:`budget_table`, from the Kineto trace that holds that engine's
kernels). Tables in, tables out; the rules of :mod:`yolo_sm.report.goals` judge the facts."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from yolo_sm.analyse.bench_table import complete_units, ok_rows, planned_engines
from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.fast import scope as unit_scope
from yolo_sm.analyse.precision_8bit import (
    BENCH_8BIT,
    EIGHT_BIT,
    TRACE_INT8,
    TRACE_INT8_COMPILE,
    TRACE_INT8_COMPILE_SEP_POOL,
    engine_speed,
    int8_breakdown,
    trace_table,
)
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.values import split_compile_mode

#: the int8 trace that holds an int8 engine's kernels, by the engine's backend and the model
#: rewrites made before compiling (:func:`engine_rewrites`): a CUDA graph replays the eager
#: forward's kernels, and reduce-overhead runs default compile's; an engine whose key is not
#: here has no trace (a rewrite changes the kernels)
INT8_TRACE_OF = {
    ("eager", ()): TRACE_INT8,
    ("cudagraph", ()): TRACE_INT8,
    ("compile", ()): TRACE_INT8_COMPILE,
    ("compile", ("sep-pool",)): TRACE_INT8_COMPILE_SEP_POOL,
}
#: the int8 traces, each once
INT8_TRACES = tuple(sorted(set(INT8_TRACE_OF.values())))


def goal_facts(speed) -> list[dict]:
    """Per (width, batch) of :func:`engine_speed`: the fastest ok 8-bit engine's img/s over the
    fastest fp16 engine's (``eight_bit.best_over_fastest_fp16``, its variant in the note), and 0
    where every 8-bit engine there failed its numerical check (no usable output)."""
    out = []
    ds = (BENCH_8BIT,)
    eight = speed[speed.precision.isin(EIGHT_BIT)]
    for (w, b), g in eight.groupby(["width", "batch"]):
        ok = g[g.status == "ok"]
        failed = g.message.fillna("").str.startswith("NumericalMismatch")
        at = unit_scope(w, b)
        if len(ok):
            r = ok.loc[ok.vs_fastest_fp16.idxmax()]
            out.append(
                fact(
                    "eight_bit.best_over_fastest_fp16",
                    float(r.vs_fastest_fp16),
                    "x",
                    scope=at,
                    datasets=ds,
                    note=f"{r.variant} over {r.fastest_fp16}",
                )
            )
        elif failed.all():
            out.append(fact("eight_bit.best_over_fastest_fp16", 0.0, "x", scope=at, datasets=ds))
    return out


#: speed goal 2: an 8-bit engine's img/s over the fastest fp16 engine's of the same width and
#: batch (the rule's threshold, and the ratio :func:`budget_table` budgets the forward for)
GOAL_RATIO = 1.3


def engine_rewrites(variant: str) -> tuple[str, ...]:
    """The model rewrites a bench variant's engine made before compiling:
    ``compile:reduce-overhead+sep-pool/int8/nhwc`` -> (``sep-pool``,); () for the others."""
    engine = str(variant).split("/")[0]
    _, _, mode = engine.partition(":")
    return split_compile_mode(mode)[1] if mode else ()


def budget_table(speed, traces: Mapping[str, pd.DataFrame], ratio: float = GOAL_RATIO):
    """Where the fastest int8 engine's GPU time goes against the time per forward at which it
    would deliver ``ratio`` x the fastest fp16 engine: per (width, batch) the bench timed
    (:func:`engine_speed`) whose fastest int8 engine that passed its check has its kernels in
    ``traces`` ({int8 trace dataset: its :func:`trace_table`}; :data:`INT8_TRACE_OF` says which
    trace holds an engine's kernels, by its ``backend`` and rewrites; Kineto, one forward per
    engine). A unit whose fastest int8 engine has no trace here has no row: another engine's
    kernels do not say where its time goes.

    ``budget_ms`` is the fastest fp16 engine's ms per forward (batch / its img/s in the bench)
    over ``ratio``. The trace splits the int8 forward's GPU time (``int8_ms``, its
    convolutions ``int8_conv_ms``) into its convolutions' share (``conv_share``) and the rest:
    the kernels outside the convolutions (quantisation, copies and concatenations, pooling and
    upsampling, adds, SiLU, and under torch.compile the Triton kernels those are fused into).
    The trace and the bench are different runs, whose times per forward differ
    (``trace_over_bench``: the trace's int8 GPU ms over the bench's ms per forward), so the
    shares are applied to the bench's own ms per forward (``int8_bench_ms``): ``conv_ms``
    and ``outside_ms`` are what the convolutions and the rest take of it. ``conv_over_budget``
    is ``conv_ms`` over the budget (under 1: the convolutions fit) and ``outside_over_room``
    ``outside_ms`` over what the budget leaves after them (inf where the convolutions alone
    exceed it; over 1: the kernels outside the convolutions alone keep the engine under
    ``ratio``). Both read the bench's time, as the goal does: where the engine meets the goal
    its convolutions fit and the rest fits the room they leave."""
    cols = ["width", "batch", "fastest_fp16", "int8_engine", "trace", "budget_ms", "int8_ms"]
    cols += ["int8_conv_ms", "conv_share", "int8_bench_ms", "conv_ms", "outside_ms"]
    cols += ["conv_over_budget", "outside_over_room", "trace_over_bench"]
    if speed.empty:
        return pd.DataFrame(columns=cols)
    # the fastest fp16 engine of each unit, as engine_speed names it
    best = ok_rows(speed[speed.variant == speed.fastest_fp16]).set_index(["width", "batch"])
    int8 = ok_rows(speed[speed.precision == "int8"])
    int8 = int8.loc[int8.groupby(["width", "batch"]).img_per_s.idxmax()] if len(int8) else int8
    rows = []
    for e in int8.itertuples():
        name = INT8_TRACE_OF.get((e.backend, engine_rewrites(e.variant)))
        table = traces.get(name)
        if table is None or table.empty or (e.width, e.batch) not in best.index:
            continue
        t = table[(table.width == e.width) & (table.batch == e.batch)]
        if t.empty or not t.iloc[0].int8_ms > 0:
            continue
        r, f16 = t.iloc[0], best.loc[(e.width, e.batch)]
        budget = 1e3 * e.batch / f16.img_per_s / ratio
        bench_ms = 1e3 * e.batch / e.img_per_s
        share = r.int8_conv_ms / r.int8_ms
        conv, outside = share * bench_ms, (1.0 - share) * bench_ms
        room = budget - conv
        rows.append(
            {
                "width": e.width,
                "batch": e.batch,
                "fastest_fp16": f16.variant,
                "int8_engine": e.variant,
                "trace": name,
                "budget_ms": budget,
                "int8_ms": r.int8_ms,
                "int8_conv_ms": r.int8_conv_ms,
                "conv_share": share,
                "int8_bench_ms": bench_ms,
                "conv_ms": conv,
                "outside_ms": outside,
                "conv_over_budget": conv / budget,
                "outside_over_room": outside / room if room > 0 else math.inf,
                "trace_over_bench": r.int8_ms / bench_ms,
            }
        )
    return pd.DataFrame(rows, columns=cols).sort_values(["batch", "width"], ignore_index=True)


def budget_facts(budget) -> list[dict]:
    """From :func:`budget_table`, per (width, batch): ``eight_bit.int8_conv_over_budget`` and
    ``eight_bit.int8_outside_conv_over_room``, each from the trace of the engine it budgets."""
    out = []
    for r in budget.itertuples():
        at, ds = unit_scope(r.width, r.batch), (r.trace, BENCH_8BIT)
        note = f"{r.int8_engine}; budget {r.budget_ms:.2f} ms per forward ({r.fastest_fp16})"
        out.append(
            fact("eight_bit.int8_conv_over_budget", r.conv_over_budget, "x", scope=at,
                 datasets=ds, note=note)
        )  # fmt: skip
        note = f"{r.int8_engine}: {r.outside_ms:.2f} ms of its forward outside the convolutions"
        out.append(
            fact("eight_bit.int8_outside_conv_over_room", r.outside_over_room, "x", scope=at,
                 datasets=ds, note=note)
        )  # fmt: skip
    return out


def speed_of(root: DataRoot) -> pd.DataFrame:
    """:func:`engine_speed` of ``root``'s ``bench_8bit``, its units that lack an engine of the
    plan left out (:func:`complete_units`)."""
    return complete_units(engine_speed(root.load(BENCH_8BIT)), planned_engines(root, BENCH_8BIT))


def budget_of(root: DataRoot, speed: pd.DataFrame | None = None) -> pd.DataFrame:
    """:func:`budget_table` of ``root``'s ``bench_8bit`` (``speed``: its :func:`speed_of`,
    when the caller has it) and the int8 traces it holds (empty without the bench)."""
    if not root.has(BENCH_8BIT):
        return budget_table(pd.DataFrame(), {})
    if speed is None:
        speed = speed_of(root)
    traces = {n: trace_table(int8_breakdown(root.load(n))) for n in INT8_TRACES if root.has(n)}
    return budget_table(speed, traces)


#: the facts :func:`goal_facts_of` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    eight_bit.best_over_fastest_fp16 eight_bit.int8_conv_over_budget
    eight_bit.int8_outside_conv_over_room
    """.split()
)


def goal_facts_of(root: DataRoot):
    """:func:`goal_facts` of ``root``'s ``bench_8bit`` units that hold every engine of the plan
    (:func:`speed_of`), with :func:`budget_facts` where it holds the int8 trace too, as a facts
    table (empty without the bench)."""
    if not root.has(BENCH_8BIT):
        return facts_table([])
    speed = speed_of(root)
    return facts_table(goal_facts(speed) + budget_facts(budget_of(root, speed)))
