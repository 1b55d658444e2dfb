"""Which points the host decided: the re-measure tolerance, the measured host-bound rule and the
heuristic for tables measured before it (shared by re-measures, the regression gate and the
sweep that records the verdict)."""

from __future__ import annotations

from yolo_sm.contract.vocab import HOST_BOUND_IDLE_SHARE

TOLERANCE = 0.10  # a re-measure "repeats" within 10 % of the first
LAUNCH_BOUND_MAX_BATCH = 8  # eager up to this batch: the host's launches set the pace
HOST_BOUND_MIN_LAUNCHES = 2  # a graph replay and its input copy: the host cannot decide more


def within_tolerance(ratio):
    """Whether new / shipped is within :data:`TOLERANCE` (a number or a Series)."""
    return abs(ratio - 1) <= TOLERANCE


def launch_bound(backend, batch):
    """An eager point at batch <= :data:`LAUNCH_BOUND_MAX_BATCH`: its pace is the host's kernel
    launches (a value or a Series each)."""
    return (backend == "eager") & (batch <= LAUNCH_BOUND_MAX_BATCH)


def host_bound_rule(gpu_busy_fraction, launches_per_forward):
    """Host-bound: the GPU idle for more than :data:`HOST_BOUND_IDLE_SHARE` of the forward and
    more than :data:`HOST_BOUND_MIN_LAUNCHES` launches per forward (a CUDA graph's replay is one
    launch, with at most one copy of the input into its static buffer: its idle time is the
    gaps between the graph's own kernels). Values or Series; NaN inputs give False."""
    return (1 - gpu_busy_fraction > HOST_BOUND_IDLE_SHARE) & (
        launches_per_forward > HOST_BOUND_MIN_LAUNCHES
    )


def host_bound(df):
    """Per row of a sweep (or bench) table, whether the point is host-bound: the measured
    ``host_bound`` column where the row has it; where the table or the row lacks it (tables
    measured before it was recorded), the old heuristic :func:`launch_bound` (eager at batch
    <= :data:`LAUNCH_BOUND_MAX_BATCH`, on a GPU: on a CPU the host is the device). A boolean
    Series on ``df``'s index."""
    import pandas as pd

    guess = pd.Series(launch_bound(df["backend"], df["batch"]), index=df.index).astype(bool)
    if "device" in df:
        guess &= df["device"].astype(str).str.startswith("cuda").to_numpy()
    if "host_bound" not in df:
        return guess
    measured = df["host_bound"].astype("boolean")
    return measured.fillna(guess).astype(bool)


#: where the GPU busy time set against a point's latency came from (:func:`busy_time`)
BUSY_SAME_RUN = "sweep GPU busy time (same run)"
BUSY_TRACE = "trace kernel time"


def busy_time(own_ms, trace_ms):
    """The GPU busy time per forward to set against a sweep point's latency, per row: the
    point's own ``gpu_busy_ms`` (measured in the same process as its latency) where it has one,
    else ``trace_ms`` (a Kineto trace's kernel time: another run, under the profiler). Returns
    (busy ms, where each came from: :data:`BUSY_SAME_RUN` or :data:`BUSY_TRACE`), two Series on
    ``own_ms``'s index."""
    import pandas as pd

    own = pd.Series(own_ms, dtype=float)
    same = own.notna()
    busy = own.where(same, pd.Series(trace_ms, index=own.index, dtype=float))
    return busy, same.map({True: BUSY_SAME_RUN, False: BUSY_TRACE})
