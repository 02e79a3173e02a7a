"""The Markdown renderer process (tui.renderer): it draws what the app would, it ends
with the app, and when it stops renders go back to a thread of the app."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from rich.theme import Theme
from textual.app import App

import tui.widgets.markdown as markdown
from tests.tui.conftest import wait_for
from tests.tui.test_app import gated_app
from tests.tui.test_render_ahead import SAMPLE, check_aside_draws_what_the_app_would
from tui.renderer import OnDemand, Renderer, RendererGone
from tui.widgets.markdown import is_rendered, rendered


def _ready(renderer: Renderer, timeout: float = 30) -> None:
    assert renderer.ready.wait(timeout), renderer.gone


@pytest.fixture
def renderer():
    started = Renderer.start()
    try:
        _ready(started)
        yield started
    finally:
        started.close()


def _counted(renderer: Renderer, monkeypatch) -> list[str]:
    jobs: list[str] = []
    render = renderer.render

    def counted(color_system, options, theme, source, dark):
        jobs.append(source)
        return render(color_system, options, theme, source, dark)

    monkeypatch.setattr(renderer, "render", counted)
    return jobs


async def test_the_renderer_draws_exactly_what_the_app_would(renderer, monkeypatch):
    jobs = _counted(renderer, monkeypatch)
    await check_aside_draws_what_the_app_would(renderer)
    assert jobs == [SAMPLE] * 4  # each went to the process
    assert renderer.gone is None


async def test_a_killed_renderer_leaves_renders_to_the_app(renderer, monkeypatch):
    app: App[None] = App()
    async with app.run_test(size=(100, 30)):
        os.kill(renderer.process.pid, signal.SIGKILL)
        renderer.process.wait(10)
        markdown._RENDERS.clear()
        await markdown.render_aside(app, SAMPLE, 60, renderer=renderer)  # no error
        assert rendered(app, SAMPLE, 60) == markdown._render(
            markdown._aside_console(app), *markdown._job(app, SAMPLE, 60)
        )
        assert isinstance(renderer.gone, RendererGone) and "ended" in str(renderer.gone)
        assert not renderer.usable
        jobs = _counted(renderer, monkeypatch)
        markdown._RENDERS.clear()
        await markdown.render_aside(app, SAMPLE, 61, renderer=renderer)
        assert jobs == [] and is_rendered(app, SAMPLE, 61)  # not asked again


def test_a_render_that_fails_there_says_why(renderer):
    from rich.theme import Theme

    with pytest.raises(RendererGone, match=r"a render failed there: .*Error"):
        renderer.render("truecolor", "not console options", Theme(), SAMPLE, True)
    with pytest.raises(RendererGone):  # and it is not asked again
        renderer.render("truecolor", None, Theme(), SAMPLE, True)


def test_a_job_that_cannot_be_sent_says_why(renderer):
    from rich.theme import Theme

    with pytest.raises(RendererGone, match="could not be sent"):
        renderer.render("truecolor", lambda: None, Theme(), SAMPLE, True)  # no pickle
    assert renderer.process.poll() is None  # nothing half-sent: it still waits


def test_a_style_its_definition_cannot_say_is_not_sent():
    """Styles go as their definitions (`pack`): one with a link would lose it."""
    from rich.segment import Segment
    from rich.style import Style

    from tui.renderer import pack, unpack

    lines = [[Segment("a", Style(bold=True, color="#102030", bgcolor="#405060")), Segment(" ")]]
    assert unpack(pack(lines)) == lines
    with pytest.raises(ValueError, match="cannot say"):
        pack([[Segment("a", Style(link="https://example.com"))]])


def test_it_exits_when_the_app_end_of_the_pair_closes():
    renderer = Renderer.start()
    _ready(renderer)
    renderer.sock.close()  # as when the app exits, or is killed
    assert renderer.process.wait(10) == 0


async def test_the_app_starts_it_for_a_run_and_ends_it_as_it_exits(tmp_path):
    async with gated_app(tmp_path) as gated:
        app, pilot = gated.app, gated.pilot
        await wait_for(lambda: (r := app.renderers.current) is not None and r.usable, pilot, 30)
        process = app.renderers.current.process
        assert process.poll() is None
        gated.provider.more.set()
        gated.provider.end.set()
    await _ended(process)


async def _ended(process, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert process.poll() == 0


async def test_it_ends_once_no_run_needs_it_and_starts_again_for_the_next(tmp_path):
    """An app left idle after its answers gives the process back (`OnDemand.idle`
    seconds after the run ended); the next prompt sent starts a new one."""
    async with gated_app(tmp_path) as gated:
        app, pilot = gated.app, gated.pilot
        app.renderers.idle = 0.3
        await wait_for(lambda: (r := app.renderers.current) is not None and r.usable, pilot, 30)
        first = app.renderers.current.process
        await pilot.pause(0.6)
        assert first.poll() is None  # the run is still going: it stays
        gated.provider.more.set()
        gated.provider.end.set()
        await wait_for(lambda: app.view is not None and app.view.active_run is None, pilot, 30)
        await _ended(first)
        assert app.renderers.current is None
        gated.provider.more.clear()  # the next run stays on (else it could end, and its
        gated.provider.end.clear()  # renderer with it, before that renderer is ready)
        await app.send("again")
        await wait_for(lambda: (r := app.renderers.current) is not None and r.usable, pilot, 30)
        assert app.renderers.current.process.pid != first.pid
        gated.provider.more.set()
        gated.provider.end.set()


async def test_one_that_stopped_on_its_own_is_not_started_again():
    """A renderer that died leaves renders to the app for good (as it always has):
    the next run does not start another."""
    loop = asyncio.get_running_loop()
    said: list[str] = []
    renderers = OnDemand(said.append)
    renderers.idle = 0.1
    try:
        renderers.want()
        deadline = loop.time() + 30
        while renderers.current is None and loop.time() < deadline:
            await asyncio.sleep(0.02)
        dead = renderers.current
        assert dead is not None
        _ready(dead)
        os.kill(dead.process.pid, signal.SIGKILL)
        dead.process.wait(10)
        with pytest.raises(RendererGone):
            dead.render(None, None, Theme(), "x", True)
        renderers.rest()
        await asyncio.sleep(0.3)
        renderers.want()
        await asyncio.sleep(0.3)
        assert renderers.current is dead and not dead.usable
        assert said == []
    finally:
        await renderers.close()


def _no_spawn(*args, **kwargs):
    raise OSError("no processes left")


async def test_one_that_cannot_start_is_said_once_and_renders_stay_here(monkeypatch):
    monkeypatch.setattr(Renderer, "start", classmethod(lambda cls: _no_spawn()))
    said: list[str] = []
    renderers = OnDemand(said.append)
    renderers.want()
    renderers.want()
    deadline = time.monotonic() + 10
    while not said and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await renderers.close()
    assert renderers.current is None
    assert len(said) == 1 and "no processes left" in said[0] and "\n" not in said[0]


async def test_stalled_renderer_times_out_and_the_app_renders(renderer, monkeypatch):
    """Issue 25, item 8: a renderer that stops answering (here SIGSTOP) must not freeze
    the transcript: the job times out, the process is ended, the render is done in
    the app, and the app says so once in one line."""
    renderer.timeout = 0.5
    app: App[None] = App()
    notices: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **kw: notices.append(message))
    async with app.run_test(size=(100, 30)):
        os.kill(renderer.process.pid, signal.SIGSTOP)
        markdown._RENDERS.clear()
        started = time.monotonic()
        await markdown.render_aside(app, SAMPLE, 60, renderer=renderer)
        assert time.monotonic() - started < 10
        assert rendered(app, SAMPLE, 60) == markdown._render(
            markdown._aside_console(app), *markdown._job(app, SAMPLE, 60)
        )
        assert isinstance(renderer.gone, RendererGone) and "did not answer" in str(renderer.gone)
        renderer.process.wait(10)  # killed, not left stopped
        markdown._RENDERS.clear()
        await markdown.render_aside(app, SAMPLE, 61, renderer=renderer)
        assert is_rendered(app, SAMPLE, 61)
    assert len(notices) == 1 and "did not answer in 0.5 s" in notices[0]
    assert "\n" not in notices[0] and notices[0].endswith("rendering in the app")
