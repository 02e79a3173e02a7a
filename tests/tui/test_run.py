"""`tui.launch.run` (the app) and `tui.plain.run` as the command line calls them: bad input exits 2."""

from __future__ import annotations

import argparse

import pytest

from tui import launch, plain


def opts(**changes) -> argparse.Namespace:
    base = dict(
        prompt=None,
        model="openai/test",
        approval_mode=None,
        session_id=None,
        continue_=False,
        resume=None,
        plain=False,
    )
    return argparse.Namespace(**(base | changes))


@pytest.fixture(autouse=True)
def _a_terminal(monkeypatch):
    """These run the app's start in-process, as from a terminal (without one it says
    so and stops first: tests/tui/test_no_terminal.py)."""
    monkeypatch.setattr(launch, "terminal_here", lambda: True)


@pytest.mark.parametrize("front_end", [launch, plain])
def test_a_bad_session_id_is_a_usage_error(front_end, capsys):
    assert front_end.run(opts(session_id="not-a-uuid")) == 2
    assert "is not a session id" in capsys.readouterr().err


@pytest.mark.parametrize("front_end", [launch, plain])
def test_continue_without_a_conversation_is_a_usage_error(front_end, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert front_end.run(opts(continue_=True)) == 2
    assert "no conversation in this directory" in capsys.readouterr().err


@pytest.mark.parametrize("front_end", [launch, plain])
def test_an_unknown_provider_is_a_usage_error(front_end, capsys):
    assert front_end.run(opts(model="nosuch/model")) == 2
    assert capsys.readouterr().err.startswith("bastion: ")
