"""The app as `bastion` opens it, for the app's tests: a real harness process.

`bastion` starts its harness in a child (`tui.child.Child`, through
`runtime.ipc.spawn.start_pair`) and draws from it over the socket pair; the app
itself is built by `tui.launch.build_app`. `HarnessProcess` does exactly that,
with the test's environment set as a user's would be: `BASTION_HOME` and
`XDG_CONFIG_HOME` in `tmp_path`, the working directory a fresh folder, and the
model `openai/test` at a loopback server (`runtime.testing.server`, on its own
thread in this process) that speaks the real OpenAI chat-completions wire format
and records what it was sent.

    proc = harness_process(turns=[{"text": "Hi!"}])     # the fixture
    app = proc.app(first_prompt="say hi")                 # starts the harness process
    async with app.run_test(size=SIZE) as pilot:
        ...
    snap = await proc.snapshot()       # the store the child wrote, once the app closed
    assert proc.requests[0].body["messages"][-1]["content"] == "say hi"

No harness is shared between tests: each `app()` starts its own child, and the
fixture reaps every child it started (killed if it outlives its test).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from runtime.testing.server import LoopbackServer, RecordedRequest
from runtime.testing.turns import LoopbackTurn

MODEL = "openai/test"


def hanging(text: str) -> dict[str, Any]:
    """A turn that streams `text` (in one chunk) and then hangs until interrupted."""
    return {"text": text, "chunk_size": max(1, len(text)), "fault": {"hang_after_chunks": 1}}


def write_call(call_id: str, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call as a loopback turn writes it."""
    import json

    return {"id": call_id, "name": name, "arguments": json.dumps(dict(arguments))}


def wire_turn(turn: Any) -> LoopbackTurn | Mapping[str, Any]:
    """A turn for the loopback server: a dict or LoopbackTurn as it is, or a
    `ScriptedTurn` (what the in-process tests wrote) said in the wire's terms: its
    text, reasoning, tool calls, usage, finish reason, pieces and pace; an error
    after N chunks becomes an SSE error event after N chunks, with its message."""
    from runtime.testing.scripted import ScriptedTurn

    if not isinstance(turn, ScriptedTurn):
        return turn  # type: ignore[no-any-return]
    wire: dict[str, Any] = {
        "text": turn.text,
        "reasoning": turn.reasoning,
        "tool_calls": turn.tool_calls,
        "finish_reason": turn.finish_reason,
        "chunk_size": turn.chunk_size or 1 << 20,
        "delay_ms": turn.delay * 1000,
    }
    if turn.usage is not None:
        u = turn.usage
        usage: dict[str, Any] = {
            "prompt_tokens": u.input_tokens,
            "completion_tokens": u.output_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        }
        if u.cost is not None:
            usage["cost"] = u.cost
        wire["usage"] = usage
    if turn.error is not None:
        body = {"error": {"message": str(turn.error.message), "type": turn.error.code or "error"}}
        wire["fault"] = {"error_event_after_chunks": turn.error_after_chunks, "body": body}
    return wire


def wire_turns(turns: Any) -> list[LoopbackTurn | Mapping[str, Any]]:
    """`turns` (a sequence, or a ScriptedProvider's) as the loopback server takes them."""
    from runtime.testing.scripted import ScriptedProvider
    from tests.tui.conftest import HangingProvider

    if isinstance(turns, HangingProvider):  # its text, then a stream that never ends
        return [hanging(turns.text)]
    if isinstance(turns, ScriptedProvider):
        turns = turns.turns
    return [wire_turn(t) for t in turns]


class HarnessProcess:
    """A loopback provider and the harness processes its apps start (one per app)."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp_path = tmp_path
        self.home = tmp_path / "home"
        self.work = tmp_path / "work"
        self._monkeypatch = monkeypatch
        self.server: LoopbackServer | None = None
        self.children: list[Any] = []  # tui.child.Child, one per app
        self.apps: list[Any] = []
        self.seeders: list[Any] = []  # tui.child.Child of `session()`

    def start(
        self,
        turns: Any = (),
        *,
        folder: Path | None = None,
    ) -> HarnessProcess:
        """Start the loopback server with `turns` and set this process's environment as
        `bastion`'s would be (the harness process inherits it), in `folder` (default
        `tmp_path/work`)."""
        self.server = LoopbackServer(wire_turns(turns))
        self.server.start()
        self.work = folder or self.work
        self.work.mkdir(parents=True, exist_ok=True)
        mp = self._monkeypatch
        mp.chdir(self.work)
        for name in list(os.environ):
            if name.startswith(("OPENAI_", "ANTHROPIC_", "BASTION_", "OLLAMA_")):
                mp.delenv(name)
        mp.setenv("BASTION_HOME", str(self.home))
        mp.setenv("XDG_CONFIG_HOME", str(self.tmp_path / "config"))
        mp.setenv("OPENAI_BASE_URL", self.server.base_url)
        return self

    @property
    def requests(self) -> list[RecordedRequest]:
        """What the harness process sent the provider, in order."""
        assert self.server is not None
        return self.server.requests

    def add_turns(self, *turns: Any) -> None:
        assert self.server is not None
        self.server.add_turns(*wire_turns(turns))

    def argv(
        self,
        *,
        first_prompt: str | None = None,
        model: str | None = MODEL,
        approval_mode: str | None = "ask",
        session_id: str | None = None,
        resume: str | None = None,
        theme: str | None = None,
        args: Sequence[str] = (),
    ) -> list[str]:
        argv = ["--model", model] if model is not None else []
        if approval_mode is not None:
            argv += ["--approval-mode", approval_mode]
        if session_id is not None:
            argv += ["--session-id", session_id]
        if resume is not None:
            argv += ["--resume", resume]
        if theme is not None:
            argv += ["--theme", theme]
        return [*argv, *args, *([first_prompt] if first_prompt is not None else [])]

    def app(self, **options: Any) -> Any:
        """The app as `bastion ARGS` builds it (`tui.launch.build_app`), over a harness
        process `tui.launch` starts (told to drive at once, as on a terminal).

        Options: `first_prompt`, `model` (default openai/test; None: no flag),
        `approval_mode` (default "ask"; None: no flag), `session_id`,
        `resume`, `theme`, `args` (more flags), and `app` (BastionApp attributes to
        set after it is built, e.g. a `sandbox_notice`)."""
        from runtime import load_config
        from tui.launch import _Opening, build_app, chosen_theme, model_hint
        from tui.parsers import main_parser

        assert self.server is not None, "start() first"
        overrides = options.pop("app", {})
        opts = main_parser().parse_args(self.argv(**options))
        config = load_config(os.getcwd())
        theme, folder = chosen_theme(opts, config)
        opening = _Opening(opts)
        child = opening.open()
        self.children.append(child)
        child.drive()
        app = build_app(opts, opening, config, theme, folder, model_hint(opts, config.model))
        for name, value in overrides.items():
            setattr(app, name, value)
        self.apps.append(app)
        return app

    async def session(self, prompts: Sequence[str], **options: Any) -> str:
        """A stored session of `prompts`, each answered in turn, made through a harness
        process of its own (started as `bastion` starts one, driven over the protocol
        and closed); its id, for `app(resume=...)`. Options as for `app`."""
        from tui.child import Child
        from tui.parsers import main_parser

        opts = main_parser().parse_args(self.argv(**options))
        child = Child.start(opts, check_model=True)
        self.seeders.append(child)
        child.drive()
        client, conversation_id = await child.harness()
        try:
            for prompt in prompts:
                item = await client.submit(conversation_id, prompt)
                await client.wait(item.id, conversation_id)
        finally:
            await client.close()
        return conversation_id

    async def driving(self, first: str | None, **options: Any) -> tuple[Any, str]:
        """A harness process started as `bastion` starts one, driving its new session
        with `first` sent and answered (a new session is stored, and served on its
        attach socket, from its first prompt; None: nothing sent), with no app: (its
        owner client, the conversation's id). It ends when the test closes the client."""
        from tui.child import Child
        from tui.parsers import main_parser

        child = Child.start(main_parser().parse_args(self.argv(**options)), check_model=True)
        self.seeders.append(child)
        child.drive()
        client, conversation_id = await child.harness()
        if first is not None:
            item = await client.submit(conversation_id, first)
            await client.wait(item.id, conversation_id)
        return client, conversation_id

    def attached(self, conversation_id: str, **options: Any) -> Any:
        """The app as `bastion attach ID` builds it (`tui.attach_app.build_app`): a client
        on the attach socket of the harness process that drives the session."""
        from tui.attach_app import build_app

        return build_app(conversation_id, **options)

    @property
    def conversation_id(self) -> str:
        """The last app's conversation."""
        return str(self.apps[-1].conversation_id)

    async def snapshot(self, conversation_id: str | None = None) -> Any:
        """The conversation as the harness process stored it (read once its app closed,
        from the store in BASTION_HOME, through the store module the runtime uses)."""
        from runtime.store.database import Store

        self.wait_children()
        store = await Store.open(self.home / "bastion.sqlite")
        try:
            return await store.snapshot(conversation_id or self.conversation_id)
        finally:
            await store.close()

    async def lease(self, conversation_id: str) -> Any:
        """The conversation's lease as the store holds it now (who drives it)."""
        from runtime.store.database import Store

        store = await Store.open(self.home / "bastion.sqlite")
        try:
            return await store.lease(conversation_id)
        finally:
            await store.close()

    async def stored(self, conversation_id: str | None = None) -> bool:
        """Whether the harness process stored the conversation (a new one is stored with
        its first prompt), read once its app closed."""
        from runtime.store.database import Store

        self.wait_children()
        store = await Store.open(self.home / "bastion.sqlite")
        try:
            return await store.exists(conversation_id or self.conversation_id)
        finally:
            await store.close()

    def wait_children(self, timeout: float = 30.0) -> list[int | None]:
        """Wait for every harness process started so far to exit (its app closed it);
        their exit codes."""
        codes: list[int | None] = []
        for child in [*self.seeders, *self.children]:
            try:
                codes.append(child.process.wait(timeout))
            except subprocess.TimeoutExpired:
                codes.append(None)
        return codes

    def close(self) -> None:
        """Reap every child (one its app never took is closed; one still running after
        its app is killed) and stop the server."""
        try:
            for app, child in zip(self.apps, self.children, strict=False):
                if app.harness is None:
                    child.close(timeout=10)
            for child in [*self.seeders, *self.children]:
                if child.process.poll() is None:
                    try:
                        child.process.wait(10)
                    except subprocess.TimeoutExpired:
                        child.process.kill()
                        child.process.wait()
                        raise AssertionError("a harness process outlived its app") from None
        finally:
            if self.server is not None:
                self.server.stop()


@pytest.fixture
def harness_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """`harness_process(turns, folder=None)`: a `HarnessProcess`, started; every harness
    process it starts is reaped when the test ends."""
    made: list[HarnessProcess] = []

    def start(turns: Any = (), *, folder: Path | None = None) -> HarnessProcess:
        proc = HarnessProcess(tmp_path, monkeypatch).start(turns, folder=folder)
        made.append(proc)
        return proc

    yield start
    for proc in made:
        proc.close()
