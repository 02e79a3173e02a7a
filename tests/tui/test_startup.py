"""What loads before the app's first frame: the transcript, prompt and status bar,
not the late parts (LATE_MODULES) nor the harness (they load after it; tui.launch)."""

from __future__ import annotations

import json
import subprocess
import sys

from tui.app import LATE_MODULES, VIEW_MODULES

FIRST_FRAME = """
import json, sys
import tui.cli, tui.launch, runtime.setup.load, tui.child, tui.theming
from tui.app import BastionApp
print(json.dumps(sorted(sys.modules)))
"""


def loaded_before_first_frame() -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", FIRST_FRAME], capture_output=True, text=True, check=True
    )
    return set(json.loads(out.stdout))


def test_the_first_frame_loads_neither_the_late_parts_nor_the_harness() -> None:
    loaded = loaded_before_first_frame()
    late = sorted(set(LATE_MODULES) & loaded)
    assert not late, f"imported before the first frame: {late}"
    for heavy in (
        "runtime.harness",
        "runtime.store.database",
        "runtime.model.events",
        "runtime.model.records",
    ):
        assert heavy not in loaded, heavy
    for heavy in ("httpx", "aiosqlite", "watchfiles", "rich.markdown", "pygments"):
        assert heavy not in loaded, heavy


DECODE = """
import json, sys
from runtime.model import protocol as p  # (as the app has: it reads the replies)
p.decode_result(p.Snapshot(conversation="c"), json.loads(sys.stdin.buffer.read()))
loaded = [m for m, module in sys.modules.items() if module is not None]  # (None: a stub)
print(sorted(m for m in loaded if m in HEAVY or m.startswith(("aiosqlite", "httpx"))))
"""
#: The harness's own modules (its loop, store and providers: ~0.3 s to load), the
#: app's process never needs.
HEAVY = ("runtime.harness", "runtime.harness.core", "runtime.store.database", "runtime.run.loop")


def test_a_stored_sessions_opening_reaches_the_app_without_the_harness(tmp_path) -> None:
    """The first view the harness process sends (the reply to the app's `snapshot`)
    decodes in the app with the protocol, records and views alone: a class of the
    harness in it would load the harness there, on the path to the first frame."""
    import asyncio

    from runtime.model import protocol as p
    from runtime.model.views import OPENING_ENTRIES
    from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
    from tests.runtime.helpers import open_harness

    async def opening() -> bytes:
        harness = await open_harness(tmp_path, ScriptedProvider([ScriptedTurn(text="hi")]))
        try:
            conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
            await harness.drive(conv.id)
            await harness.wait((await harness.submit(conv.id, "hello")).id, conv.id, poll=0.01)
            op = p.Snapshot(conversation=conv.id, last=OPENING_ENTRIES)
            view = await harness.snapshot(conv.id, last=OPENING_ENTRIES)
            assert view.settled, "the view has entries"
            return json.dumps(p.encode_result(op, view)).encode()
        finally:
            await harness.close()

    data = asyncio.run(opening())
    code = f"HEAVY = {HEAVY!r}\n" + DECODE
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, check=True)
    assert out.stdout.decode().strip() == "[]"


def test_preload_loads_what_a_view_draws_and_not_the_parts_mounted_after() -> None:
    """A stored session's first frame shows its entries: `preload` loads what they need
    while the harness process finds it; the parts mounted after that frame load then."""
    code = (
        "import json, sys; from tui.app import preload; preload(); "
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert set(VIEW_MODULES) <= loaded
    assert not (set(LATE_MODULES) - set(VIEW_MODULES)) & loaded
    for heavy in HEAVY:
        assert heavy not in loaded, heavy


def test_checking_the_config_in_the_app_loads_no_provider_code(tmp_path) -> None:
    """The app's config watcher checks the model's provider on every reload (the first
    comes about a second after opening): a name lookup, not httpx and the providers
    (~50 ms on the UI thread, while the user may be typing)."""
    code = (
        "import asyncio, sys\n"
        "from runtime.setup.watch import ConfigWatcher\n"
        "asyncio.run(ConfigWatcher('.').reload())\n"
        "print(sorted(m for m in sys.modules if m == 'httpx' or m.startswith('runtime.providers.')))"
    )
    env = {"XDG_CONFIG_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=env,
    )
    assert out.stdout.strip() == "[]"


FRAME_RATE = """
import sys
import tui.cli, tui.launch, runtime.setup.load
assert not any(m.split(".")[0] == "textual" for m in sys.modules), "textual loaded first"
tui.launch.set_frame_rate()
from textual import constants
print(constants.MAX_FPS)
"""


def test_the_app_draws_at_up_to_fps_frames_a_second_unless_told_otherwise(tmp_path) -> None:
    """`bastion` raises Textual's frame rate cap to tui.launch.FPS before Textual loads
    (after a frame that overran, a key's echo waits up to two of its ticks); a
    TEXTUAL_FPS the user set is kept."""
    from tui.launch import FPS

    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for env, expected in ((base, FPS), ({**base, "TEXTUAL_FPS": "30"}, 30)):
        out = subprocess.run(
            [sys.executable, "-c", FRAME_RATE], capture_output=True, text=True, env=env
        )
        assert out.returncode == 0, out.stderr
        assert int(out.stdout) == expected
