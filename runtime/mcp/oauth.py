"""OAuth for HTTP MCP servers: `oauth = true` in a server's table.

Signing in is a command the user runs in a terminal, `bastion mcp login NAME`:
bastion registers itself with the server's authorization server (dynamic client
registration), opens the browser at its authorization page (and prints the URL,
for a machine without one), and takes the redirect on a loopback port of its own
(127.0.0.1, a port the system picks, one request, PKCE and `state` checked by the
SDK: a redirect with the wrong state signs nothing in). The tokens and the client
registration are kept in `$BASTION_HOME/mcp/oauth/NAME.json` (0600, in a 0700
folder, never followed through a link), never in a config or a project file, and
never printed. `bastion mcp logout NAME` deletes them.

A session's connection uses what is stored, and the SDK refreshes an expired access
token with the refresh token on its own. A server that needs a sign-in it has not
had fails in one line naming the command: the harness never opens a browser
behind the user's back.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from runtime.mcp.config import ServerSpec
from runtime.model.errors import BastionError

__all__ = [
    "LoginFailed",
    "NeedsLogin",
    "TokenFile",
    "login",
    "logout",
    "mcp_login",
    "mcp_logout",
    "oauth_spec",
    "session_auth",
    "token_path",
]

CALLBACK_WAIT = 300.0  # seconds the login waits for the browser's redirect


class NeedsLogin(BastionError):
    """An OAuth server that has not been signed in to (or whose sign-in was revoked)."""

    code = "mcp_needs_login"


class LoginFailed(BastionError):
    code = "mcp_login_failed"


def token_path(home: Path, name: str) -> Path:
    return home / "mcp" / "oauth" / f"{name}.json"


class TokenFile:
    """The SDK's TokenStorage over one 0600 JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, Any]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return {}
        with os.fdopen(fd, encoding="utf-8") as fh:
            try:
                data = json.load(fh)
            except ValueError:
                return {}  # a damaged file: as if signed out (the next login rewrites it)
        return data if isinstance(data, dict) else {}

    def _write(self, key: str, value: dict[str, Any]) -> None:
        data = {**self._read(), key: value}
        from runtime.store.home import private_folder

        # (a planted link or another user's folder here is refused, as for the sockets)
        private_folder(str(self.path.parent), LoginFailed)
        temp = self.path.with_suffix(".tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temp, flags, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(temp, self.path)

    async def get_tokens(self) -> Any:
        from mcp.shared.auth import OAuthToken

        found = self._read().get("tokens")
        return OAuthToken.model_validate(found) if found else None

    async def set_tokens(self, tokens: Any) -> None:
        self._write("tokens", tokens.model_dump(mode="json", exclude_none=True))

    async def get_client_info(self) -> Any:
        from mcp.shared.auth import OAuthClientInformationFull

        found = self._read().get("client")
        return OAuthClientInformationFull.model_validate(found) if found else None

    async def set_client_info(self, client_info: Any) -> None:
        self._write("client", client_info.model_dump(mode="json", exclude_none=True))


def _provider(spec: ServerSpec, home: Path, redirect: Any, callback: Any, port: int) -> Any:
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    metadata = OAuthClientMetadata(
        client_name="bastion",
        redirect_uris=[f"http://127.0.0.1:{port}/callback"],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(
        str(spec.url), metadata, TokenFile(token_path(home, spec.name)), redirect, callback
    )


def session_auth(spec: ServerSpec, home: Path) -> Any:
    """The httpx Auth a session's connection uses: the stored tokens, refreshed as
    needed; a needed sign-in is NeedsLogin, never a browser opened from here."""
    port = _registered_port(spec, home)

    async def refuse(_url: str) -> None:
        raise NeedsLogin(
            "needs you to sign in", hint=f"run `bastion mcp login {spec.name}` in a terminal"
        )

    async def never() -> Any:
        raise NeedsLogin(
            "needs you to sign in", hint=f"run `bastion mcp login {spec.name}` in a terminal"
        )

    return _provider(spec, home, refuse, never, port)


def _registered_port(spec: ServerSpec, home: Path) -> int:
    """The loopback port the stored registration names (the redirect URI must match
    the registered one on a refresh); 1 when there is none yet (never listened on)."""
    client = TokenFile(token_path(home, spec.name))._read().get("client") or {}
    for uri in client.get("redirect_uris") or ():
        port = urlparse(str(uri)).port
        if port:
            return port
    return 1


async def login(spec: ServerSpec, home: Path, open_url: Any, say: Any) -> int:
    """Sign in to `spec`'s server: the browser flow on a loopback port; then list its
    tools once to show the sign-in works. Returns how many tools it lists."""
    if spec.url is None or not spec.oauth:
        raise LoginFailed(f"MCP server {spec.name} does not use OAuth (set oauth = true)")
    from runtime.store.home import private_folder

    private_folder(str(token_path(home, spec.name).parent), LoginFailed)  # before any unlink
    token_path(home, spec.name).unlink(missing_ok=True)  # a fresh registration and tokens
    arrived: asyncio.Future[tuple[str, str | None]] = asyncio.get_running_loop().create_future()
    server = await asyncio.start_server(lambda r, w: _callback(r, w, arrived), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def redirect(url: str) -> None:
        say(f"open this page to sign in to {spec.name} (a browser was asked to): {url}")
        await asyncio.to_thread(open_url, url)

    async def callback() -> Any:
        from mcp.shared.auth import AuthorizationCodeResult

        try:
            code, state = await asyncio.wait_for(arrived, CALLBACK_WAIT)
        except TimeoutError:
            raise LoginFailed(f"no sign-in came back within {CALLBACK_WAIT:g} s") from None
        return AuthorizationCodeResult(code=code, state=state)

    try:
        auth = _provider(spec, home, redirect, callback, port)
        return await _list_tools(spec, auth)
    except BaseException:
        token_path(home, spec.name).unlink(missing_ok=True)  # nothing half signed in kept
        raise
    finally:
        server.close()


async def _list_tools(spec: ServerSpec, auth: Any) -> int:
    from mcp import Client
    from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers=dict(spec.headers), auth=auth)
    try:
        async with (
            http,
            Client(
                streamable_http_client(str(spec.url), http_client=http), mode="legacy"
            ) as client,
        ):
            return len((await client.list_tools()).tools)
    except BastionError:
        raise
    except BaseException as exc:
        leaf = _leaf(exc)
        if isinstance(leaf, BastionError):
            raise leaf from None
        if isinstance(leaf, OAuthFlowError) and "State parameter mismatch" in str(leaf):
            raise LoginFailed(
                f"signing in to {spec.name} failed: the redirect's state was not this "
                "sign-in's (a stale or forged redirect); nothing was stored",
                hint=f"run `bastion mcp login {spec.name}` again",
            ) from None
        if isinstance(leaf, OAuthFlowError | OAuthRegistrationError | OAuthTokenError):
            raise LoginFailed(f"signing in to {spec.name} failed: {_first(leaf)}") from None
        if isinstance(leaf, Exception):
            raise LoginFailed(f"signing in to {spec.name} failed: {_first(leaf)}") from None
        raise


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _first(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:300]


async def _callback(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    arrived: asyncio.Future[tuple[str, str | None]],
) -> None:
    """The browser's redirect: `GET /callback?code=…&state=…`, answered with a page."""
    try:
        request = await asyncio.wait_for(reader.readline(), 10)
        parts = request.decode("latin-1").split()
        query = parse_qs(urlparse(parts[1]).query) if len(parts) > 1 else {}
        code, state = query.get("code", [""])[0], query.get("state", [None])[0]
        ok = bool(code) and parts[1].startswith("/callback")
        if ok and not arrived.done():
            arrived.set_result((code, state))
        page = (
            "Received: bastion says in your terminal whether you are signed in."
            if ok
            else "This is not a sign-in redirect."
        )
        writer.write(
            f"HTTP/1.1 {'200 OK' if ok else '400 Bad Request'}\r\ncontent-type: text/plain\r\n"
            f"content-length: {len(page)}\r\nconnection: close\r\n\r\n{page}".encode()
        )
        await writer.drain()
    except (OSError, TimeoutError, IndexError):
        pass  # (a probe or a half-open connection: the login goes on waiting)
    finally:
        writer.close()


def logout(spec_name: str, home: Path) -> bool:
    """Forget the tokens and registration; False when there were none."""
    path = token_path(home, spec_name)
    existed = path.exists()
    path.unlink(missing_ok=True)
    return existed


mcp_logout = logout  # (the runtime's public name for it)


def oauth_spec(tables: Any, name: str) -> ServerSpec:
    """The OAuth server `name` of the user's `[mcp_servers]`; LoginFailed saying why not."""
    from runtime.mcp.config import server_specs

    specs = {s.name: s for s in server_specs(tables)}
    spec = specs.get(name)
    if spec is None:
        known = ", ".join(sorted(specs)) or "none"
        raise LoginFailed(f"no MCP server {name!r} in your config (servers: {known})")
    if not spec.oauth:
        raise LoginFailed(
            f"MCP server {name} does not use OAuth",
            hint=f"add oauth = true to [mcp_servers.{name}] (an HTTP server)",
        )
    return spec


async def mcp_login(tables: Any, name: str, home: Path, open_url: Any, say: Any) -> int:
    """`bastion mcp login NAME`: sign in; the number of tools the server then lists."""
    return await login(oauth_spec(tables, name), home, open_url, say)
