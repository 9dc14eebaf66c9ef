"""The verdicts' false-decision rates on planted nulls (``python -m bench calibration`` prints the
whole table): every test of the claims engine, at the two smallest counts of units the runs meet
(where few units make a test err most), a few hundred draws each; a false "holds" or "contradicted" above the nominal level plus
three Monte Carlo standard errors fails."""

import pytest

from bench.calibration import TESTS, bound, claim_tests, simulate

DRAWS = 300


@pytest.mark.parametrize("test", TESTS, ids=[t.name for t in TESTS])
def test_false_decisions_stay_at_the_nominal_rate(test):
    limit = bound(0.025, DRAWS)
    for n in test.counts[:2]:
        rates = simulate(test, n, draws=DRAWS, seed=11)
        assert rates["holds"] <= limit, f"{test.name} at {n}: false holds {rates['holds']:.1%}"
        if not test.absence:
            assert rates["contradicted"] <= limit, f"{test.name} at {n}: false contradicted {rates['contradicted']:.1%}"


@pytest.mark.parametrize("test", [t for t in TESTS if not t.absence], ids=lambda t: t.name)
def test_a_planted_effect_is_found_at_the_largest_count(test):
    """Power, so that a test that never decides cannot pass the test above: one unit sd of effect
    holds at the largest count of units the runs meet in at least a tenth of the draws (two groups of
    8 and 9 models, the second twice as spread: 19 % in the bench)."""
    assert simulate(test, test.counts[-1], draws=100, seed=12, effect=1.0)["holds"] >= 0.1


def test_every_testable_claim_has_a_calibrated_test():
    names = {t.name for t in TESTS}
    missing = [(claim, name) for claim, _, name in claim_tests() if name not in names]
    assert not missing, missing
