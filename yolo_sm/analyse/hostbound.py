"""Which points the host decided: the re-measure tolerance, the measured host-bound rule and the
heuristic for tables measured before it (shared by re-measures, the regression gate and the
sweep that records the verdict)."""

from __future__ import annotations

import pandas as pd

from yolo_sm.contract.vocab import HOST_BOUND_IDLE_SHARE

TOLERANCE = 0.10  # a re-measure "repeats" within 10 % of the first
LAUNCH_BOUND_MAX_BATCH = 8  # eager up to this batch: the host's launches set the pace
HOST_BOUND_MIN_LAUNCHES = 2  # a graph replay and its input copy: the host cannot decide more
#: where the GPU busy time set against a point's latency came from (:func:`busy_time`)
BUSY_SAME_RUN, BUSY_TRACE = "sweep GPU busy time (same run)", "trace kernel time"


def within_tolerance(ratio):
    """Whether new / shipped is within :data:`TOLERANCE` (a number or a Series)."""
    return abs(ratio - 1) <= TOLERANCE


def launch_bound(backend, batch):
    """Eager at batch <= :data:`LAUNCH_BOUND_MAX_BATCH` (values or Series)."""
    return (backend == "eager") & (batch <= LAUNCH_BOUND_MAX_BATCH)


def host_bound_rule(gpu_busy_fraction, launches_per_forward):
    """Host-bound: the GPU idle for more than :data:`HOST_BOUND_IDLE_SHARE` of the forward and
    more than :data:`HOST_BOUND_MIN_LAUNCHES` launches per forward (values or Series; NaN gives
    False)."""
    return (1 - gpu_busy_fraction > HOST_BOUND_IDLE_SHARE) & (
        launches_per_forward > HOST_BOUND_MIN_LAUNCHES
    )


def host_bound(df):
    """Per row of a sweep or bench table, whether the point is host-bound: its measured
    ``host_bound`` where it has one, else :func:`launch_bound` on a GPU (on a CPU the host is
    the device). A boolean Series on ``df``'s index."""
    guess = pd.Series(launch_bound(df["backend"], df["batch"]), index=df.index).astype(bool)
    if "device" in df:
        guess &= df["device"].astype(str).str.startswith("cuda").to_numpy()
    if "host_bound" not in df:
        return guess
    return df["host_bound"].astype("boolean").fillna(guess).astype(bool)


def busy_time(own_ms, trace_ms):
    """(GPU busy ms per forward, where each came from) per row: the point's own ``gpu_busy_ms``
    (same process as its latency) where it has one, else ``trace_ms`` (a Kineto trace's kernel
    time: another run)."""
    own = pd.Series(own_ms, dtype=float)
    same = own.notna()
    busy = own.where(same, pd.Series(trace_ms, index=own.index, dtype=float))
    return busy, same.map({True: BUSY_SAME_RUN, False: BUSY_TRACE})
