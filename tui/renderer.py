"""The Markdown renderer process: an answer rendered ahead, off the app's interpreter.

An answer's Markdown is rendered before the frame that shows it
(`markdown.render_aside`). On a thread of the app, each render (5-30 ms) shares
Python's interpreter lock with the frames and with the keys: while one runs, a
frame or a key's trip to the prompt gets about half the time it needs, so a frame
of 4 ms of work took 13-17 ms and a key waited 20 ms to be handled. So while runs
stream (`OnDemand`: from a prompt sent, or a run in the view, until 60 s after the
last run) the app has `python -m tui.renderer FD`, over a socket pair
as its harness process (`tui.child`). It loads Rich and the Markdown parser, says
it is ready, then renders each job it is sent with a console of its own and sends
the lines back. It runs at the app's priority: the frame that shows new text waits
for its renders, so a renderer that gave way to the harness on busy cores would
hold the screen back.

Until it is ready, and once it has ended (killed, or a render failed there:
`gone` says how), renders go back to a thread of the app, as before; a render that
fails there raises as ever. A renderer that stalls (stopped, swapped out, wedged)
must not freeze the transcript, whose frames wait for their renders: a job with
no answer in RENDER_TIMEOUT seconds ends it (the process is killed, since the
pair is out of step once a reply is late) and renders go back to the app; the app
says so once, in one line (`notice`) (issue 25, item 8). It never outlives the app: at end of file on its end
of the pair it exits, and the app closes it as it exits.

    renderer = Renderer.start()      # at once; `ready` once it has loaded
    lines = renderer.render(job)     # blocking, on a worker thread; RendererGone
    renderer.close()
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Final

from runtime import end_pair, frame, recv_blocking, send_blocking, start_pair
from runtime.model.errors import BastionError

if TYPE_CHECKING:
    import asyncio

    from rich.segment import Segment
    from rich.theme import Theme

__all__ = ["OnDemand", "Renderer", "RendererGone", "main", "pack", "unpack"]

CLOSE_TIMEOUT: Final = 2.0  # seconds it gets to exit once its end of the pair closes
# Seconds a job may take there (a render takes 5-30 ms; a huge answer some hundreds).
RENDER_TIMEOUT: Final = 3.0


class RendererGone(BastionError):
    """The renderer process ended, or could not render a job; renders go back to the app."""

    code = "renderer_gone"


class Renderer:
    """The renderer process, from its start: `ready` is set once it has loaded."""

    def __init__(self, process: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self.process = process
        self.sock = sock
        self.ready = threading.Event()
        self.gone: RendererGone | None = None
        self.timeout = RENDER_TIMEOUT
        self._told = False  # `notice` said it once
        self._lock = threading.Lock()  # one job at a time on the pair
        threading.Thread(target=self._await_ready, name="bastion-renderer", daemon=True).start()

    @classmethod
    def start(cls) -> Renderer:
        # stderr: nowhere (what fails there comes back as a frame)
        return cls(*start_pair("tui.renderer", stderr=subprocess.DEVNULL, keys=False))

    @property
    def usable(self) -> bool:
        return self.ready.is_set() and self.gone is None

    def _await_ready(self) -> None:
        try:
            with self._lock:
                said = recv_blocking(self.sock)
        except (EOFError, OSError) as exc:
            self._ended(f"it ended as it started ({exc or 'end of file'})")
            return
        if said == ("ready",):
            self.ready.set()
        else:
            self._ended(f"it said {said!r} as it started")

    def render(
        self, color_system: str | None, options: Any, theme: Theme, source: str, dark: bool
    ) -> list[list[Segment]]:
        """The lines of a job (`markdown._job`) rendered there, with a console of
        `color_system`. RendererGone if it has ended, or the render failed there."""
        if self.gone is not None:
            raise self.gone
        job = (color_system, options, _definitions(theme), source, dark)
        try:
            data = frame(job)  # what cannot be sent fails here, before anything is sent
        except Exception as exc:
            raise self._ended(f"a job could not be sent: {exc}") from exc
        try:
            with self._lock:
                if self.gone is not None:  # ended while this job waited its turn
                    raise self.gone
                self.sock.settimeout(self.timeout)
                try:
                    self.sock.sendall(data)
                    kind, value = recv_blocking(self.sock)
                finally:
                    self.sock.settimeout(None)
        except TimeoutError as exc:
            self.process.kill()  # a late reply would answer the next job: end it here
            raise self._ended(f"it did not answer in {self.timeout:g} s") from exc
        except (EOFError, OSError) as exc:
            raise self._ended(f"it ended ({exc or 'end of file'})") from exc
        if kind != "lines":
            raise self._ended(f"a render failed there: {value}")
        return unpack(value)

    def notice(self) -> str | None:
        """Once, after it stopped on its own: the one line saying so; else None."""
        if self.gone is None or self._told or str(self.gone).endswith("closed"):
            return None
        self._told = True
        return f"{self.gone}; rendering in the app"

    def _ended(self, why: str) -> RendererGone:
        if self.gone is None:
            self.gone = RendererGone(f"the Markdown renderer process stopped: {why}")
        return self.gone

    def close(self) -> None:
        """End it (it exits at end of file) and reap it."""
        self._ended("closed")
        end_pair(self.sock, self.process, CLOSE_TIMEOUT)


class OnDemand:
    """The app's renderer process, there while runs need it: `want` starts it when a run
    is coming (it loads, ~0.15 s in its own process, while the model is asked), `rest`
    ends it once IDLE seconds pass with no run. A session only read, or left idle,
    costs no third interpreter (~20 MB); until one is ready renders go to a thread of
    the app, as they would anyway. One that stopped on its own (`Renderer.gone`) is not
    started again: renders stay in the app, as before.

        renderers = OnDemand(on_failure=app_notify)
        renderers.want()          # a prompt sent, a run in the view
        renderers.current         # the Renderer, once started (maybe not ready yet)
        renderers.rest()          # a view with no run: IDLE seconds from now it ends
        await renderers.close()   # the app exits
    """

    IDLE: ClassVar[float] = 60.0

    def __init__(self, on_failure: Callable[[str], None]) -> None:
        self.current: Renderer | None = None
        self.idle = self.IDLE
        self._on_failure = on_failure
        self._start: asyncio.Future[Renderer] | None = None
        self._ending: asyncio.TimerHandle | None = None

    def want(self) -> None:
        """A run is coming: start the process (once), and do not end it."""
        import asyncio

        if self._ending is not None:
            self._ending.cancel()
            self._ending = None
        if self._start is None:
            self._start = asyncio.get_running_loop().run_in_executor(None, Renderer.start)
            self._start.add_done_callback(self._started)

    def _started(self, start: asyncio.Future[Renderer]) -> None:
        if start.cancelled():
            return
        if (exc := start.exception()) is not None:  # renders stay on a thread of the app
            self._on_failure(
                f"the Markdown renderer process did not start: {exc}; rendering in the app"
            )
            return
        self.current = start.result()

    def rest(self) -> None:
        """No run for now: end the process `idle` seconds from now, unless `want` first."""
        import asyncio

        if self._start is not None and self._ending is None:
            self._ending = asyncio.get_running_loop().call_later(self.idle, self._end)

    def _end(self) -> None:
        import asyncio

        self._ending = None
        renderer = self.current
        if renderer is None or renderer.gone is not None:
            return  # it could not start, or stopped on its own: renders stay in the app
        self.current, self._start = None, None
        # (a render in flight gets RendererGone "closed" and is done on a thread instead)
        asyncio.get_running_loop().run_in_executor(None, renderer.close)

    async def close(self) -> None:
        """End it, one still starting too (the app exits)."""
        import asyncio

        if self._ending is not None:
            self._ending.cancel()
        start, self._start = self._start, None
        if start is None:
            return
        await asyncio.wait([start])
        if not start.cancelled() and start.exception() is None:
            await asyncio.to_thread(start.result().close)


def _definitions(theme: Theme) -> tuple[tuple[str, str], ...]:
    """`theme` as its styles' definitions (a Style pickled brings its cached hash: see
    `pack`), made once per theme."""
    kept = _DEFINED.get(id(theme))
    if kept is None or kept[0] is not theme:
        said = tuple(sorted((name, str(style)) for name, style in theme.styles.items()))
        kept = _DEFINED[id(theme)] = (theme, said)
    return kept[1]


_DEFINED: dict[int, tuple[Theme, tuple[tuple[str, str], ...]]] = {}


def pack(lines: list[list[Segment]]) -> list[list[tuple[str, str | None]]]:
    """`lines` to send: each segment's text and its style's definition. A Style pickled
    as it is would bring the hash it cached in this process (string hashes differ
    from one process to the next), and equal styles would then compare unequal
    in the app. Rich's Markdown (without hyperlinks) makes no style a definition
    cannot say; one with a link or meta is refused (the app then renders itself)."""
    packed = []
    for line in lines:
        out = []
        for segment in line:
            style = segment.style
            if segment.control or (style is not None and (style.link or style.meta)):
                raise ValueError(f"a segment its style's definition cannot say: {segment!r}")
            out.append((segment.text, None if style is None else str(style)))
        packed.append(out)
    return packed


def unpack(packed: list[list[tuple[str, str | None]]]) -> list[list[Segment]]:
    """The lines `pack` sent, with styles made here (`Style.parse`, which keeps them)."""
    from rich.segment import Segment
    from rich.style import Style

    parse = Style.parse
    return [
        [Segment(text, None if style is None else parse(style)) for text, style in line]
        for line in packed
    ]


def main(fd: int) -> int:
    """The renderer's body: say it is ready, then render each job until end of file."""
    sock = socket.socket(fileno=fd)
    from runtime import harden_process

    harden_process()
    from rich.theme import Theme

    from tui.widgets.rich_markdown import aside_console, render_lines

    consoles: dict[str | None, Any] = {}
    themes: dict[tuple[tuple[str, str], ...], Theme] = {}
    send_blocking(sock, ("ready",))
    while True:
        try:
            color_system, options, defined, source, dark = recv_blocking(sock)
        except (EOFError, OSError):
            return 0  # the app closed its end, or exited
        try:
            console = consoles.get(color_system)
            if console is None:
                console = consoles[color_system] = aside_console(color_system)
            theme = themes.get(defined)
            if theme is None:
                theme = themes[defined] = Theme(dict(defined), inherit=False)
            lines = render_lines(console, options, theme, source, dark)
            reply: tuple[str, Any] = ("lines", pack(lines))
        except Exception as exc:  # said to the app, which renders it itself
            reply = ("error", f"{type(exc).__name__}: {exc}")
        try:
            send_blocking(sock, reply)
        except OSError:
            return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
