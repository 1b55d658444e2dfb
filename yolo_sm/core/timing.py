"""Timing after Triton's ``do_bench``: warm up (on a GPU until per-call time and SM clock
settle), then ``budget_ms`` of calls timed one by one; :func:`measure_rounds` interleaves."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.values import MAX_BUDGET_MS, MAX_WARMUP_MS
from yolo_sm.core import provenance
from yolo_sm.core.stopwatch import phase

NOISE_THRESHOLD = 0.10  # IQR / median above this marks a run as noisy


@dataclass(frozen=True)
class Settle:
    """Warm up in ``chunk_ms`` chunks until the last ``chunks`` medians lie within ``tol`` and
    their SM clocks within ``clock_tol`` (max / min - 1), or ``max_ms`` ran (not settled). A
    GPU still warm (a warm-up there settled, or a timed run ended, at most ``hold_s`` ago, and
    its SM clock now within ``clock_tol`` of that warm-up's) has paid its ramp: chunks of
    ``warmup_ms / chunks`` (at least ``min_chunk_ms``), so a loop of short measurements does
    not pay ``chunks x chunk_ms`` each."""

    tol: float = 0.02
    clock_tol: float = 0.05
    chunks: int = 4
    chunk_ms: float = 100.0
    max_ms: float = 3000.0
    hold_s: float = 2.0
    min_chunk_ms: float = 1.0


#: the settle rule of measure() on a GPU
SETTLE = Settle()
#: the most calls of one warm-up chunk
MAX_CHUNK = 10_000
#: device -> (time.monotonic(), SM clock MHz) of its last settled warm-up (the time: of its
#: last timed run since)
_WARM: dict = {}


def cool(device) -> None:
    """Forget that ``device`` is warm: after a profiler pass the next warm-up settles in full
    chunks, as the first of a process does."""
    _WARM.pop(str(device), None)


def _for_warm_gpu(settle: Settle, warmup_ms: float, device: str, clock_mhz) -> Settle:
    """``settle`` with short chunks where ``device`` is still warm (see :class:`Settle`)."""
    last = _WARM.get(str(device))
    if last is None or time.monotonic() - last[0] > settle.hold_s:
        return settle
    now = clock_mhz()
    if now is None or now < last[1] * (1 - settle.clock_tol):
        return settle
    chunk = max(settle.min_chunk_ms, min(settle.chunk_ms, warmup_ms / settle.chunks))
    return replace(settle, chunk_ms=chunk)


class Timer:
    """``time_calls(fn, n, before=None)``: ms of each of ``n`` calls; ``cpu_ns``: the thread's
    CPU time in its last loop (issuing only, on a GPU), None when not kept."""

    cpu_ns: int | None = None

    def sync(self) -> None:  # pragma: no cover - interface
        pass


class CpuTimer(Timer):
    def __init__(self, clock_ns: Callable[[], int] = time.perf_counter_ns):
        self.clock_ns = clock_ns

    def time_calls(self, fn, n, before=None):
        out = []
        cpu0 = time.thread_time_ns()
        for _ in range(n):
            if before is not None:
                before()
            t0 = self.clock_ns()
            fn()
            out.append((self.clock_ns() - t0) / 1e6)
        self.cpu_ns = time.thread_time_ns() - cpu0
        return out


class CudaTimer(Timer):
    """CUDA events around each call on the current stream; one synchronise at the end."""

    def __init__(self):
        import torch

        self.torch = torch

    def sync(self):
        self.torch.cuda.synchronize()

    def time_calls(self, fn, n, before=None):
        cuda = self.torch.cuda
        starts = [cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [cuda.Event(enable_timing=True) for _ in range(n)]
        cpu0 = time.thread_time_ns()
        for s, e in zip(starts, ends, strict=True):
            if before is not None:
                before()
            s.record()
            fn()
            e.record()
        self.cpu_ns = time.thread_time_ns() - cpu0  # issuing only: the wait below spins
        cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]


@dataclass
class Measurement:
    """Raw per-call samples (ms) of one timed configuration plus how they were taken."""

    samples_ms: list[float]
    batch: int = 1
    warmup_calls: int = 0
    label: str = ""
    l2_flush: bool = False
    noise_threshold: float = NOISE_THRESHOLD
    provenance: dict = field(default_factory=dict)
    #: CPU time of the launching thread per timed call, ms (NaN when the timer kept none)
    cpu_ms_per_call: float = math.nan
    warmup_s: float = math.nan  # wall seconds of the estimate and warm-up calls
    timed_s: float = math.nan  # wall seconds of the timed calls
    warmup_settled: bool | None = None  # None where a fixed warm-up ran
    #: interleaved runs: each round's median ms per call and SM clock (MHz or None) after it
    round_ms: list = field(default_factory=list)
    round_clock_mhz: list = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.samples_ms)

    def quantile(self, q: float) -> float:
        """Quantile ``q`` in [0, 1] of the samples (linear interpolation), NaN when empty."""
        import numpy as np

        return float(np.quantile(self.samples_ms, q)) if self.samples_ms else math.nan

    @property
    def median_ms(self) -> float:
        """The median per call; of an interleaved run, the median of its rounds' medians."""
        if self.round_ms:
            return statistics.median(self.round_ms)
        return statistics.median(self.samples_ms) if self.samples_ms else math.nan

    @property
    def iqr_ms(self) -> float:
        return self.quantile(0.75) - self.quantile(0.25)

    @property
    def p99_ms(self) -> float:
        return self.quantile(0.99)

    @property
    def min_ms(self) -> float:
        return min(self.samples_ms) if self.samples_ms else math.nan

    @property
    def noisy(self) -> bool:
        """True when IQR/median exceeds the threshold: rerun, or quote the spread."""
        med = self.median_ms
        return bool(self.samples_ms) and med > 0 and self.iqr_ms / med > self.noise_threshold

    @property
    def img_per_s(self) -> float:
        med = self.median_ms
        return self.batch * 1e3 / med if self.samples_ms and med > 0 else math.nan

    def summary(self) -> dict:
        """Flat dict for a table row; an interleaved run adds its rounds, their spread (%) and
        median SM clock."""
        x, out = self.samples_ms, {}
        if self.round_ms:
            r, clocks = self.round_ms, [c for c in self.round_clock_mhz if c is not None]
            out = dict(
                rounds=len(r), round_ms=list(r),
                round_spread_pct=(max(r) - min(r)) / self.median_ms * 100,
                round_sm_clock_mhz=[math.nan if c is None else c for c in self.round_clock_mhz],
                sm_clock_mhz=statistics.median(clocks) if clocks else math.nan,
            )  # fmt: skip
        return out | dict(
            median_ms=self.median_ms, iqr_ms=self.iqr_ms, min_ms=self.min_ms,
            mean_ms=statistics.fmean(x) if x else math.nan, p99_ms=self.p99_ms,
            img_per_s=self.img_per_s, n_samples=self.n, warmup_calls=self.warmup_calls,
            noisy=self.noisy, l2_flush=self.l2_flush, samples_ms=list(x),
            host_cpu_ms=self.cpu_ms_per_call, warmup_settled=self.warmup_settled,
        )  # fmt: skip

    def __repr__(self) -> str:
        flag = " NOISY" if self.noisy else ""
        return f"Measurement({self.label!r}: median {self.median_ms:.4g} ms, n={self.n}{flag})"


def measure(fn: Callable[[], object], *, label: str = "", **kwargs) -> Measurement:
    """Time ``fn()``: :func:`measure_rounds` of ``fn`` alone in one round, raising what it
    raised; ``l2_flush`` zeroes twice the GPU's L2 before each timed call."""
    m = measure_rounds({label: fn}, rounds=1, **kwargs)[label]
    if isinstance(m, BaseException):
        raise m
    return m


def _warm(timer, fn, warmup_ms, estimate_calls, settle, clock_mhz, device="cpu") -> tuple:
    """The estimate calls, then the warm-up (in chunks until ``settle`` holds, if given):
    (calls made, ms per call it ended at, whether it settled or None)."""
    timer.sync()
    estimate = timer.time_calls(fn, max(1, estimate_calls))
    per_call = max(statistics.median(estimate), 1e-6)
    if not settle:
        calls = max(1, math.ceil(warmup_ms / per_call))
        timer.time_calls(fn, calls)
        return calls + len(estimate), per_call, None
    settle = _for_warm_gpu(settle, warmup_ms, device, clock_mhz)
    medians, clocks, calls, spent, k = [], [], len(estimate), 0.0, max(1, settle.chunks)
    while True:
        n = min(MAX_CHUNK, max(1, math.ceil(settle.chunk_ms / per_call)))
        samples = timer.time_calls(fn, n)
        # a call counts at least 1 us: a timer that reads 0 cannot keep the warm-up going
        calls, spent = calls + n, spent + max(sum(samples), n * 1e-3)
        per_call = max(statistics.median(samples), 1e-6)
        medians.append(per_call)
        clocks.append(clock_mhz())
        if spent >= warmup_ms and len(medians) >= k:
            steady_clock = None in clocks[-k:] or _spread(clocks[-k:]) <= settle.clock_tol
            if _spread(medians[-k:]) <= settle.tol and steady_clock:
                if clocks[-1] is not None:
                    _WARM[str(device)] = (time.monotonic(), clocks[-1])
                return calls, per_call, True
        if spent >= max(settle.max_ms, warmup_ms):
            return calls, per_call, False


def measure_rounds(
    fns: dict,
    *,
    batch: int = 1,
    device: str = "cpu",
    warmup_ms: float = 100.0,
    budget_ms: float = 1000.0,
    rounds: int = 5,
    min_reps: int = 5,
    max_reps: int = 10_000,
    estimate_calls: int = 3,
    l2_flush: bool = False,
    noise_threshold: float = NOISE_THRESHOLD,
    timer: Timer | None = None,
    with_provenance: bool = True,
    settle: Settle | None | bool = True,
    clock_mhz: Callable[[], float | None] | None = None,
) -> dict:
    """Time callables side by side: each warmed up, then ``rounds`` rounds (A, B, A, B ...) of
    ``budget_ms / rounds`` each; ``{name: Measurement or the exception it raised}``."""
    if not budget_ms > 0 or not warmup_ms >= 0 or rounds < 1 or not 1 <= min_reps <= max_reps:
        raise ValueError("measure needs budget_ms > 0, warmup_ms >= 0, 1 <= min_reps <= max_reps")
    if budget_ms > MAX_BUDGET_MS or warmup_ms > MAX_WARMUP_MS:  # inf too: never an endless loop
        raise UserError(
            f"budget_ms is at most {MAX_BUDGET_MS:g} and warmup_ms at most {MAX_WARMUP_MS:g}, "
            f"got {budget_ms:g} and {warmup_ms:g}"
        )
    on_gpu = str(device).startswith("cuda")
    timer = timer or (CudaTimer() if on_gpu else CpuTimer())
    settle = (SETTLE if on_gpu else None) if settle is True else settle
    if clock_mhz is None:
        clock_mhz = lambda: provenance.sm_clock_mhz(device)  # noqa: E731
    flush = _l2_flusher(device) if (l2_flush and on_gpu) else None
    out, reps, cpu_ns = {}, {}, {}
    for name, fn in fns.items():
        try:
            with phase("warmup") as warm:
                calls, per_call, settled = _warm(
                    timer, fn, warmup_ms, estimate_calls, settle, clock_mhz, device
                )
        except Exception as e:  # noqa: BLE001 - the caller turns it into an error row
            out[name] = e
            continue
        n = math.ceil(budget_ms / per_call / rounds)
        reps[name], cpu_ns[name] = min(max_reps, max(math.ceil(min_reps / rounds), n)), 0
        out[name] = Measurement([], batch, calls, name, bool(flush), noise_threshold,
                                warmup_s=warm.seconds, warmup_settled=settled)  # fmt: skip
    with phase("timed") as timed:
        clock_start = provenance.sm_clock_mhz(device) if with_provenance else None
        for _ in range(rounds):
            for name, fn in fns.items():
                m = out[name]
                if not isinstance(m, Measurement):
                    continue
                try:
                    samples = timer.time_calls(fn, reps[name], before=flush)
                except Exception as e:  # noqa: BLE001
                    out[name] = e
                    continue
                m.samples_ms += samples
                if rounds > 1:
                    m.round_ms.append(statistics.median(samples))
                    m.round_clock_mhz.append(clock_mhz())
                ns = timer.cpu_ns
                cpu_ns[name] = None if ns is None or cpu_ns[name] is None else cpu_ns[name] + ns
        if str(device) in _WARM:  # the GPU was kept busy until now
            _WARM[str(device)] = (time.monotonic(), _WARM[str(device)][1])
        clock_end = provenance.sm_clock_mhz(device) if with_provenance else None
        prov = provenance.collect(device) if with_provenance else {}
        prov.update(sm_clock_start_mhz=clock_start, sm_clock_end_mhz=clock_end)
    for name, m in out.items():
        if isinstance(m, Measurement):
            m.timed_s, m.provenance = timed.seconds, dict(prov)
            if cpu_ns[name] is not None:
                m.cpu_ms_per_call = cpu_ns[name] / 1e6 / len(m.samples_ms)
    return out


def _spread(values) -> float:
    """max / min - 1 of positive values (inf where one is not positive)."""
    lo = min(values)
    return max(values) / lo - 1 if lo > 0 else math.inf


def engine_call(engine) -> Callable[[], object]:
    """One forward of an :class:`~yolo_sm.core.engines.Engine` on its prepared random batch."""
    x = engine._input if engine._input is not None else engine.make_input(seed=0)
    return lambda: engine(x)


def measure_engine(engine, **kwargs) -> Measurement:
    """Time an :class:`~yolo_sm.core.engines.Engine` on one prepared random batch."""
    cfg = engine.config
    return measure(
        engine_call(engine), batch=cfg.batch, device=cfg.device, label=engine.description, **kwargs
    )


def cuda_graph(fn, stream=None, device=None, warmup: int = 1):
    """(a CUDA graph of ``fn``'s GPU work, what the captured call returned); ``fn`` runs
    ``warmup`` times before on the capture stream (``stream``, else a new one on ``device``)."""
    import torch

    side = stream if stream is not None else torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    side.synchronize()
    graph = torch.cuda.CUDAGraph()
    # thread_local: a monitor thread's CUDA calls elsewhere in the process do not abort it
    with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
        out = fn()
    side.synchronize()
    return graph, out


def measure_captured(engine, **kwargs) -> Measurement | None:
    """Time an engine's ``capture`` forward replayed in a CUDA graph of its own (as the
    pipeline's whole-batch graph runs it); None where it cannot be captured or on a CPU."""
    cfg = engine.config
    if engine.capture is None or not str(cfg.device).startswith("cuda"):
        return None
    import torch

    x = engine._input if engine._input is not None else engine.make_input(seed=0)
    with torch.no_grad():
        graph, _ = cuda_graph(lambda: engine.capture(x))
    return measure(
        graph.replay, batch=cfg.batch, device=cfg.device, label=f"{engine.description} in a graph",
        **kwargs,
    )  # fmt: skip


def _l2_flusher(device: str) -> Callable[[], None]:
    import torch

    props = torch.cuda.get_device_properties(torch.device(device))
    l2 = getattr(props, "L2_cache_size", 0) or 64 * 2**20
    buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)
    return buf.zero_


#: prefixes of the CUDA runtime / driver calls that put work on a stream: "launches per forward"
LAUNCH_PREFIXES = tuple(
    "cudaLaunch cuLaunch cudaGraphLaunch cuGraphLaunch cudaMemcpy cudaMemset cuMemcpy "
    "cuMemset".split()
)


def host_profile(fn: Callable[[], object], *, device: str = "cuda", calls: int = 5) -> dict:
    """Per call of ``fn``, from a ``torch.profiler`` pass of ``calls`` calls: launches (a graph
    replay is one), kernels (memcpys and memsets too) and ``gpu_busy_ms``; on a CPU 0, 0, NaN.
    The pass ends the device's warm state (:func:`cool`)."""
    cool(device)
    if not str(device).startswith("cuda"):
        return {"launches_per_forward": 0.0, "kernels_per_forward": 0.0, "gpu_busy_ms": math.nan}
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    events = prof.profiler.kineto_results.events()
    note = lambda e: hasattr(e, "is_user_annotation") and bool(e.is_user_annotation())  # noqa: E731
    return count_events(
        ((e.name(), str(e.device_type()), e.duration_ns(), note(e)) for e in events), calls
    )


def count_events(events, calls: int) -> dict:
    """:func:`host_profile`'s figures from ``(name, device type, duration ns, is annotation)``
    tuples (annotations, ranges projected onto the GPU's timeline, are not work)."""
    launches = kernels = 0
    busy_ns = 0
    for name, dev, dur, annotation in events:
        if annotation:
            continue
        if dev.endswith("CUDA"):
            kernels += 1
            busy_ns += max(int(dur), 0)
        elif name.startswith(LAUNCH_PREFIXES):
            launches += 1
    return {
        "launches_per_forward": launches / calls,
        "kernels_per_forward": kernels / calls,
        "gpu_busy_ms": busy_ns / 1e6 / calls,
    }


def launch_cost_us(device: str = "cuda", launches: int = 200, repeats: int = 25) -> float:
    """The host's cost of one eager launch, us: the median over ``repeats`` of ``launches``
    one-element in-place adds issued back to back (the queue never fills). NaN on a CPU."""
    if not str(device).startswith("cuda"):
        return math.nan
    import torch

    t = torch.zeros(1, device=device)
    for _ in range(20):
        t.add_(1)
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(launches):
            t.add_(1)
        out.append((time.perf_counter_ns() - t0) / launches / 1e3)
        torch.cuda.synchronize()
    return statistics.median(out)
