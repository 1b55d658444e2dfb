"""The claims table: every claim present once, verdicts from the allowed set, numbers computed."""

from yolo_sm import claims


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


def test_no_decided_claim_rests_on_provisional_data():
    df = claims.check_all()
    assert not df.provisional.any()
    assert (df.verdict == claims.PENDING).sum() == 3  # 10, 12, 13 wait for the fast-engines issue


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

    from yolo_sm import data

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
    data.register(tmp_path / "h200", "ceilings", "ceilings.parquet", "ceilings", "test", "test")
    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path))
    c12 = claims.claim_12()
    assert c12.verdict == claims.HOLDS and c12.number.startswith("0.090 ms")
    assert claims.peak_fp16_tflops() == (700.0, claims.peak_fp16_tflops()[1])
    assert "measured" in claims.peak_fp16_tflops()[1]
    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path / "none"))
    assert claims.claim_12().verdict == claims.PENDING
    assert claims.peak_fp16_tflops()[0] == claims.PEAK_FP16_TFLOPS
