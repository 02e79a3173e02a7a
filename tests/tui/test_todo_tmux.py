"""The todo list in the real `bastion` app (tmux, loopback server): it appears pinned
above the prompt when the model first writes it, follows each update while the run
goes on, and is put away once every item is done and the run has ended."""

from __future__ import annotations

import json

from runtime.testing.process import LoopbackThread
from tests.tui.test_tmux import bastion_bin, environment, tmux  # noqa: F401
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux

PLAN = ["Read the parser", "Add the --json flag", "Write the test"]


def todo(call_id: str, statuses: list[str], text: str) -> dict:
    items = [{"content": c, "status": s} for c, s in zip(PLAN, statuses, strict=True)]
    return {"text": text, "tool_calls": [{"id": call_id, "name": "todo",
                                          "arguments": json.dumps({"todos": items})}]}  # fmt: skip


TURNS = [
    todo("t1", ["done", "in_progress", "pending"], "Planning first."),
    {
        **todo("t2", ["done", "done", "done"], "Working on the flag now."),
        "chunk_size": 4,
        "pauses": {"2": 2500},
    },
    {"text": "Everything is finished.", "chunk_size": 4, "pauses": {"2": 2500}},
]


def pinned(screen: str) -> list[str]:
    """The todo list's lines as drawn: its header and the item lines right under it."""
    lines = [line.strip() for line in screen.splitlines()]
    at = next((i for i, line in enumerate(lines) if line.startswith("plan · ")), None)
    if at is None:
        return []
    out = [lines[at]]
    for line in lines[at + 1 :]:
        if not line or line[0] not in "✓▸○":
            break
        out.append(line)
    return out


def test_the_todo_list_follows_the_model_and_goes_when_done(tmp_path, tmux):  # noqa: F811
    with LoopbackThread.start(TURNS, tmp_path / "server") as server:
        cwd = tmp_path / "work"
        cwd.mkdir()
        tmux.start([bastion_bin(), "--model", "openai/test"], environment(tmp_path, server), cwd)
        tmux.wait_for(lambda s: "type a request" in s, "the app to start")
        tmux.send("add a json flag", literal=True)
        tmux.send("Enter")

        screen = tmux.wait_for(lambda s: "plan · 1/3 done" in s, "the first plan")
        assert pinned(screen) == [
            "plan · 1/3 done", "✓ Read the parser", "▸ Add the --json flag", "○ Write the test",
        ]  # fmt: skip
        assert "Planning first." in screen

        screen = tmux.wait_for(lambda s: "plan · 3/3 done" in s, "the updated plan")
        assert pinned(screen) == [
            "plan · 3/3 done", "✓ Read the parser", "✓ Add the --json flag", "✓ Write the test",
        ]  # fmt: skip
        assert "1/3 done" not in "\n".join(pinned(screen))

        screen = tmux.wait_for(
            lambda s: "Everything is finished." in s and "plan · " not in s,
            "the answer, with the finished plan put away",
        )
        assert "todo 3/3 done" in screen  # the call's row in the transcript stays
