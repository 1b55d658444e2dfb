"""GPM sampler against a fake NVML module (same function names as pynvml), and one real capture."""

import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pandas as pd
import pytest

from yolo_sm.analyse.gpm import wide
from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.core.profiling import gpm
from yolo_sm.core.profiling.gpm import GpmSampler

# the short-window caveat is checked once, in test_short_window_warning
pytestmark = pytest.mark.filterwarnings("ignore:GPM at .* Hz")

HZ = 200
METRICS = ["sm_occupancy_pct", "sm_util_pct", "tensor_util_pct", "dram_bw_util_pct"]
VALUES = {3: 59.0, 2: 88.0, 5: 17.0, 10: 27.0}  # metric id -> percent
EXPECTED = dict(zip(METRICS, [59.0, 88.0, 17.0, 27.0], strict=True))


class NVMLError(Exception):
    pass


class NVMLError_NoPermission(NVMLError):  # noqa: N801 - pynvml's spelling
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801
    pass


class FakeNVML:
    """pynvml's names; checks that each window pairs consecutive, distinct samples."""

    NVML_SUCCESS = 0
    NVML_GPM_METRICS_GET_VERSION = 1
    NVML_GPM_METRIC_SM_UTIL = 2
    NVML_GPM_METRIC_SM_OCCUPANCY = 3
    NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
    NVML_GPM_METRIC_DRAM_BW_UTIL = 10
    NVMLError = NVMLError
    NVMLError_NoPermission = NVMLError_NoPermission
    NVMLError_NotSupported = NVMLError_NotSupported

    def __init__(self, gpm=1, fail=None, fail_after=0, stale_every=0):
        self.gpm, self.fail, self.fail_after = gpm, fail or {}, fail_after
        self.stale_every = stale_every  # every n-th window reads an unchanged snapshot (H200)
        self.inits = self.seq = self.metric_calls = 0
        self.allocated, self.freed, self.bad_pairs, self.stale_seqs = [], [], [], []

    def _check(self, name, count=0):
        if name in self.fail and count >= self.fail_after:
            raise self.fail[name]

    def nvmlInit(self):
        self._check("nvmlInit")
        self.inits += 1

    def nvmlShutdown(self):
        self.inits -= 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("gpu", index)

    def nvmlGpmQueryDeviceSupport(self, handle):
        self._check("nvmlGpmQueryDeviceSupport")
        return SimpleNamespace(version=1, isSupportedDevice=self.gpm)

    def nvmlGpmSampleAlloc(self):
        s = SimpleNamespace(seq=None)
        self.allocated.append(s)
        return s

    def nvmlGpmSampleFree(self, sample):
        self.freed.append(sample)

    def nvmlGpmSampleGet(self, handle, sample):
        self._check("nvmlGpmSampleGet")
        self.seq += 1
        sample.seq = self.seq
        return sample

    @staticmethod
    def c_nvmlGpmMetricsGet_t():
        m = [SimpleNamespace(metricId=0, value=0.0, nvmlReturn=0) for _ in range(8)]
        return SimpleNamespace(version=0, numMetrics=0, sample1=None, sample2=None, metrics=m)

    def nvmlGpmMetricsGet(self, q):
        self.metric_calls += 1
        self._check("nvmlGpmMetricsGet", self.metric_calls)
        if q.version != 1 or q.numMetrics != 4 or q.sample2.seq <= q.sample1.seq:
            self.bad_pairs.append((q.version, q.numMetrics, q.sample1.seq, q.sample2.seq))
        stale = self.stale_every and self.metric_calls % self.stale_every == 0
        for m in q.metrics[: q.numMetrics]:
            m.value = 0.0 if stale else VALUES[m.metricId]
            m.nvmlReturn = 1 if stale and m.metricId == 10 else 0  # DRAM: 0 / 0 elapsed
        if stale:
            self.stale_seqs.append(q.sample2.seq)
        return q

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=70, memory=30)


def wait_for(cond, timeout=2.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting for the sampler"
        time.sleep(0.002)


def windows(s, **labels):
    rows = list(s.rows)
    return {r["t_s"] for r in rows if all(r.get(k) == v for k, v in labels.items())}


def sampler_threads():
    return [t for t in threading.enumerate() if t.name == "GpmSampler"]


def test_gpm_rows_carry_the_markers_set_before_each_window():
    fake = FakeNVML()
    with GpmSampler(hz=HZ, nvml=fake) as s:
        s.mark(stage="backbone", config="w1.0 fp16 b16")
        wait_for(lambda: len(windows(s, stage="backbone")) >= 3)
        s.mark(stage="neck")
        wait_for(lambda: len(windows(s, stage="neck")) >= 3)
    df = s.to_frame()
    assert s.mode == "gpm" and not fake.bad_pairs and not sampler_threads()
    assert fake.inits == 0 and len(fake.allocated) == 2
    assert sorted(map(id, fake.freed)) == sorted(map(id, fake.allocated))
    assert list(df.columns[:6]) == [*gpm.REQUIRED_COLUMNS, "straddles_mark"]
    assert set(df.metric) == set(METRICS) and (df.source == "gpm").all()
    assert (df.value == df.metric.map(EXPECTED)).all()
    assert (df.groupby("t_s").size() == 4).all()

    w = wide(df).sort_values("t_s").reset_index(drop=True)
    assert len(w) == df.t_s.nunique() == len(s.sample_cost_s)
    assert (w.window_s > 0).all() and (w.t_s.diff().dropna() > 0).all()
    assert w[METRICS].eq(pd.Series(EXPECTED)).all().all()
    # once a window is labelled "neck", every later one is, and config is kept
    first_neck = w.index[w.stage == "neck"][0]
    assert (w.stage.iloc[first_neck:] == "neck").all()
    assert (w.stage.iloc[:first_neck].dropna() == "backbone").all()
    assert (w.config.iloc[first_neck:] == "w1.0 fp16 b16").all()
    assert w.straddles_mark.iloc[first_neck]  # mark() ran inside that window
    assert w.straddles_mark.sum() <= 2
    assert 0 < s.achieved_hz <= HZ * 1.2 and s.info()["mode"] == "gpm"


def test_thread_stops_and_samples_are_freed_after_an_exception_in_the_body():
    fake = FakeNVML()
    with pytest.raises(KeyError, match="boom"), GpmSampler(hz=HZ, nvml=fake) as s:
        wait_for(lambda: len(s.rows) >= 8)
        raise KeyError("boom")
    assert not sampler_threads() and s._thread is None
    n = len(s.rows)
    time.sleep(3 / HZ)
    assert len(s.rows) == n
    assert len(fake.freed) == 2 and fake.inits == 0


def test_nvml_failure_inside_the_thread_is_raised_on_exit_and_rows_kept():
    fake = FakeNVML(fail={"nvmlGpmMetricsGet": NVMLError("GPU is lost")}, fail_after=4)
    with pytest.raises(RuntimeError, match="stopped early.*GPU is lost"):
        with GpmSampler(hz=HZ, nvml=fake) as s:
            wait_for(lambda: s.error is not None)
    assert len(s.rows) == 3 * 4 and len(fake.freed) == 2 and fake.inits == 0


@pytest.mark.parametrize(
    "how", ["isSupportedDevice=0", "query NotSupported", "sample NotSupported"]
)
def test_fallback_to_utilization_rates_without_gpm(how):
    fake = {
        "isSupportedDevice=0": FakeNVML(gpm=0),
        "query NotSupported": FakeNVML(
            fail={"nvmlGpmQueryDeviceSupport": NVMLError_NotSupported()}
        ),
        "sample NotSupported": FakeNVML(fail={"nvmlGpmSampleGet": NVMLError_NotSupported()}),
    }[how]
    with pytest.warns(UserWarning, match="no NVML GPM") as rec:
        with GpmSampler(hz=HZ, nvml=fake) as s:
            s.mark(stage="head")
            wait_for(lambda: len(windows(s)) >= 3)
    assert len([w for w in rec if "no NVML GPM" in str(w.message)]) == 1
    df = s.to_frame()
    assert s.mode == "nvml_util" and (df.source == "nvml_util").all()
    assert df.groupby("metric").value.unique().map(list).to_dict() == {
        "gpu_util_pct": [70.0],
        "mem_util_pct": [30.0],
    }
    assert len(fake.freed) == len(fake.allocated) and fake.inits == 0 and not sampler_threads()


@pytest.mark.parametrize("where", ["nvmlGpmQueryDeviceSupport", "nvmlGpmSampleGet"])
def test_no_permission_is_not_available_with_the_administrator_fix(where):
    fake = FakeNVML(fail={where: NVMLError_NoPermission()})
    with pytest.raises(NotAvailableError, match="administrator must allow profiling counters"):
        with GpmSampler(nvml=fake):
            pass
    assert len(fake.freed) == len(fake.allocated) and fake.inits == 0 and not sampler_threads()


def test_nvml_init_failure_is_not_available():
    fake = FakeNVML(fail={"nvmlInit": NVMLError("Driver Not Loaded")})
    with pytest.raises(NotAvailableError, match="NVML could not start.*Driver Not Loaded"):
        GpmSampler(nvml=fake).__enter__()


def test_real_pynvml_without_a_driver_is_not_available():
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        with pytest.raises(NotAvailableError, match="NVML could not start"):
            GpmSampler().__enter__()
    else:
        pynvml.nvmlShutdown()
        pytest.skip("NVML works here: covered by test_real_capture_on_the_gpu")


def test_missing_pynvml_is_not_available(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    with pytest.raises(NotAvailableError, match="pip install nvidia-ml-py"):
        GpmSampler().__enter__()


def test_module_imports_without_pynvml():
    code = "import sys; sys.modules['pynvml'] = None; import yolo_sm.core.profiling.gpm"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_refuses_to_sample_under_nsight_compute(monkeypatch):
    inj = "/opt/nvidia/nsight-compute/2025.3/target/linux-x64/libTreeLauncherTargetInjection.so"
    monkeypatch.setenv("CUDA_INJECTION64_PATH", inj)
    fake = FakeNVML()
    with pytest.raises(UserError, match="Nsight Compute"):
        GpmSampler(nvml=fake).__enter__()
    assert fake.inits == 0


def test_polls_returning_the_same_snapshot_open_no_window():
    """On the H200 every other 20 Hz poll returns the previous snapshot (all 0, DRAM undefined):
    those polls emit no row, and the next window starts at the last distinct snapshot."""
    fake = FakeNVML(stale_every=2)
    with GpmSampler(hz=HZ, nvml=fake) as s:
        wait_for(lambda: s.stale_polls >= 4 and len(windows(s)) >= 4)
    w = wide(s.to_frame())
    assert w[METRICS].eq(pd.Series(EXPECTED)).all().all()  # no zero or NaN row
    assert not fake.bad_pairs and fake.stale_seqs
    info = s.info()
    assert info["stale_polls"] == s.stale_polls == len(fake.stale_seqs)
    assert info["polls"] == len(w) + s.stale_polls
    # a window that follows a stale poll spans both polls
    assert w.window_s.max() > 1.5 / HZ


def test_a_true_zero_reading_is_not_stale():
    assert gpm._stale([0.0, 0.0, 0.0, float("nan")])
    assert not gpm._stale([0.0, 0.0, 0.0, 0.0])  # idle GPU: every metric defined and 0
    assert not gpm._stale([10.0, 0.0, 0.0, float("nan")])


def test_wide_keeps_unlabelled_windows_and_separate_runs():
    rows = [
        (t, cfg, stage, m, v)
        for cfg, stages in (("a", [None, "backbone"]), ("b", ["neck", "neck"]))
        for t, stage in zip([0.05, 0.10], stages, strict=True)
        for m, v in EXPECTED.items()
    ]
    df = pd.DataFrame(rows, columns=["t_s", "config", "stage", "metric", "value"])
    df["window_s"], df["source"] = 0.05, "gpm"
    w = wide(df)
    assert len(w) == 4 and w.stage.isna().sum() == 1  # same t_s in runs a and b stay apart
    assert w.groupby("config").size().to_dict() == {"a": 2, "b": 2}
    assert w[METRICS].eq(pd.Series(EXPECTED)).all().all()


def test_bad_arguments():
    with pytest.raises(UserError, match="hz"):
        GpmSampler(hz=0)
    s = GpmSampler(nvml=FakeNVML())
    with pytest.raises(ValueError, match="reserved"):
        s.mark(metric="x")
    with pytest.raises(ValueError, match="must be a str"):
        s.mark(stage=["backbone"])
    with s:
        pass
    with pytest.raises(UserError, match="samples once"), s:
        pass


@pytest.mark.gpu
def test_real_capture_on_the_gpu():
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    with GpmSampler(hz=20) as s:  # polls faster than NVML's ~100 ms GPM refresh
        s.mark(stage="matmul")
        t_end = time.perf_counter() + 1.0
        while time.perf_counter() < t_end:
            for _ in range(20):
                a @ a
            torch.cuda.synchronize()
    if s.mode != "gpm":
        pytest.skip(f"no GPM on this GPU ({s.mode})")
    w = wide(s.to_frame())
    assert len(w) >= 5 and ((w[METRICS] >= 0) & (w[METRICS] <= 100)).all().all()  # no NaN
    assert w.sm_util_pct.median() > 50 and w.tensor_util_pct.median() > 5
    assert sorted(s.sample_cost_s)[len(s.sample_cost_s) // 2] < 0.02
    # stale polls folded: windows span a counter refresh (the first one starts wherever the
    # sampler's baseline snapshot fell in NVML's refresh period, so it may be shorter)
    assert (w.window_s.iloc[1:] > 0.08).all()


def test_shipped_h200_timeline_has_only_distinct_snapshot_windows():
    from yolo_sm.contract import datasets

    w = wide(datasets.load("h200/gpm_batch_w1")).sort_values("t_s")
    # after the first (its opening snapshot is as old as the sampler), windows span a refresh
    assert w.source.eq("gpm").all() and w.window_s.iloc[1:].between(0.08, 0.2).all()
    assert w.dram_bw_util_pct.notna().all()  # no stale (0 / NaN) windows
    run = w[(w.phase == "run") & ~w.straddles_mark]
    med = run.groupby("config").sm_util_pct.median()
    assert med["yolov8_w1_fp16_nhwc_b128"] > 80 > med["yolov8_w1_fp16_nhwc_b1"]
    assert ((w[METRICS] >= 0) & (w[METRICS] <= 100)).all().all()
