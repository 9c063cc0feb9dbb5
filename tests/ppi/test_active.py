"""Uncertainty-first draws (issue 43 item 3): draw probabilities and the IPW estimate (benchmarks/active_design.py: measured, not used by the product)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from benchmarks.active_design import ActiveError, draw_probabilities, draw_values, estimate

F = np.array([3.0, 4.0, 2.0, 5.0, 3.0, 4.0])  # predictions of six drafts
Y = np.array([4.0, 4.0, 1.0, 5.0, 2.0, 3.0])  # their human grades: theta = 19/6
U = np.array([1.0, 0.0, 2.0, 0.0, 1.0, 1.0])  # the error model's expected |residual|


class TestDrawProbabilities:
    def test_worked_by_hand(self) -> None:
        q = draw_probabilities(U, uniform_share=0.3)
        # (1 - 0.3) u / 5 + 0.3 / 6: 0.14 + 0.05 = 0.19 for u = 1, 0.05 for u = 0, 0.33 for u = 2
        assert q == pytest.approx([0.19, 0.05, 0.33, 0.05, 0.19, 0.19])

    def test_they_sum_to_one_and_keep_the_uniform_share(self) -> None:
        rng = np.random.default_rng(1)
        for share in (0.05, 0.3, 1.0):
            u = rng.exponential(1.0, 500) * (rng.random(500) < 0.5)
            q = draw_probabilities(u, uniform_share=share)
            assert q.sum() == pytest.approx(1.0, abs=1e-12)
            assert q.min() >= share / 500 - 1e-15 and q.max() <= 1.0 - share + share / 500 + 1e-15
        assert draw_probabilities(np.ones(4), uniform_share=0.3) == pytest.approx([0.25] * 4)
        assert draw_probabilities(np.zeros(4), uniform_share=0.3) == pytest.approx([0.25] * 4)  # no signal: uniform
        assert draw_probabilities(U, uniform_share=1.0) == pytest.approx([1 / 6] * 6)

    @pytest.mark.parametrize(
        ("u", "share", "field"),
        [([1.0, -1.0], 0.3, "uncertainty"), ([1.0, np.nan], 0.3, "uncertainty"), ([], 0.3, "uncertainty"), ([1.0], 0.0, "uniform_share"), ([1.0], 1.5, "uniform_share")],
    )
    def test_bad_input_names_the_field(self, u: list[float], share: float, field: str) -> None:
        with pytest.raises(ActiveError, match=field):
            draw_probabilities(u, uniform_share=share)


class TestIpwEstimate:
    def test_one_draw_worked_by_hand(self) -> None:
        q = draw_probabilities(U, uniform_share=0.3)
        # draft 2 drawn: mean(f) = 21/6 = 3.5; residual 1 - 2 = -1, centre 0: 3.5 + (-1)/(6 x 0.33) = 2.99495
        assert draw_values(F, [2], [1.0], [q[2]]) == pytest.approx([3.5 - 1 / (6 * 0.33)])

    def test_second_draw_is_centred_on_the_first_residual(self) -> None:
        q = draw_probabilities(U, uniform_share=0.3)
        z = draw_values(F, [2, 0], [1.0, 4.0], [q[2], q[0]])
        # draw 2: centre -1 (draw 1's residual); residual 4 - 3 = 1: 3.5 - 1 + (1 + 1)/(6 x 0.19) = 4.25439
        assert z[1] == pytest.approx(3.5 - 1 + 2 / (6 * 0.19))

    def test_each_draw_is_exactly_unbiased_whatever_came_before(self) -> None:
        theta = Y.mean()
        q = draw_probabilities(U, uniform_share=0.3)
        # E[Z_1] = sum_i q_i Z(i) and E[Z_2 | draw 1] = sum_j q_j Z_2(i, j): theta exactly, over all 6 first draws
        assert sum(q[i] * draw_values(F, [i], [Y[i]], [q[i]])[0] for i in range(6)) == pytest.approx(theta, abs=1e-12)
        for i in range(6):
            second = sum(q[j] * draw_values(F, [i, j], [Y[i], Y[j]], [q[i], q[j]])[1] for j in range(6))
            assert second == pytest.approx(theta, abs=1e-12)
        # and over all 216 paths of three draws, their mean Z is theta on average
        paths = itertools.product(range(6), repeat=3)
        total = sum(np.prod(q[list(p)]) * draw_values(F, list(p), Y[list(p)], q[list(p)]).mean() for p in paths)
        assert total == pytest.approx(theta, abs=1e-12)

    def test_unbiased_in_a_small_simulation_with_a_signal_that_carries_nothing(self) -> None:
        rng = np.random.default_rng(5)
        n = 200
        f = np.clip(np.rint(rng.normal(3.6, 1, n)), 1, 5)
        y = np.clip(f + rng.choice([-1.0, 0.0, 0.0, 1.0], n), 1, 5)
        u = rng.exponential(1.0, n)  # unrelated to the residual
        q = draw_probabilities(u, uniform_share=0.3)
        estimates, covered = [], 0
        for _ in range(2000):
            idx = rng.choice(n, size=40, p=q)
            e = estimate(f, idx, y[idx], q[idx])
            estimates.append(e.estimate)
            covered += abs(e.estimate - y.mean()) <= 1.96 * e.se
            assert e.draws == 40 and e.grades == np.unique(idx).shape[0]
        spread = np.std(estimates) / np.sqrt(2000)
        assert abs(np.mean(estimates) - y.mean()) < 3 * spread
        assert 0.92 <= covered / 2000 <= 0.97  # one look's normal interval on the IPW values

    def test_bad_draws_name_the_field(self) -> None:
        with pytest.raises(ActiveError, match="probability"):
            draw_values(F, [0], [4.0], [0.0])
        with pytest.raises(ActiveError, match="drawn"):
            draw_values(F, [6], [4.0], [0.2])
        with pytest.raises(ActiveError, match="drawn"):
            draw_values(F, [0, 1], [4.0], [0.2, 0.2])
