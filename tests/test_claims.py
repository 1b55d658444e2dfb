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
