"""The PUCT rule as a pure function, on hand-made arrays with values worked out by hand (as mctx's
tests do), independent of any tree."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dlzero.search.select import (
    PuctParams,
    exploration_constant,
    first_play_urgency,
    puct_scores,
    puct_select,
)

# c_base = N + 1 makes the log term ln((N + N + 1 + 1) / (N + 1)) = ln 2 for N = 3
PARAMS = PuctParams(c_init=1.0, c_base=4.0, fpu_reduction=0.2)


def _node():
    prior = np.array([0.6, 0.3, 0.1], np.float32)
    n = np.array([2.0, 1.0, 0.0])
    w = np.array([1.0, 0.9, 0.0])
    return prior, n, w, 3.0, 1.5, 0.9  # N = 3, parent Q = 0.5, visited priors 0.6 + 0.3


def test_scores_worked_by_hand():
    prior, n, w, visits, value_sum, visited_prior = _node()
    c = 1.0 + math.log(2.0)
    assert exploration_constant(visits, PARAMS) == pytest.approx(c)
    fpu = 0.5 - 0.2 * math.sqrt(0.9)  # 0.31026
    assert first_play_urgency(visits, value_sum, visited_prior, PARAMS) == pytest.approx(fpu)
    u = c * math.sqrt(3.0)            # 2.93262
    expected = [1.0 / 2 + u * 0.6 / 3, 0.9 / 1 + u * 0.3 / 2, fpu + u * 0.1 / 1]  # 1.0865, 1.3399, 0.6035
    scores = puct_scores(prior, n, w, visits, value_sum, visited_prior, PARAMS)
    np.testing.assert_allclose(scores, expected, rtol=1e-6)
    assert puct_select(prior, n, w, visits, value_sum, visited_prior, PARAMS) == 1


def test_inputs_are_not_written():
    prior, n, w, *rest = _node()
    copies = [a.copy() for a in (prior, n, w)]
    puct_select(prior, n, w, *rest, PARAMS)
    for a, b in zip((prior, n, w), copies, strict=True):
        np.testing.assert_array_equal(a, b)


def test_unvisited_node_follows_the_priors():
    """N = 0: sqrt(N) counts as 1 and every Q is the FPU of an unvisited parent (0.5)."""
    prior = np.array([0.1, 0.7, 0.2], np.float32)
    zeros = np.zeros(3)
    assert puct_select(prior, zeros, zeros.copy(), 0.0, 0.0, 0.0, PARAMS) == 1
    c = 1.0 + math.log(5.0 / 4.0)
    np.testing.assert_allclose(puct_scores(prior, zeros, zeros.copy(), 0.0, 0.0, 0.0, PARAMS), 0.5 + c * prior,
                               rtol=1e-6)


def test_fpu_reduction_decides_between_tried_and_untried_moves():
    """A visited move with Q = 0.4 against an untried one of equal prior: with no reduction the
    untried move's FPU is the parent's Q (0.6) and it wins; a reduction of 1 pushes it to 0."""
    prior = np.array([0.5, 0.5], np.float32)
    n, w = np.array([1.0, 0.0]), np.array([0.4, 0.0])
    no_reduction = PuctParams(1.0, 1e9, 0.0)
    full_reduction = PuctParams(1.0, 1e9, 1.0)
    # N = 1, parent value 0.6: untried = 0.6 + c*0.5, tried = 0.4 + c*0.5/2
    assert puct_select(prior, n, w, 1.0, 0.6, 0.5, no_reduction) == 1
    assert first_play_urgency(1.0, 0.6, 0.5, full_reduction) == 0.0  # max(0, 0.6 - 0.707)
    assert puct_select(prior, n, w, 1.0, 0.6, 0.5, full_reduction) == 0


def test_ties_go_to_the_lowest_index():
    prior = np.full(4, 0.25, np.float32)
    zeros = np.zeros(4)
    assert puct_select(prior, zeros, zeros.copy(), 0.0, 0.0, 0.0, PARAMS) == 0


def test_exploration_grows_with_visits():
    """c(N) rises with N and sqrt(N)/(1+n) keeps a rarely tried move alive: after enough parent
    visits the second move (Q 0.3, prior 0.5, 1 visit) overtakes the first (Q 0.5, 100 visits)."""
    prior = np.array([0.5, 0.5], np.float32)
    n, w = np.array([100.0, 1.0]), np.array([50.0, 0.3])
    p = PuctParams(1.0, 100.0, 0.0)
    assert exploration_constant(1e4, p) > exploration_constant(101, p)
    assert puct_select(prior, n, w, 101.0, 50.3, 1.0, p) == 1
    # 0.5 + c*sqrt(101)*0.5/101 vs 0.3 + c*sqrt(101)*0.5/2, c = 1 + ln(202/100): 0.596 vs 1.691
    scores = puct_scores(prior, n, w, 101.0, 50.3, 1.0, p)
    c = 1.0 + math.log(202.0 / 100.0)
    np.testing.assert_allclose(scores, [0.5 + c * math.sqrt(101) * 0.5 / 101, 0.3 + c * math.sqrt(101) * 0.25],
                               rtol=1e-6)


def test_the_compiled_tree_is_built_where_a_c_compiler_is():
    """The C tree walk is optional at install time; on a machine with a compiler (CI's) it must have been built,
    or the search would quietly run at the speed of the numpy rule."""
    import shutil
    import sysconfig

    from dlzero.search import arena

    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) on this machine: the numpy rule is the only one")
    assert arena.COMPILED, "dlzero.search._puct was not built: reinstall (pip install -e .) and read the build log"
