"""Sections that show one quantity measured twice: both numbers, and why they differ."""

from __future__ import annotations

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report import tables
from yolo_sm.report.sections import Note, needs
from yolo_sm.topics.batch import analyse as agreement
from yolo_sm.topics.batch.report import show

__all__ = ["eager_memory", "graph_speedup", "show"]


#: Two latencies (or slopes) within this fraction of each other count as the same.
SAME = 0.05


@needs("sweep_fp16_nhwc", "bench_fast_engines")
def graph_speedup(root: DataRoot, sweep: str = "sweep_fp16_nhwc", batch: int = 1):
    """The CUDA graph's speed-up at ``batch`` in the sweep and in the bench, with which
    latency moved between the two processes (a table and one sentence)."""
    t = agreement.graph_speedup_sweep_vs_bench(
        root.load(sweep), root.load("bench_fast_engines"), batch
    )
    if t.empty:
        return [Note("The sweep and the bench share no width at this batch.")]
    graph_same = (t.graph_ratio - 1).abs().max() <= SAME
    moved = (t.moved == "eager").sum()
    line = (
        f"At batch {batch} the graph latencies of the two processes agree within "
        f"{100 * (t.graph_ratio - 1).abs().max():.1f} %; eager's differ by up to "
        f"{100 * (t.eager_ratio - 1).abs().max():.0f} % (eager moved more at {moved} of "
        f"{len(t)} widths). "
        + (
            "The speed-ups differ because eager's host-bound launches ran at another speed in "
            "each process, not because the graph did: quote a speed-up with its own process's "
            "baseline (the bench's is measured minutes apart from the graph, in one process)."
            if graph_same
            else "Both latencies moved between the processes: neither speed-up carries over."
        )
    )
    return [tables.show(t), Note(line)]


@needs("sweep_fp16_nhwc", "sweep_bf16_nhwc")
def eager_memory(root: DataRoot, first: str = "sweep_fp16_nhwc", again: str = "sweep_bf16_nhwc"):
    """Eager memory per image in the first sweep and its repeat, and, at the width where they
    part most, the batches whose peaks part."""
    a, b = root.load(first), root.load(again)
    t = agreement.eager_memory_between_runs(a, b)
    if t.empty:
        return [Note(f"{first} and {again} share no eager width.")]
    worst = t.loc[(t.ratio - 1).abs().idxmax()]
    out = [tables.show(t)]
    if abs(worst.ratio - 1) <= SAME:
        out.append(Note(f"The two runs agree within {SAME:.0%} at every width."))
        return out
    detail = agreement.eager_memory_by_batch(a, b, worst.width)
    top = detail.loc[detail.difference_MB.abs().idxmax()]
    agree = (t.ratio - 1).abs() <= SAME
    out += [
        Note(
            f"The runs agree within {SAME:.0%} at {int(agree.sum())} of {len(t)} widths; at "
            f"width {worst.width:g} the slope differs {worst.ratio:.2f}x because one batch's "
            f"peak differs: batch {int(top.batch)} peaked at {top.first_peak_MB:,.0f} MB in "
            f"{first} and {top.again_peak_MB:,.0f} MB in {again}: one batch's peak moved, "
            "not the cost of an image. Per batch at that width:"
        ),
        tables.show(detail),
    ]
    return out
