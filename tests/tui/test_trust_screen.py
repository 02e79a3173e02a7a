"""The trust question (issue 23): what it says, and what each key answers."""

from __future__ import annotations

import pytest
import textual

from tests.tui.test_snapshots import SNAPSHOT_TEXTUAL
from tui.widgets.trust import TrustApp, TrustScreen

CHANGES = [
    "model = 'x/m'",
    "providers.x.base_url = 'http://127.0.0.1:9/v1'",
    "ignored even if trusted: approval_mode 'full-auto' (above yours, 'ask')",
    "ignored even if trusted: providers.x.api_key_env (keys and headers come from your own "
    "config only)",
    "runs without asking: `touch`…",
]


@pytest.mark.parametrize(
    ("key", "answer"), [("t", "trusted"), ("o", "once"), ("n", "untrusted"), ("escape", "later")]
)
async def test_each_key_answers(key: str, answer: str) -> None:
    app = TrustApp("/src/clone", CHANGES)
    async with app.run_test() as pilot:
        await pilot.pause()
        assert isinstance(app.screen, TrustScreen)
        assert "model = 'x/m'" in app.screen.text
        await pilot.press(key)
        await pilot.pause()
    assert app.return_value == answer


def test_the_trust_question(snap_compare) -> None:
    """The folder, each change its project files would make (and what would be ignored even
    if trusted), the warning, and the four keys on the last line."""
    if textual.__version__ != SNAPSHOT_TEXTUAL:
        pytest.skip(f"snapshots were made with textual {SNAPSHOT_TEXTUAL}")
    assert snap_compare(TrustApp("/src/clone", CHANGES), terminal_size=(100, 24))
