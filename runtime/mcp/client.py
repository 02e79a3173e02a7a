"""One MCP server's connection, through the official SDK (the only module that imports
`mcp`; runtime.mcp.hub imports this one only when a server is configured).

A connection is a task that holds the SDK's `Client` open (its transports are
anyio context managers, entered and left in that one task): it connects, lists
the tools, then waits for a stop or a `tools/list_changed` and lists again.
Calls are made from the caller's task on the open client; cancelling one (Esc)
makes the SDK send `notifications/cancelled`. A server that does not start
within its `startup_timeout`, or whose connection closes (it exited, it was
killed), ends FAILED with one line saying why, and its tools are withdrawn.
An idle server's tools are listed again every HEARTBEAT seconds, so one that dies
or hangs between calls is noticed then. A server that had been ready and then failed (it
crashed, its connection closed, it stopped answering)
is started again after a backoff (RESTART_DELAYS: 2, 4, 8, 16, 30 s), each attempt
bounded by its `startup_timeout`; its tools come back once it lists them. After
the last attempt it stays FAILED, saying so. A server that stayed up for
STABLE seconds before it failed starts the count afresh. A server that never
started is not retried (a missing command would only fail again), nor is one with
`restart = false`, nor any in `bastion doctor`'s probe.
A stdio server's stderr goes to `<home>/mcp/NAME.log` (0600, capped:
`runtime.mcp.errlog`), never the terminal; its last line is quoted when it fails.

What a server sends is read as UTF-8 with bytes that are not replaced (U+FFFD),
so such a reply still answers its call. A reply the SDK cannot read at all (a
lone surrogate in its JSON, garbage) reaches `_on_message` as an exception,
with no call to pin it on: every call waiting on that server is ended at once
with one line saying so, rather than after its whole `tool_timeout`, and the
SDK's log of it (a traceback) goes to `<home>/mcp/sdk.log`, not the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime.mcp.config import ServerSpec
from runtime.mcp.errlog import ErrLog, keep_sdk_log
from runtime.model.errors import BastionError
from runtime.model.results import McpServerStatus, ServerState

log = logging.getLogger(__name__)
#: Seconds before each restart of a server that failed after it had been ready.
RESTART_DELAYS: tuple[float, ...] = (2.0, 4.0, 8.0, 16.0, 30.0)
STABLE = 60.0  # up this long, a server's failure starts the restart count afresh
HEARTBEAT = 10.0  # seconds between heartbeats (a tools listing) of an idle server
_LIST_PAGES = 100  # a server that pages its tools forever cannot hang the start


_WHY = {
    ServerState.STARTING: "still starting",
    ServerState.READY: "not connected",
    ServerState.FAILED: "down",
    ServerState.STOPPED: "stopped",
}


class ServerGone(Exception):
    """The server cannot take the call: it failed, or its connection closed."""


class Connection:
    def __init__(
        self,
        spec: ServerSpec,
        log_dir: Path,
        on_change: Callable[[], None],
        *,
        restart: bool = False,
    ) -> None:
        self.spec = spec
        self.state = ServerState.STARTING
        self.detail = ""
        self.tools: dict[str, Any] = {}  # the server's own tool name -> its mcp Tool
        self.prompts: dict[str, Any] = {}  # name -> its mcp Prompt (when it offers any)
        self.resources: dict[str, Any] = {}  # uri -> its mcp Resource
        self._log_dir = log_dir
        self._on_change = on_change
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._started = asyncio.Event()  # set once READY or FAILED
        self._wake: asyncio.Queue[str] = asyncio.Queue()
        self._errlog: ErrLog | None = None
        self._waiting: set[asyncio.Future[str]] = set()  # one per call: set to end it
        self._restart = restart and spec.restart
        self.restarts = 0  # attempts made since the server was last stable
        self._ready_at: float | None = None  # when it was last READY (monotonic)
        self._settled = asyncio.Event()  # this attempt is READY or FAILED
        self._restarter: asyncio.Task[None] | None = None

    # --- lifetime --------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._hold(), name=f"mcp {self.spec.name}"
        )

    async def wait_started(self) -> None:
        """Until the server is ready or has failed; a server not ready within its
        `startup_timeout` is stopped and FAILED."""
        try:
            await asyncio.wait_for(self._started.wait(), self.spec.startup_timeout)
        except TimeoutError:
            seconds = f"{self.spec.startup_timeout:g}"
            await self._stop_task(graceful=False)  # it is not listening for a stop
            await self._log_drained()
            self.fail(f"did not start within {seconds} s (startup_timeout)")

    async def close(self) -> None:
        if self.state is not ServerState.FAILED:
            self.state = ServerState.STOPPED
        self._restart = False
        restarter, self._restarter = self._restarter, None
        if restarter is not None:
            restarter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await restarter
        await self._stop_task()
        self._started.set()

    async def _stop_task(self, *, graceful: bool = True) -> None:
        """Stop the holding task: asked to leave the client (closing the connection, a
        stdio server's process ended by the SDK), cancelled if it does not within 5 s."""
        task, self._task = self._task, None
        if task is None or task.done():
            return
        self._wake.put_nowait("stop")
        try:
            await asyncio.wait_for(asyncio.shield(task), 5.0 if graceful else 0)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def fail(self, why: str) -> None:
        """FAILED with one line; its tools are withdrawn (the session goes on)."""
        if self.state in (ServerState.FAILED, ServerState.STOPPED):
            return
        tail = self._stderr_tail()
        self.state, self.detail = ServerState.FAILED, why + (f" (stderr: {tail})" if tail else "")
        self.tools, self.prompts, self.resources = {}, {}, {}
        self._client = None
        self._started.set()
        self._settled.set()
        then = self._plan_restart()
        log.warning("MCP server %s %s; %s", self.spec.name, self.detail, then)
        self._on_change()

    def _plan_restart(self) -> str:
        """Start the restart task when one is due; what happens next, in words."""
        was_up, self._ready_at = self._ready_at, None
        if not self._restart or (was_up is None and not self.restarts):
            return "the session goes on without it"
        if was_up is not None and time.monotonic() - was_up >= STABLE:
            self.restarts = 0
        if self.restarts >= len(RESTART_DELAYS):
            self.detail += f"; gave up after {self.restarts} restarts"
            return "the session goes on without it"
        delay = RESTART_DELAYS[self.restarts]
        self.restarts += 1
        self.detail += f"; restarting in {delay:g} s ({self.restarts} of {len(RESTART_DELAYS)})"
        self._restarter = asyncio.get_running_loop().create_task(
            self._restart_after(delay), name=f"mcp {self.spec.name} restart"
        )
        return "its tools are withdrawn until it is back"

    async def _restart_after(self, delay: float) -> None:
        """After `delay`, start the server again; an attempt not ready within its
        `startup_timeout` fails (and may plan the next)."""
        await asyncio.sleep(delay)
        await self._stop_task(graceful=False)  # (the failed attempt's, if it lingers)
        if not self._restart:
            return  # closed meanwhile
        self.state, self.detail = (
            ServerState.STARTING,
            f"restarting ({self.restarts} of {len(RESTART_DELAYS)})",
        )
        self._settled = asyncio.Event()
        self._wake = asyncio.Queue()
        self._on_change()
        self.start()
        try:
            await asyncio.wait_for(self._settled.wait(), self.spec.startup_timeout)
        except TimeoutError:
            await self._stop_task(graceful=False)
            await self._log_drained()
            self.fail(f"did not restart within {self.spec.startup_timeout:g} s (startup_timeout)")

    def status(self, namespaced: tuple[str, ...]) -> McpServerStatus:
        return McpServerStatus(
            self.spec.name,
            self.spec.transport,
            self.spec.target,
            self.state,
            self.detail,
            namespaced,
        )

    # --- the holding task --------------------------------------------------------

    async def _hold(self) -> None:
        try:
            await _load_sdk()
            keep_sdk_log(self._log_dir)
            async with self._open() as client:
                await self._list(client)
                self._client = client
                self.state, self.detail = ServerState.READY, ""
                self._ready_at = time.monotonic()
                self._started.set()
                self._settled.set()
                self._on_change()
                await self._serve(client)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a server's failure is its own, never the session's
            await self._log_drained()
            self.fail(describe(exc, starting=self.state is ServerState.STARTING))
        finally:
            self._client = None
            if self._errlog is not None:
                self._errlog.close()

    async def _serve(self, client: Any) -> None:
        """Until asked to stop: list the tools again on `tools/list_changed`, and every
        HEARTBEAT seconds while no call is under way, so a server that died or hung
        between calls is noticed (and restarted) then, not when the model next needs it."""
        while True:
            try:
                wake = await asyncio.wait_for(self._wake.get(), HEARTBEAT)
            except TimeoutError:
                if not self._waiting:  # (a server busy with a call may not answer)
                    await self._ping(client)
                continue
            if wake == "stop":
                return
            await self._list(client)  # tools/list_changed
            self._on_change()

    async def _ping(self, client: Any) -> None:
        """List the tools again, as a heartbeat every server answers (MCP's `ping` is
        gone from its newer revisions). A closed connection or no answer within
        `startup_timeout` ends the connection; an error the server sends does not."""
        from mcp import MCPError

        before = self._offered()
        try:
            async with asyncio.timeout(self.spec.startup_timeout):
                await self._list(client)
        except TimeoutError:
            raise ServerGone(
                f"did not answer within {self.spec.startup_timeout:g} s while idle"
            ) from None
        except MCPError as exc:
            if _closed(exc):
                raise
            log.debug("MCP server %s: the heartbeat's listing failed: %s", self.spec.name, exc)
            return
        if self._offered() != before:
            self._on_change()

    def _offered(self) -> tuple[set[str], ...]:
        return set(self.tools), set(self.prompts), set(self.resources)

    def _open(self) -> Any:
        from mcp import Client, StdioServerParameters
        from mcp.types import Implementation

        spec = self.spec
        target: Any
        if spec.command is not None:
            target = StdioServerParameters(
                command=spec.command,
                args=list(spec.args),
                env=dict(spec.env) or None,
                encoding_error_handler="replace",  # (see the module's docstring)
            )
            target = _StdioWithLog(target, self._open_log())
        else:
            auth = None
            if spec.oauth:
                from runtime.mcp.oauth import session_auth

                auth = session_auth(spec, self._log_dir.parent)
            target = _http(str(spec.url), dict(spec.headers), auth)
        return Client(
            target,
            mode="legacy",  # the initialize handshake: every server speaks it
            cache=None,
            message_handler=self._on_message,
            client_info=Implementation(name="bastion", version=_version()),
        )

    def _open_log(self) -> ErrLog:
        # A restart appends: the failed attempt's stderr (why it died) stays in the log.
        self._errlog = ErrLog(self._log_dir / f"{self.spec.name}.log", append=self.restarts > 0)
        return self._errlog

    async def _log_drained(self) -> None:
        """Before a failure is said: the server's stderr read to its end (it has exited,
        so that is at once; a child of it still holding the pipe costs 0.5 s at most)."""
        if self._errlog is not None:
            await asyncio.to_thread(self._errlog.drained, 0.5)

    def _stderr_tail(self) -> str:
        return self._errlog.last_line() if self._errlog is not None else ""

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):  # a reply the SDK could not read
            lines = str(message).strip().splitlines() or [type(message).__name__]
            why = lines[-1 if len(lines) < 2 else 1].split(" [type=")[0].strip()[:200]
            line = f"MCP server {self.spec.name} sent a reply that could not be read"
            for waiting in list(self._waiting):
                if not waiting.done():
                    waiting.set_result(f"{line} ({why}); the call was ended")
        elif getattr(message, "method", None) in _LIST_CHANGED:
            self._wake.put_nowait("list")

    async def _list(self, client: Any) -> None:
        """The server's tools, and its prompts and resources when it offers them (a
        server that says it does but fails to list them just offers none)."""
        self.tools = await _pages(client.list_tools, "tools", "name")
        offers = client.server_capabilities
        if getattr(offers, "prompts", None) is not None:
            self.prompts = await self._optional(client.list_prompts, "prompts", "name")
        if getattr(offers, "resources", None) is not None:
            self.resources = await self._optional(client.list_resources, "resources", "uri")

    async def _optional(self, list_page: Any, field: str, key: str) -> dict[str, Any]:
        from mcp import MCPError

        try:
            return await _pages(list_page, field, key)
        except MCPError as exc:
            if _closed(exc):
                raise
            log.info("MCP server %s did not list its %s: %s", self.spec.name, field, exc)
            return {}

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> Any:
        """The server's GetPromptResult; ServerGone as `call` says."""
        return await self._request(f"prompt {name}", lambda c: c.get_prompt(name, arguments))

    async def read_resource(self, uri: str) -> Any:
        """The server's ReadResourceResult; ServerGone as `call` says."""
        return await self._request(f"resource {uri}", lambda c: c.read_resource(uri))

    async def _request(self, what: str, make: Callable[[Any], Any]) -> Any:
        client = self._client
        if client is None or self.state is not ServerState.READY:
            raise ServerGone(f"MCP server {self.spec.name} is " + _WHY[self.state])
        try:
            async with asyncio.timeout(self.spec.tool_timeout):
                return await make(client)
        except TimeoutError:
            raise ServerGone(
                f"MCP server {self.spec.name} did not send {what} within "
                f"{self.spec.tool_timeout:g} s (tool_timeout)"
            ) from None

    # --- calls ---------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The server's CallToolResult. ServerGone when it cannot answer: it failed, its
        connection closed mid-call (the server is then FAILED), or the call took longer
        than `tool_timeout` (the server stays; the call is cancelled there)."""
        client = self._client
        if client is None or self.state is not ServerState.READY:
            raise ServerGone(f"MCP server {self.spec.name} is " + _WHY[self.state] + (
                f" ({self.detail})" if self.detail else ""))  # fmt: skip
        from mcp import MCPError

        ended: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        calling = asyncio.ensure_future(client.call_tool(tool, arguments))
        self._waiting.add(ended)
        try:
            async with asyncio.timeout(self.spec.tool_timeout):
                await asyncio.wait({calling, ended}, return_when=asyncio.FIRST_COMPLETED)
            if not calling.done():  # an unreadable reply ended it (`_on_message`)
                raise ServerGone(ended.result())
            return calling.result()
        except TimeoutError:
            raise ServerGone(
                f"{self.spec.name}__{tool} took longer than {self.spec.tool_timeout:g} s "
                "(tool_timeout) and was cancelled"
            ) from None
        except MCPError as exc:
            if _closed(exc):
                await self._log_drained()
                self.fail("stopped mid-call: its connection closed")
                raise ServerGone(f"MCP server {self.spec.name} {self.detail}") from None
            raise
        finally:
            self._waiting.discard(ended)
            if not calling.done():
                calling.cancel()  # (the SDK tells the server: notifications/cancelled)
            calling.add_done_callback(_retrieved)


class _StdioWithLog:
    """`stdio_client` with the server's stderr sent to its log (a `Transport`)."""

    def __init__(self, params: Any, errlog: ErrLog) -> None:
        from mcp.client.stdio import stdio_client

        self._errlog = errlog
        self._cm = stdio_client(params, errlog=errlog)  # type: ignore[arg-type]  # (fileno())

    async def __aenter__(self) -> Any:
        try:
            return await self._cm.__aenter__()
        finally:
            self._errlog.started()  # spawned (or not): the server holds the pipe, not us

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._cm.__aexit__(*exc)


def _http(url: str, headers: dict[str, str], auth: Any = None) -> Any:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers=headers, auth=auth)
    return _HttpWithClient(streamable_http_client, url, http)


class _HttpWithClient:
    """`streamable_http_client` over an HTTP client carrying the user's headers, closed
    with it (a `Transport`)."""

    def __init__(self, make: Any, url: str, http: Any) -> None:
        self._http = http
        self._cm = make(url, http_client=http)

    async def __aenter__(self) -> Any:
        await self._http.__aenter__()
        try:
            return await self._cm.__aenter__()
        except BaseException:
            await self._http.__aexit__(None, None, None)
            raise

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._cm.__aexit__(*exc)
        finally:
            await self._http.__aexit__(None, None, None)


_LIST_CHANGED = (
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
)


async def _pages(list_page: Any, field: str, key: str) -> dict[str, Any]:
    """Every item of a paged MCP listing (`tools`, `prompts`, `resources`) by `key`."""
    found: dict[str, Any] = {}
    cursor = None
    for _ in range(_LIST_PAGES):
        page = await list_page(cursor=cursor)
        found.update((getattr(item, key), item) for item in getattr(page, field))
        cursor = page.next_cursor
        if cursor is None:
            break
    return found


_SDK = ("mcp", "mcp.client.stdio", "mcp.client.streamable_http", "mcp.shared._httpx_utils")


async def _load_sdk() -> None:
    """Import the SDK (about a second of CPU: pydantic, its types) in a thread, so the
    harness's loop goes on checkpointing and heartbeating meanwhile."""
    import importlib
    import sys

    if any(name not in sys.modules for name in _SDK):
        await asyncio.to_thread(lambda: [importlib.import_module(name) for name in _SDK])


def _retrieved(task: asyncio.Future[Any]) -> None:
    """A call's task, done after its caller stopped waiting: its outcome was decided."""
    if not task.cancelled():
        task.exception()


def _closed(exc: Exception) -> bool:
    from mcp_types import CONNECTION_CLOSED

    return getattr(exc, "code", None) == CONNECTION_CLOSED


def describe(exc: BaseException, *, starting: bool) -> str:
    """One line for a server's failure (an ExceptionGroup by its first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, BastionError):  # (runtime.mcp.oauth: a sign-in it needs)
        return exc.message + (f": {exc.hint}" if exc.hint else "")
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in (
        "mcp",
        "mcp_types",
    ):
        return "cannot start: the MCP SDK is not installed (pip install -e '.[mcp]' in bastion's clone)"
    if isinstance(exc, FileNotFoundError | PermissionError):
        text = f"cannot run it: {exc.strerror or text}"
    elif type(exc).__name__ in ("ConnectError", "ConnectTimeout"):
        text = f"cannot connect: {text}"
    return ("did not start: " if starting else "stopped: ") + text[:300]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bastion")
    except PackageNotFoundError:
        return "0"
