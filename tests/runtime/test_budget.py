"""A run's budget (runtime.run.budget): when each limit stops a run, how config files are
checked, and that a project file may only lower a limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.model.errors import ConfigError
from runtime.run.budget import Budget, check_budget_keys, stop_before_request
from runtime.setup.project import restrict_project


def test_no_budget_never_stops():
    assert not Budget()
    assert Budget().over(10_000, 1e9, 10**9) is None


def test_turns_stop_at_the_limit_not_before():
    budget = Budget(max_turns=3)
    assert budget.over(2, None, 100) is None
    assert budget.over(3, None, 100)["code"] == "max_turns"


def test_cost_stops_at_the_limit_and_when_it_cannot_be_known():
    budget = Budget(max_cost=0.5)
    assert budget.over(0, None, 0) is None  # nothing spent yet: the first request goes
    assert budget.over(1, 0.49, 100) is None
    assert budget.over(1, 0.5, 100)["code"] == "max_cost"
    unknown = budget.over(1, None, 100)
    assert unknown["code"] == "max_cost" and "unknown" in unknown["message"]


def test_flags_override_the_config():
    config = Budget(max_turns=5, max_cost=1.0)
    assert config.but(max_turns=9, max_cost=None) == Budget(9, 1.0, None)
    assert config.but(session_max_cost=3.0) == Budget(5, 1.0, None, 3.0)


@pytest.mark.parametrize(
    "data", [{"max_turns": 0}, {"max_turns": 1.5}, {"max_cost": "1"}, {"time_limit": -3},
             {"max_cost": float("nan")}, {"max_turns": True}]
)  # fmt: skip
def test_a_bad_value_in_a_config_file_names_the_key(data):
    with pytest.raises(ConfigError) as err:
        check_budget_keys(Path("/c.toml"), data)
    assert next(iter(data)) in err.value.message and "/c.toml" in err.value.message


def test_a_project_may_set_or_lower_a_limit_but_never_raise_one():
    user = {"max_turns": 10, "max_cost": 2.0}
    kept, ignored = restrict_project(
        {"max_turns": 20, "max_cost": 1.0, "time_limit": 60}, user, "ask"
    )
    assert kept == {"max_cost": 1.0, "time_limit": 60}
    assert ignored == ["max_turns 20 (above yours, 10: a project may only lower a limit)"]


def test_the_session_cap_stops_at_the_limit_and_when_it_cannot_be_known():
    budget = Budget(session_max_cost=2.0)
    assert budget.over_session(None, 0) is None  # nothing spent in the session yet
    assert budget.over_session(1.99, 100) is None
    stop = budget.over_session(2.0, 100)
    assert stop["code"] == "session_max_cost" and "$2.0000 of $2" in stop["message"]
    assert "session_max_cost" in stop["message"]  # says how to go on
    assert budget.over_session(None, 100)["code"] == "session_max_cost"
    assert Budget(max_cost=9.0).over_session(100.0, 100) is None  # no session cap set


def test_the_session_cap_comes_before_the_runs_own_limits():
    from runtime.model.records import Run

    run = Run(
        id="r1", conversation_id="c1", inbox_id="i1", state="running", created_at=0, updated_at=0
    )
    budget = Budget(max_turns=50, session_max_cost=1.0)
    stop = stop_before_request(budget, [], run, (None, 0), (1.5, 10_000))
    assert stop["code"] == "session_max_cost"
    assert stop_before_request(budget, [], run, (None, 0), (0.5, 10_000)) is None


def test_a_hostile_project_cannot_raise_the_session_cap():
    user = {"session_max_cost": 5.0}
    kept, ignored = restrict_project({"session_max_cost": 500.0}, user, "ask")
    assert kept == {}
    assert ignored == [
        "session_max_cost 500.0 (above yours, 5.0: a project may only lower a limit)"
    ]
    kept, _ = restrict_project({"session_max_cost": 1.0}, user, "ask")
    assert kept == {"session_max_cost": 1.0}
