"""measure() and Measurement with an injected fake timer: no sleeps, no real clock."""

import math
import statistics

import pytest
import torch

from yolo_sm.core import timing
from yolo_sm.core.timing import CpuTimer, Measurement, Timer, measure, measure_engine


class FakeTimer(Timer):
    """Returns preset per-call durations: ``estimate`` for the estimate calls, then ``rest(i)``
    for the i-th later call. Records every ``time_calls`` (n, before) and what it returned."""

    def __init__(self, estimate, rest=lambda i: 1.0 + i / 1000):
        self.estimate = list(estimate)
        self.rest = rest
        self.calls: list[tuple[int, object]] = []
        self.returned: list[list[float]] = []
        self.syncs = 0
        self.later = 0

    def sync(self):
        self.syncs += 1

    def time_calls(self, fn, n, before=None):
        self.calls.append((n, before))
        out = []
        for _ in range(n):
            if before is not None:
                before()
            fn()
            if len(self.returned) == 0:  # the estimate
                out.append(self.estimate[len(out) % len(self.estimate)])
            else:
                out.append(self.rest(self.later))
                self.later += 1
        self.returned.append(out)
        return out


@pytest.fixture(autouse=True)
def cold_gpus(monkeypatch):
    """No warm device carried from one test (or an earlier measurement) into another."""
    monkeypatch.setattr(timing, "_WARM", {})


class Counter:
    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1


def run(estimate, **kw):
    fn, timer = Counter(), FakeTimer(estimate)
    kw.setdefault("with_provenance", False)
    m = measure(fn, timer=timer, **kw)
    return m, timer, fn


# (estimate samples, budget_ms, min_reps, max_reps, expected reps); the estimate is the median
@pytest.mark.parametrize(
    "estimate, budget, lo, hi, reps",
    [
        ([2.0, 2.0, 2.0], 100, 5, 10_000, 50),
        ([1.0, 2.0, 100.0], 100, 5, 10_000, 50),  # median, not mean (34.3 -> 3 reps)
        ([3.0, 3.0, 3.0], 10, 1, 100, 4),  # ceil(3.33)
        ([2.0, 2.0, 2.0], 4, 5, 10_000, 5),  # clamped up to min_reps
        ([0.5, 0.5, 0.5], 1000, 5, 100, 100),  # clamped down to max_reps
        ([0.0, 0.0, 0.0], 10, 5, 10_000, 10_000),  # a zero estimate does not divide by zero
        ([8.0, 8.0, 8.0], 1, 1, 10, 1),
    ],
)
def test_repeat_count_from_budget_and_clamped(estimate, budget, lo, hi, reps):
    m, timer, fn = run(estimate, budget_ms=budget, min_reps=lo, max_reps=hi, warmup_ms=0)
    assert [n for n, _ in timer.calls] == [3, 1, reps]
    assert m.n == reps
    assert fn.n == 3 + 1 + reps
    assert timer.syncs >= 1


# (estimate, warmup_ms, expected warm-up calls)
@pytest.mark.parametrize(
    "estimate, warmup_ms, expected",
    [
        (2.0, 10, 5),
        (2.0, 3, 2),  # ceil(1.5)
        (2.0, 0, 1),  # at least one
        (4.0, 1, 1),
        (0.25, 1, 4),
    ],
)
def test_warmup_count(estimate, warmup_ms, expected):
    m, timer, _ = run([estimate] * 3, warmup_ms=warmup_ms, budget_ms=10)
    assert timer.calls[1][0] == expected
    assert m.warmup_calls == expected + 3  # the estimate calls warm up too


@pytest.mark.parametrize("estimate_calls, expected", [(1, 1), (3, 3), (7, 7), (0, 1)])
def test_estimate_calls(estimate_calls, expected):
    m, timer, _ = run([2.0], estimate_calls=estimate_calls, budget_ms=10, warmup_ms=0)
    assert timer.calls[0][0] == expected


def test_samples_are_the_timed_calls_only():
    m, timer, _ = run([2.0, 2.0, 2.0], budget_ms=20, warmup_ms=4)
    assert len(timer.returned) == 3
    assert m.samples_ms == timer.returned[2]
    assert m.samples_ms == [1.0 + i / 1000 for i in range(2, 12)]  # after 2 warm-up calls
    assert m.samples_ms[0] not in timer.returned[0] + timer.returned[1]


# --- the warm-up that settles (a fake clock: per-call times and SM clocks as functions of the
# call index) ---------------------------------------------------------------------------------


#: the settle rule with chunks of 50 ms (the tests' figures follow from it, not from the default)
SETTLE_50 = timing.Settle(tol=0.02, clock_tol=0.05, chunks=4, chunk_ms=50.0, max_ms=2000.0)


def ramp(i, slow=1.3, fast=1.0, calls=400):
    """Per-call ms of a GPU ramping from idle: ``slow`` falling linearly to ``fast`` over
    ``calls`` calls, then flat."""
    return fast + (slow - fast) * max(0.0, 1 - i / calls)


def settle_run(rest, clock=None, estimate=1.3, **kw):
    fn, timer = Counter(), FakeTimer([estimate], rest=rest)
    kw.setdefault("with_provenance", False)
    kw.setdefault("budget_ms", 100)
    m = measure(fn, timer=timer, clock_mhz=clock or (lambda: None), **kw)
    return m, timer


def test_the_warm_up_goes_on_until_the_per_call_time_settles():
    """The first thing timed in a process pays the ramp with a fixed warm-up; with the settle
    rule its samples read what the flat part reads (within the rule's 2 %)."""
    fixed, _ = settle_run(ramp, warmup_ms=50, settle=False)
    settled, timer = settle_run(ramp, warmup_ms=50, settle=SETTLE_50)
    assert fixed.median_ms > 1.05  # paid the ramp
    assert settled.warmup_settled is True
    assert settled.median_ms == pytest.approx(1.0, rel=0.02)
    # it stopped soon after the flat part began: the last 4 chunks of ~50 calls within 2 %
    warm = settled.warmup_calls - 3
    assert 300 <= warm <= 400 + 4 * 60
    # the repeat count comes from the settled per-call time (100 ms / ~1.0 ms), not the estimate
    assert settled.n == pytest.approx(100, abs=3)
    # a flat GPU settles after the minimum: 4 chunks of 50 ms, or warmup_ms when longer
    flat, _ = settle_run(lambda i: 1.0, estimate=1.0, warmup_ms=0, settle=SETTLE_50)
    assert flat.warmup_calls - 3 == 4 * 50
    longer, _ = settle_run(lambda i: 1.0, estimate=1.0, warmup_ms=500, settle=SETTLE_50)
    assert longer.warmup_calls - 3 == 500


def test_the_warm_up_waits_for_the_sm_clock_too():
    """Per-call time flat but the SM clock still climbing (read after each chunk): not settled
    until the clock's last 4 readings lie within 5 %."""
    timer_box = {}

    def clock():  # 1,200 MHz rising to 1,980 MHz over the first 1,000 calls
        i = timer_box["t"].later
        return 1980.0 - 780.0 * max(0.0, 1 - i / 1000)

    fn, timer = Counter(), FakeTimer([1.0], rest=lambda i: 1.0)
    timer_box["t"] = timer
    m = measure(fn, timer=timer, budget_ms=10, warmup_ms=0, with_provenance=False,
                settle=SETTLE_50, clock_mhz=clock)  # fmt: skip
    assert m.warmup_settled is True
    warm = m.warmup_calls - 3
    assert 850 <= warm <= 1000 + 4 * 50  # a spread of <= 5 % over 4 chunks: from ~900 calls on
    # no clock readable (a CPU, no NVML): the time alone decides
    m = measure(Counter(), timer=FakeTimer([1.0], rest=lambda i: 1.0), budget_ms=10,
                warmup_ms=0, with_provenance=False, settle=SETTLE_50,
                clock_mhz=lambda: None)  # fmt: skip
    assert m.warmup_calls - 3 == 200


def test_a_gpu_still_warm_settles_in_short_chunks_and_a_cold_one_pays_the_full_warm_up(
    monkeypatch,
):
    """A measurement right after a settled one, at the clock it settled at, warms up in chunks
    of warmup_ms / 4 (here 2.5 ms: 4 x 3 calls); one that starts past hold_s, or at a clock
    more than clock_tol lower, warms up in the rule's chunks (4 x 50 calls)."""
    clock = {"mhz": 1980.0}
    now = {"s": 100.0}
    monkeypatch.setattr(timing.time, "monotonic", lambda: now["s"])

    def warm_calls(device="cuda"):
        fn, timer = Counter(), FakeTimer([1.0], rest=lambda i: 1.0)
        m = measure(fn, timer=timer, budget_ms=10, warmup_ms=10, with_provenance=False,
                    settle=SETTLE_50, clock_mhz=lambda: clock["mhz"], device=device)  # fmt: skip
        assert m.warmup_settled is True
        return m.warmup_calls - 3

    assert warm_calls() == 4 * 50  # cold: the first measurement of the process
    now["s"] += 1.0
    assert warm_calls() == 4 * 3  # warm: ceil(2.5 ms / 1 ms) calls a chunk
    now["s"] += SETTLE_50.hold_s + 0.1  # idle past hold_s
    assert warm_calls() == 4 * 50
    now["s"] += 0.5
    clock["mhz"] = 1980.0 * 0.9  # the clock fell
    assert warm_calls() == 4 * 50
    assert warm_calls(device="cuda:1") == 4 * 50  # another GPU is cold
    assert warm_calls() == 4 * 3  # warm at the clock it settled at
    timing.cool("cuda")  # a profiler pass ran
    assert warm_calls() == 4 * 50


def test_a_profiler_pass_ends_the_devices_warm_state(monkeypatch, tmp_path):
    from yolo_sm.core.profiling import kineto

    cooled = []
    monkeypatch.setattr(timing, "cool", cooled.append)
    timing.host_profile(lambda: None, device="cpu")
    kineto.capture(lambda: None, tmp_path / "t.json.gz", iters=1, warmup=0, device="cpu")
    assert cooled == ["cpu", "cpu"]


def test_a_warm_up_that_never_settles_stops_at_its_cap_and_says_so():
    jumpy = lambda i: 1.0 if (i // 50) % 2 else 1.1  # noqa: E731 - chunks alternate by 10 %
    m, timer = settle_run(jumpy, warmup_ms=0, settle=timing.Settle(chunk_ms=50.0, max_ms=300))
    assert m.warmup_settled is False
    warm_ms = sum(sum(r) for r in timer.returned[1:-1])
    assert 300 <= warm_ms < 300 + 60  # stopped at the first chunk past the cap


def test_settle_is_on_for_a_gpu_and_off_for_a_cpu_by_default():
    gpu, _ = settle_run(lambda i: 1.0, warmup_ms=0, device="cuda")
    cpu, _ = settle_run(lambda i: 1.0, warmup_ms=0, device="cpu")
    assert gpu.warmup_settled is True and cpu.warmup_settled is None
    assert cpu.warmup_calls == 3 + 1  # the estimate calls, then one fixed warm-up call


@pytest.mark.parametrize("l2_flush", [False, True])
def test_no_flush_hook_on_cpu(l2_flush):
    m, timer, _ = run([1.0], budget_ms=5, warmup_ms=1, l2_flush=l2_flush, device="cpu")
    assert all(before is None for _, before in timer.calls)
    assert m.l2_flush is False


def test_flush_hook_runs_before_each_timed_call_on_gpu(monkeypatch):
    flushes = Counter()
    monkeypatch.setattr(timing, "_l2_flusher", lambda device: flushes)
    m, timer, _ = run([1.0], budget_ms=5, warmup_ms=1, l2_flush=True, device="cuda", settle=False)
    (_, b_est), (_, b_warm), (reps, b_timed) = timer.calls
    assert b_est is None and b_warm is None and b_timed is flushes
    assert flushes.n == reps == 5
    assert m.l2_flush is True


def test_measure_passes_batch_label_threshold():
    m, _, _ = run([2.0], batch=8, label="x", noise_threshold=0.5, budget_ms=10, warmup_ms=0)
    assert (m.batch, m.label, m.noise_threshold) == (8, "x", 0.5)
    assert m.img_per_s == pytest.approx(8 * 1000 / m.median_ms)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"budget_ms": 0},
        {"budget_ms": -1},
        {"budget_ms": math.nan},
        {"warmup_ms": -1},
        {"warmup_ms": math.nan},
        {"min_reps": 0},
        {"min_reps": 10, "max_reps": 9},
    ],
)
def test_invalid_arguments(kwargs):
    fn, timer = Counter(), FakeTimer([1.0])
    with pytest.raises(ValueError):
        measure(fn, timer=timer, with_provenance=False, **kwargs)
    assert timer.calls == [] and fn.n == 0


def test_provenance_on_cpu():
    m, _, _ = run([1.0], budget_ms=3, warmup_ms=0, device="cpu", with_provenance=True)
    assert m.provenance["torch"] == torch.__version__
    assert m.provenance["device"] == "cpu"
    assert m.provenance["sm_clock_start_mhz"] is None
    assert m.provenance["sm_clock_end_mhz"] is None


def test_no_provenance_when_disabled():
    m, _, _ = run([1.0], budget_ms=3, warmup_ms=0)
    assert "torch" not in m.provenance


# --- Measurement statistics -----------------------------------------------------------------

# samples, median, q25, q75, mean, p99 (hand-computed; quartiles by linear interpolation)
STATS = [
    ([1, 2, 3, 4, 100], 3, 2, 4, 22, 4 + 0.96 * 96),
    ([1, 2, 3, 4], 2.5, 1.75, 3.25, 2.5, 3 + 0.97),
    ([4, 1, 3, 2], 2.5, 1.75, 3.25, 2.5, 3 + 0.97),  # order does not matter
    ([5], 5, 5, 5, 5, 5),
    ([1, 3], 2, 1.5, 2.5, 2, 2.98),
]


@pytest.mark.parametrize("samples, median, q25, q75, mean, p99", STATS)
def test_statistics(samples, median, q25, q75, mean, p99):
    m = Measurement([float(s) for s in samples], batch=4)
    assert m.n == len(samples)
    assert m.median_ms == pytest.approx(median)
    assert m.quantile(0.25) == pytest.approx(q25)
    assert m.quantile(0.75) == pytest.approx(q75)
    assert m.iqr_ms == pytest.approx(q75 - q25)
    assert m.summary()["min_ms"] == min(samples)
    assert m.summary()["mean_ms"] == pytest.approx(mean)
    assert m.p99_ms == pytest.approx(p99)
    assert m.img_per_s == pytest.approx(4 * 1000 / median)


# samples, threshold, noisy: IQR/median strictly above the threshold
@pytest.mark.parametrize(
    "samples, threshold, noisy",
    [
        ([10, 10, 10, 10], 0.10, False),
        ([9, 10, 11], 0.10, False),  # IQR/median = 0.10 exactly: not above
        ([8, 10, 12], 0.10, True),  # 0.20
        ([8, 10, 12], 0.25, False),
        ([1, 10, 10, 10, 100], 0.10, False),  # outliers outside the quartiles
        ([5, 10, 20], 0.5, True),  # IQR 7.5 / 10
    ],
)
def test_noisy_flag(samples, threshold, noisy):
    m = Measurement([float(s) for s in samples], noise_threshold=threshold)
    assert m.noisy is noisy
    assert ("NOISY" in repr(m)) is noisy


def test_empty_samples_give_nan():
    m = Measurement([])
    s = m.summary()
    for value in (m.median_ms, m.iqr_ms, s["min_ms"], s["mean_ms"], m.p99_ms, m.img_per_s):
        assert math.isnan(value)
    assert m.n == 0 and m.noisy is False


def test_summary():
    m = Measurement([1.0, 2.0, 3.0], batch=2, warmup_calls=7, l2_flush=True)
    s = m.summary()
    assert set(s) == {
        "median_ms",
        "iqr_ms",
        "min_ms",
        "mean_ms",
        "p99_ms",
        "img_per_s",
        "n_samples",
        "warmup_calls",
        "noisy",
        "l2_flush",
        "samples_ms",
        "host_cpu_ms",
        "warmup_settled",
    }
    assert s["warmup_settled"] is None  # a fixed warm-up ran
    assert s["samples_ms"] == [1.0, 2.0, 3.0] and s["samples_ms"] is not m.samples_ms
    assert (s["median_ms"], s["n_samples"], s["warmup_calls"], s["l2_flush"]) == (2.0, 3, 7, True)
    assert s["img_per_s"] == pytest.approx(1000.0)


# --- CpuTimer and measure_engine ------------------------------------------------------------


def test_cpu_timer_returns_clock_differences_in_ms():
    events = []
    ticks = iter([1_000_000, 3_500_000, 10_000_000, 10_250_000, 20_000_000, 20_000_001])

    def clock():
        events.append("clock")
        return next(ticks)

    timer = CpuTimer(clock_ns=clock)
    out = timer.time_calls(lambda: events.append("fn"), 3, before=lambda: events.append("before"))
    assert out == pytest.approx([2.5, 0.25, 1e-6])
    assert events == ["before", "clock", "fn", "clock"] * 3


def test_measure_engine_times_the_engine_on_its_input():
    class FakeEngine:
        def __init__(self):
            self._input = None
            self.config = type("C", (), {"batch": 3, "device": "cpu"})()
            self.description = "fake engine"
            self.seen = []

        def make_input(self, seed=0):
            return ("input", seed)

        def __call__(self, x):
            self.seen.append(x)

    eng = FakeEngine()
    m = measure_engine(
        eng, timer=FakeTimer([2.0]), budget_ms=10, warmup_ms=0, with_provenance=False
    )
    assert (m.batch, m.label, m.n) == (3, "fake engine", 5)
    assert set(eng.seen) == {("input", 0)} and len(eng.seen) == 3 + 1 + 5


def test_provenance_fingerprints_the_source_and_names_the_host_cpu(tmp_path, monkeypatch):
    from yolo_sm.core import provenance

    d = provenance.source_digest()
    assert len(d) == 12 and int(d, 16) >= 0
    assert provenance.collect("cpu")["yolo_sm_source"] == d
    # the digest follows the source: a changed package gives another one
    pkg = tmp_path / "yolo_sm"
    pkg.mkdir()
    (pkg / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(provenance, "__file__", str(pkg / "provenance.py"))
    provenance.source_digest.cache_clear()  # computed once per process
    one = provenance.source_digest()
    (pkg / "a.py").write_text("x = 2\n")
    provenance.source_digest.cache_clear()
    assert provenance.source_digest() != one
    provenance.source_digest.cache_clear()  # the real package's again for later tests
    model = provenance.cpu_model()
    assert model is None or (isinstance(model, str) and model)


# --- what the host decided ------------------------------------------------------------------


def test_cpu_time_per_call_is_the_timers_thread_time_over_the_timed_calls():
    class CountingTimer(FakeTimer):
        def time_calls(self, fn, n, before=None):
            out = super().time_calls(fn, n, before)
            self.cpu_ns = 3_000_000 * n  # 3 ms of CPU per call
            return out

    fn, timer = Counter(), CountingTimer([2.0])
    m = measure(fn, timer=timer, budget_ms=20, warmup_ms=0, with_provenance=False)
    assert (
        m.cpu_ms_per_call == pytest.approx(3.0) and m.summary()["host_cpu_ms"] == m.cpu_ms_per_call
    )
    m = measure(Counter(), timer=FakeTimer([2.0]), budget_ms=20, with_provenance=False)
    assert math.isnan(m.cpu_ms_per_call)  # a timer that keeps none: unknown


def test_cpu_timer_keeps_thread_time():
    timer = CpuTimer()
    timer.time_calls(lambda: sum(range(20_000)), 5)
    assert timer.cpu_ns is not None and timer.cpu_ns > 0


def test_count_events_counts_launches_and_sums_gpu_time():
    ev = [
        ("aten::conv2d", "DeviceType.CPU", 50_000, False),
        ("cudaLaunchKernel", "DeviceType.CPU", 4_000, False),
        ("cudaLaunchKernel", "DeviceType.CPU", 4_000, False),
        ("cudaGraphLaunch", "DeviceType.CPU", 9_000, False),
        ("cudaMemcpyAsync", "DeviceType.CPU", 2_000, False),
        ("sm90_xmma_fprop", "DeviceType.CUDA", 10_000, False),
        ("Memcpy HtoD", "DeviceType.CUDA", 2_000, False),
        ("profiled_forward", "DeviceType.CUDA", 900_000, True),  # an annotation: not work
    ]
    got = timing.count_events(ev, calls=2)
    assert got == {"launches_per_forward": 2.0, "kernels_per_forward": 1.0, "gpu_busy_ms": 0.006}


def test_host_profile_on_a_cpu_has_no_device():
    got = timing.host_profile(lambda: None, device="cpu")
    assert got["launches_per_forward"] == 0 and math.isnan(got["gpu_busy_ms"])


def test_launch_cost_on_a_cpu_is_unknown():
    assert math.isnan(timing.launch_cost_us("cpu"))


# --- interleaved rounds (measure_rounds) with a fake GPU whose clock drifts --------------------


class DriftingGpu(Timer):
    """A fake GPU for several callables: a call of ``work[name]`` (ms at 2,000 MHz) takes
    ``work * 2000 / clock`` ms, the clock stepping down from 2,000 to 1,500 MHz after
    ``drop_at`` calls in all (a power-limited part heating up). Records each time_calls' callable
    name and count; ``fail`` (name, call) makes that callable raise from that call on."""

    def __init__(self, work, drop_at=1000, fail=None):
        self.work, self.drop_at, self.fail = work, drop_at, fail
        self.calls, self.total, self.cpu_ns = [], 0, 0

    def clock(self):
        return 2000.0 if self.total < self.drop_at else 1500.0

    def time_calls(self, fn, n, before=None):
        name = fn()
        if self.fail and name == self.fail[0] and self.total >= self.fail[1]:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        self.calls.append((name, n))
        out = []
        for _ in range(n):
            out.append(self.work[name] * 2000.0 / self.clock())
            self.total += 1
        self.cpu_ns = 1000 * n
        return out


def rounds_run(gpu, rounds=4, **kw):
    fns = {name: (lambda name=name: name) for name in gpu.work}
    return timing.measure_rounds(
        fns, batch=2, budget_ms=400, warmup_ms=10, rounds=rounds, timer=gpu,
        clock_mhz=gpu.clock, with_provenance=False, settle=False, **kw,
    )  # fmt: skip


def test_rounds_warm_every_engine_first_then_time_them_in_turn():
    gpu = DriftingGpu({"a": 1.0, "b": 2.0}, drop_at=10**9)
    got = rounds_run(gpu, rounds=3)
    names = [n for n, _ in gpu.calls]
    # the estimate and warm-up of a, then of b, then a, b, a, b, a, b
    assert names == ["a", "a", "b", "b"] + ["a", "b"] * 3
    # each round times budget / rounds worth of calls: 400 / 3 ms at 1 ms and at 2 ms
    assert [n for _, n in gpu.calls[4:6]] == [134, 67]
    a, b = got["a"], got["b"]
    assert a.round_ms == [1.0] * 3 and b.round_ms == [2.0] * 3
    assert a.round_clock_mhz == [2000.0] * 3
    assert a.n == 3 * 134 and a.warmup_calls == 3 + 10
    s = b.summary()
    assert (s["rounds"], s["median_ms"], s["round_spread_pct"], s["sm_clock_mhz"]) == (
        3, 2.0, 0.0, 2000.0,
    )  # fmt: skip
    assert s["img_per_s"] == pytest.approx(2 * 1000 / 2.0)
    assert s["host_cpu_ms"] == pytest.approx(1000 / 1e6)  # 1 us of CPU per call


def test_a_clock_that_drops_mid_run_moves_both_sides_of_a_ratio_alike():
    """Timed one after the other, b runs after the clock dropped and reads 1.33x slower than it
    is; interleaved, each round sees both at the same clock: the ratio stays 2, and the spread
    over rounds and the per-round clocks say that the clock moved."""
    # 21 warm-up calls, then rounds of 100 + 50 calls: the clock drops after round 2
    one_by_one = DriftingGpu({"a": 1.0, "b": 2.0}, drop_at=321)
    kw = dict(budget_ms=400, warmup_ms=10, with_provenance=False, settle=False)
    fa = timing.measure(lambda: "a", timer=one_by_one, clock_mhz=one_by_one.clock, **kw)
    fb = timing.measure(lambda: "b", timer=one_by_one, clock_mhz=one_by_one.clock, **kw)
    assert fb.median_ms / fa.median_ms == pytest.approx(2 * 2000 / 1500)
    gpu = DriftingGpu({"a": 1.0, "b": 2.0}, drop_at=321)
    got = rounds_run(gpu, rounds=4)
    a, b = got["a"], got["b"]
    assert [x / y for x, y in zip(b.round_ms, a.round_ms, strict=True)] == pytest.approx([2.0] * 4)
    assert b.median_ms / a.median_ms == pytest.approx(2.0)
    assert a.round_clock_mhz[0] == 2000.0 and a.round_clock_mhz[-1] == 1500.0
    assert a.summary()["round_spread_pct"] > 20
    assert a.summary()["sm_clock_mhz"] == statistics.median(a.round_clock_mhz)


def test_a_callable_that_fails_is_its_exception_and_the_others_go_on():
    gpu = DriftingGpu({"a": 1.0, "b": 2.0, "c": 1.0}, drop_at=10**9, fail=("b", 200))
    got = rounds_run(gpu, rounds=3)
    assert isinstance(got["b"], RuntimeError)
    assert len(got["a"].round_ms) == len(got["c"].round_ms) == 3
    # a CPU reads no clock: the rounds keep None, the summary NaN
    fns = {"a": lambda: "a"}
    cpu = timing.measure_rounds(fns, budget_ms=10, warmup_ms=1, rounds=2, with_provenance=False,
                                timer=DriftingGpu({"a": 1.0}), clock_mhz=lambda: None)  # fmt: skip
    assert cpu["a"].round_clock_mhz == [None, None]
    assert math.isnan(cpu["a"].summary()["sm_clock_mhz"])
