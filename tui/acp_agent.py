"""`bastion acp`'s ACP agent: the methods an editor calls, each onto a session of its own.

    initialize      protocol version 1; loadSession; prompts of text and resource links
    session/new     a new conversation in `cwd`, driven here (tui.acp_session)
    session/load    a stored conversation driven here, its transcript replayed first
    session/prompt  submit, stream, answer with the stop reason
    session/cancel  interrupt the run
    session/set_mode  the approval mode (tui.acp_modes), as Shift+Tab switches it

A method ACP has and this class has not (config options, listing, authentication) is
answered "method not found" by the SDK's router.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Final

from acp import PROTOCOL_VERSION, RequestError
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SetSessionModeResponse,
)

from runtime import BastionError, parse_uuid
from tui.acp_modes import mode_state
from tui.acp_session import (
    INVALID_PARAMS,
    NOT_FOUND,
    AcpSession,
    open_acp_session,
    rpc_error,
)
from tui.acp_updates import PromptBlock
from tui.exits import error_line
from tui.version import installed_version

__all__ = ["BastionAgent"]

log = logging.getLogger(__name__)

CAPABILITIES: Final = AgentCapabilities(
    load_session=True,
    # Files come as resource links (read through the workspace, as `@path`), not as
    # text an editor embeds; images are not taken.
    prompt_capabilities=PromptCapabilities(image=False, audio=False, embedded_context=False),
)


class BastionAgent:
    """The ACP `Agent` of `bastion acp` (see the module). `opts`: its command line."""

    def __init__(self, opts: Any) -> None:
        self.opts = opts
        self.client: Client | None = None
        self.sessions: dict[str, AcpSession] = {}

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,  # (the one version there is)
            agent_capabilities=CAPABILITIES,
            agent_info=Implementation(name="bastion", title="Bastion", version=installed_version()),
        )

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        session = await self._open(cwd, mcp_servers)
        return NewSessionResponse(session_id=session.id, modes=mode_state(session.mode))

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> LoadSessionResponse:
        try:
            conversation_id = parse_uuid(session_id)
        except ValueError:
            raise RequestError(
                NOT_FOUND,
                f"no session {session_id!r}: a session id is a bastion conversation id "
                "(`bastion sessions --all` lists them)",
                {"sessionId": session_id},
            ) from None
        loaded = self.sessions.pop(conversation_id, None)
        if loaded is not None:  # loaded again: from its store, as a new process would
            await loaded.close()
        session = await self._open(cwd, mcp_servers, resume=conversation_id)
        return LoadSessionResponse(modes=mode_state(session.mode))

    async def prompt(
        self, prompt: list[PromptBlock], session_id: str, **kwargs: Any
    ) -> PromptResponse:
        return await self._session(session_id).prompt(prompt)

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        await self._session(session_id).set_mode(mode_id)
        return SetSessionModeResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is None:
            log.warning("session/cancel for no session here: %r", session_id)
            return
        await session.cancel()

    async def close(self) -> None:
        """Close every session (their leases released)."""
        sessions, self.sessions = list(self.sessions.values()), {}
        results = await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                log.warning("closing a session: %s", result)

    def _session(self, session_id: str) -> AcpSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError(
                NOT_FOUND,
                f"no session {session_id!r} in this bastion acp process: "
                "open it with session/new or session/load first",
                {"sessionId": session_id},
            )
        return session

    async def _open(
        self, cwd: str, mcp_servers: list[Any] | None, *, resume: str | None = None
    ) -> AcpSession:
        if not (isinstance(cwd, str) and os.path.isabs(cwd) and os.path.isdir(cwd)):
            raise RequestError(
                INVALID_PARAMS, f"cwd {cwd!r} is not the absolute path of a folder", {"cwd": cwd}
            )
        if mcp_servers:
            error_line(
                f"the editor's MCP servers ({len(mcp_servers)}) are not started: bastion "
                "starts those of your config (`bastion doctor` lists them)"
            )
        assert self.client is not None  # (set as the connection starts)
        try:
            session = await open_acp_session(self.opts, cwd, self.client, resume=resume)
        except BastionError as exc:
            raise rpc_error(exc) from None
        try:
            await session.start()
        except BaseException as exc:
            await session.close()
            if isinstance(exc, BastionError):
                raise rpc_error(exc) from None
            raise
        self.sessions[session.id] = session
        return session
