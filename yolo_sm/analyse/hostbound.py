"""Which points the host decided: the measured host-bound rule, the heuristic for older tables
and the re-measure tolerance."""

from __future__ import annotations

import pandas as pd

from yolo_sm.contract.vocab import HOST_BOUND_IDLE_SHARE

TOLERANCE = 0.10  # a re-measure "repeats" within 10 % of the first
LAUNCH_BOUND_MAX_BATCH = 8  # eager up to this batch: the host's launches set the pace
HOST_BOUND_MIN_LAUNCHES = 2  # a graph replay and its input copy: the host cannot decide more
#: where the GPU busy time set against a point's latency came from (:func:`busy_time`)
BUSY_SAME_RUN, BUSY_TRACE = "sweep GPU busy time (same run)", "trace kernel time"


def launch_bound(backend, batch):
    """Eager at batch <= :data:`LAUNCH_BOUND_MAX_BATCH` (values or Series)."""
    return (backend == "eager") & (batch <= LAUNCH_BOUND_MAX_BATCH)


def host_bound_rule(gpu_busy_fraction, launches_per_forward):
    """Host-bound: GPU idle over :data:`HOST_BOUND_IDLE_SHARE` of the forward and over
    :data:`HOST_BOUND_MIN_LAUNCHES` launches per forward (NaN: False)."""
    return (1 - gpu_busy_fraction > HOST_BOUND_IDLE_SHARE) & (
        launches_per_forward > HOST_BOUND_MIN_LAUNCHES
    )


def host_bound(df):
    """Per row: its measured ``host_bound``, else :func:`launch_bound` on a GPU (boolean Series)."""
    guess = pd.Series(launch_bound(df["backend"], df["batch"]), index=df.index).astype(bool)
    if "device" in df:
        guess &= df["device"].astype(str).str.startswith("cuda").to_numpy()
    if "host_bound" not in df:
        return guess
    return df["host_bound"].astype("boolean").fillna(guess).astype(bool)


def busy_time(own_ms, trace_ms):
    """(GPU busy ms per forward, its source) per row: ``own_ms`` (same run), else ``trace_ms``."""
    own = pd.Series(own_ms, dtype=float)
    same = own.notna()
    busy = own.where(same, pd.Series(trace_ms, index=own.index, dtype=float))
    return busy, same.map({True: BUSY_SAME_RUN, False: BUSY_TRACE})
