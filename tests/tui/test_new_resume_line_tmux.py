"""Issue 27 item 11 in tmux: after `/new` with nothing sent, leaving still names the
earlier conversation to resume (`--plain`; the app does the same)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess

from runtime.testing.process import LoopbackThread
from tests.tui.test_tmux import bastion_bin, environment, pytestmark, tmux, wait_exit  # noqa: F401

ID = re.compile(r"resume with: bastion -r ([0-9a-f-]{36})")


def test_plain_names_the_earlier_conversation_after_an_unused_new(tmp_path, tmux):  # noqa: F811
    cwd = tmp_path / "work"
    cwd.mkdir()
    with LoopbackThread.start([{"text": "Hello there."}], tmp_path / "server") as server:
        line = (
            f"{shlex.quote(bastion_bin())} --plain --model openai/test; code=$?; read _; exit $code"
        )
        exit_file = tmux.start(["sh", "-c", line], environment(tmp_path, server), cwd)
        tmux.wait_for(lambda s: "›" in s, "the plain prompt")
        tmux.send("say hello", literal=True)
        tmux.send("Enter")
        tmux.wait_for(lambda s: "Hello there." in s, "the answer")
        tmux.send("/new", literal=True)
        tmux.send("Enter")
        tmux.wait_for(lambda s: "a new conversation" in s, "the new conversation")
        tmux.send("C-d")
        screen = tmux.wait_for(lambda s: "resume with: bastion -r" in s, "the resume line")
        tmux.send("Enter")
        assert wait_exit(exit_file) == 0
    (named,) = ID.findall(screen)
    out = subprocess.run(
        [bastion_bin(), "sessions", "--json", "--all"],
        env=environment(tmp_path, server), capture_output=True, text=True, cwd=cwd,
    )  # fmt: skip
    ids = [s["id"] for s in json.loads(out.stdout)]
    assert ids == [named]  # the one stored conversation: the one that had the prompt
