"""The convergence figure's budget rule and plot, on hand-made curves (no learner trains here)."""

from experiments import conceptbed_convergence as cc


def _results(ccd, interval):
    return {
        "config": {"steps": [0, 30, 100], "task": "object"},
        "concepts": ["a", "b"],
        "ccd": ccd,
        "interval": interval,
    }


def test_the_budget_is_the_first_step_where_every_learner_left_step_0():
    moves_late = _results(
        {"A": [0.9, 0.5, 0.4], "B": [0.9, 0.85, 0.3]},
        {"A": [[0.8, 1.0], [0.4, 0.6], [0.3, 0.5]], "B": [[0.8, 1.0], [0.7, 0.95], [0.2, 0.4]]},
    )
    assert cc.moved_budget(moves_late) == 100


def test_a_learner_that_never_moves_gives_no_budget():
    never = _results(
        {"A": [0.9, 0.5, 0.4], "TI": [0.9, 0.9, 0.9]},
        {"A": [[0.8, 1.0], [0.4, 0.6], [0.3, 0.5]], "TI": [[0.8, 1.0], [0.8, 1.0], [0.8, 1.0]]},
    )
    assert cc.moved_budget(never) is None
    assert cc.moved_at(never) == {"A": 30, "TI": None}


def test_the_plot_is_written(tmp_path):
    r = _results({"A": [0.9, 0.5, 0.4]}, {"A": [[0.8, 1.0], [0.4, 0.6], [0.3, 0.5]]})
    path = cc.convergence_plot(r, tmp_path / "c.png")
    assert path.stat().st_size > 1000
