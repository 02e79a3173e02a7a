"""The test MCP server (tests/mcp/mcp_server.py's tools) behind OAuth, on loopback: the
SDK's own authorization server (discovery, dynamic client registration, PKCE, the
authorization code and refresh grants) over an in-memory provider that approves at
once, as a user who clicks "Allow" would.

    python tests/mcp/oauth_server.py --port-file FILE

Its stderr says each token it issued, so a test can tell a refresh from a sign-in.
"""

from __future__ import annotations

import secrets
import socket
import sys
import time
from pathlib import Path

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


class Approving:
    """An authorization server that approves every request, in memory."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [], expires_at=time.time() + 300,
            client_id=client.client_id or "", code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )  # fmt: skip
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client, authorization_code: str):  # type: ignore[no-untyped-def]
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(self, client, authorization_code) -> OAuthToken:  # type: ignore[no-untyped-def]
        self.codes.pop(authorization_code.code, None)
        return self._issue(client.client_id, authorization_code.scopes, "signed in")

    async def load_refresh_token(self, client, refresh_token: str):  # type: ignore[no-untyped-def]
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client, refresh_token, scopes) -> OAuthToken:  # type: ignore[no-untyped-def]
        self.refresh.pop(refresh_token.token, None)
        return self._issue(client.client_id, scopes or refresh_token.scopes, "refreshed")

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token) -> None:  # type: ignore[no-untyped-def]
        self.access.pop(getattr(token, "token", ""), None)

    def _issue(self, client_id: str | None, scopes: list[str], how: str) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access, client_id=client_id or "", scopes=scopes,
            expires_at=int(time.time()) + 3600,
        )  # fmt: skip
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id or "", scopes=scopes
        )
        print(f"token {how}", file=sys.stderr, flush=True)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=3600,
                          refresh_token=refresh, scope=" ".join(scopes) or None)  # fmt: skip


def main(port_file: Path) -> None:
    import anyio
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = MCPServer(
        "bastion-oauth-test",
        auth_server_provider=Approving(),
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            client_registration_options=ClientRegistrationOptions(enabled=True),
            required_scopes=[],
        ),
    )

    @app.tool()
    def echo(text: str) -> str:
        """Say `text` back."""
        return f"echo: {text}"

    config = uvicorn.Config(app.streamable_http_app(), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    port_file.write_text(str(sock.getsockname()[1]))
    anyio.run(lambda: server.serve(sockets=[sock]))


if __name__ == "__main__":
    main(Path(sys.argv[sys.argv.index("--port-file") + 1]))
