"""The claims table: every claim present once, verdicts from the allowed set, numbers computed."""

import pytest

from yolo_sm.contract import datasets, hardware, manifest
from yolo_sm.contract.errors import UserError
from yolo_sm.report import claims


def test_every_claim_has_one_verdict():
    df = claims.check_all()
    assert list(df.claim) == list(range(1, 17))
    allowed = {claims.HOLDS, claims.FAILS, claims.PARTLY, claims.NOT_TESTABLE, claims.PENDING}
    assert set(df.verdict) <= allowed
    decided = df[df.verdict.isin([claims.HOLDS, claims.FAILS, claims.PARTLY])]
    assert (decided.number.str.len() > 0).all() and (decided.evidence.str.len() > 0).all()
    assert (df[df.verdict == claims.PENDING].evidence.str.contains("needs")).all()


def test_claims_from_shipped_data():
    assert claims.claim_1().verdict == claims.HOLDS and claims.claim_1().number == "+56.0%"
    c6 = claims.claim_6()
    assert c6.verdict == claims.FAILS and not c6.provisional and "tensor pipes" in c6.number
    assert claims.claim_16().verdict == claims.HOLDS


def test_claim_6_carries_the_yolo_evidence(monkeypatch):
    from yolo_sm.analyse.roofline import yolo_occupancy_vs_throughput

    c6 = claims.claim_6()
    if "h200/ncu_throughput_w1" not in set(datasets.list_datasets().name):
        pytest.skip("h200/ncu_throughput_w1 not shipped")
    split = yolo_occupancy_vs_throughput(datasets.load("h200/ncu_throughput_w1"))
    lo = split[split.occupancy == "< 60 %"].set_index("width")
    shares = f"{lo.time_share[1.0]:.0%} / {lo.time_share[2.0]:.0%} of kernel time"
    assert "YOLOv8 at width 1 / 2" in c6.number and shares in c6.number
    tp = f"{lo.tensor_pipe_tw_pct[1.0]:.0f} / {lo.tensor_pipe_tw_pct[2.0]:.0f} % tensor pipe"
    assert tp in c6.number
    assert "h200/ncu_throughput_w1" in c6.evidence
    # without the YOLO set: the wide-stack verdict and text, unchanged
    load = hardware.load_or_none
    monkeypatch.setattr(
        claims,
        "load_or_none",
        lambda name: None if name == "h200/ncu_throughput_w1" else load(name),
    )
    bare = claims.claim_6()
    assert bare.verdict == c6.verdict == claims.FAILS
    assert "YOLOv8" not in bare.number and c6.number.startswith(bare.number + "; ")
    assert "ncu_throughput_w1" not in bare.evidence


def test_no_decided_claim_rests_on_provisional_data():
    df = claims.check_all()
    assert not df.provisional.any()
    # only 10, 12 and 13 may wait: for h200/bench_fast_engines (and its 8-bit rows), h200/ceilings
    assert set(df[df.verdict == claims.PENDING].claim) <= {10, 12, 13}
    shipped = set(datasets.list_datasets().name)
    for n, name in ((12, "h200/ceilings"), (13, "h200/bench_fast_engines")):
        assert (df.set_index("claim").verdict[n] == claims.PENDING) == (name not in shipped)


def test_check_selects_claims():
    assert claims.check(13, 10).claim.tolist() == [10, 13]
    with pytest.raises(UserError, match="no claim 17"):
        claims.check(17)


@pytest.fixture
def bench(tmp_path, monkeypatch):
    """The synthetic bench fixture shipped as h200/bench_fast_engines in a data folder of its
    own; call it with a modified table to ship that instead."""
    from tests.fixtures.synthetic_bench import make_bench, ship

    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path))

    def shipped(df=None):
        ship(tmp_path, make_bench() if df is None else df)
        return df

    return shipped


def test_claims_10_and_13_from_the_bench(bench):
    from tests.fixtures.synthetic_bench import make_bench

    assert claims.claim_10().verdict == claims.PENDING  # nothing shipped yet
    assert "bench_fast_engines" in claims.claim_13().evidence
    bench()
    c10, c13 = claims.claim_10(), claims.claim_13()
    assert c10.verdict == claims.HOLDS and "median 1.61x" in c10.number
    assert c13.verdict == claims.HOLDS and "-72%" in c13.number
    # fp8 only 1.2x the fp16 CUDA graph: partly; no faster: fails
    df = make_bench()
    fp8 = df.variant == "cudagraph/fp8/nhwc"
    for factor, verdict in ((1.2, claims.PARTLY), (0.95, claims.FAILS)):
        d = df.copy()
        ref = d[d.variant == "cudagraph/fp16/nhwc"].set_index(["width", "batch"]).img_per_s
        d.loc[fp8, "img_per_s"] = (
            factor * ref.reindex(d[fp8].set_index(["width", "batch"]).index).to_numpy()
        )
        bench(d)
        assert claims.claim_10().verdict == verdict, factor
    # the fp8 engine did not run: claim 10 waits for 8-bit rows
    d = df.copy()
    d.loc[fp8, ["status", "message", "img_per_s"]] = ["error", "NotAvailableError: no", None]
    bench(d)
    c10 = claims.claim_10()
    assert c10.verdict == claims.PENDING and "fp8 or int8" in c10.evidence
    # 3 streams jitter 50 % less than 1 stream: partly (the claim says 60 %); more: fails
    for cut, verdict in ((0.5, claims.PARTLY), (-0.1, claims.FAILS)):
        d = df.copy()
        s1 = d[d.variant.str.endswith("/s1")].set_index(["width", "batch"])
        s3 = d.variant.str.endswith("/s3")
        jit = (s1.p99_ms - s1.median_ms).reindex(d[s3].set_index(["width", "batch"]).index)
        d.loc[s3, "p99_ms"] = d.loc[s3, "median_ms"] + (1 - cut) * jit.to_numpy()
        bench(d)
        assert claims.claim_13().verdict == verdict, cut
    # no multi-stream rows: claim 13 waits for them
    bench(df[~df.variant.str.endswith("/s3")])
    assert claims.claim_13().verdict == claims.PENDING


def test_occupancy_claims_fail_for_the_mechanism_on_the_h200():
    """Width does not lower occupancy on the H200 (claims 2 and 3), batch 4 is not best (5)."""
    for f in (claims.claim_2, claims.claim_3, claims.claim_5):
        assert f().verdict == claims.FAILS, f.__name__
    assert "best of batch 1-128: 128" in claims.claim_5().number


def test_memory_rule_uses_the_measured_slope():
    c8 = claims.claim_8()
    assert c8.verdict == claims.FAILS and "MB per 640x640 image" in c8.number


def test_ceilings_feed_claim_12_and_the_peak(tmp_path, monkeypatch):
    """With an (here synthetic) h200/ceilings table, claim 12 is decided and the fp16 peak is
    the measured one."""
    import pandas as pd

    rows = [
        ("matmul_fp16", 700.0, "TFLOP/s"),
        ("copy_h2d_pinned", 50.0, "GB/s"),
        ("copy_h2d_frame_fp16", 0.09, "ms"),
    ]
    df = pd.DataFrame(rows, columns=["ceiling", "value", "unit"]).assign(
        size="x", median_ms=1.0, iqr_ms=0.1, n_samples=7
    )
    (tmp_path / "h200").mkdir()
    df.to_parquet(tmp_path / "h200" / "ceilings.parquet")
    manifest.register(tmp_path / "h200", "ceilings", "ceilings.parquet", "ceilings", "test", "test")
    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path))
    c12 = claims.claim_12()
    assert c12.verdict == claims.HOLDS and c12.number.startswith("0.090 ms")
    assert hardware.peak_fp16_tflops() == (700.0, hardware.peak_fp16_tflops()[1])
    assert "measured" in hardware.peak_fp16_tflops()[1]
    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path / "none"))
    assert claims.claim_12().verdict == claims.PENDING
    assert hardware.peak_fp16_tflops()[0] == hardware.PEAK_FP16_TFLOPS
