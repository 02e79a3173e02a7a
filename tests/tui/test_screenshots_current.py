"""Issue 38: the README's screenshots are the accepted snapshots, byte for byte, so a
change to the screen that updates a snapshot cannot leave a stale picture behind
(`nox -s snapshots -- --snapshot-update` copies them)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def published() -> list[tuple[str, str, str]]:
    """(snapshot module, accepted snapshot, its name under screenshots/) for each."""
    from tests.tui import test_snapshots as main
    from tests.tui import test_snapshots_approval as approval
    from tests.tui.test_theme_snapshots import THEME_SCREENSHOTS

    found = []
    for module, names in (
        ("test_snapshots", main.SCREENSHOTS),
        ("test_theme_snapshots", THEME_SCREENSHOTS),
        ("test_picker_snapshots", main.PICKER_SCREENSHOTS),
        ("test_snapshots_app", main.APP_SCREENSHOTS),
        ("test_snapshots_approval", approval.SCREENSHOTS),
        ("test_trust_screen", main.TRUST_SCREENSHOTS),
    ):
        found += [(module, name, public) for name, public in names.items()]
    return found


@pytest.mark.parametrize(("module", "name", "public"), published())
def test_each_screenshot_is_its_accepted_snapshot(module, name, public):
    accepted = HERE / "__snapshots__" / module / name
    assert accepted.exists(), f"{module}/{name} is not an accepted snapshot"
    shown = ROOT / "screenshots" / public
    assert shown.read_bytes() == accepted.read_bytes(), (
        f"screenshots/{public} is stale: run `nox -s snapshots -- --snapshot-update` "
        f"(or `python -m tests.tui.test_snapshots`) to copy {module}/{name}"
    )


def test_every_screenshot_in_the_folder_is_published_from_a_snapshot():
    names = {public for _, _, public in published()}
    assert {p.name for p in (ROOT / "screenshots").glob("*.svg")} <= names
