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
    assert c6.verdict == claims.FAILS and c6.provisional and "TFLOP/s" in c6.number
    c16 = claims.claim_16()
    assert c16.verdict == claims.HOLDS and "1.29x" in c16.number
