"""OAuth for an HTTP MCP server, through the real command (issue 40): `bastion mcp
login NAME` signs in with the browser flow against the SDK's own authorization
server (tests/mcp/oauth_server.py: registration, PKCE, code and refresh grants), the
"browser" being tests/mcp/fake_browser.py through $BROWSER. The tokens land in the
user's store (0600, in a 0700 folder) and never on the screen; a session then uses
them; a server not signed in to is one line naming the command; a forged redirect
(wrong `state`) signs nothing in."""

from __future__ import annotations

import json
import shlex
import stat
import sys
from pathlib import Path

import pytest

from tests.mcp.conftest import call, tool_messages, write_config

pytestmark = pytest.mark.e2e
BROWSER = Path(__file__).with_name("fake_browser.py")


def signed_in(b, tmp_path: Path, url: str, *, forge: bool = False):
    write_config(tmp_path / "config", {"t": {"url": url, "oauth": True}})
    b.env["BROWSER"] = f"{shlex.quote(sys.executable)} {shlex.quote(str(BROWSER))} %s"
    if forge:
        b.env["FAKE_BROWSER"] = "forge"
    return b.run("mcp", "login", "t", timeout=90)


def test_login_then_a_session_uses_the_stored_tokens(loopback, bastion, tmp_path, oauth_server):
    server = loopback([call("c1", "t__echo", text="hi"), {"text": "done"}])
    b = bastion(server)
    before = b.run("-p", "go", "--allow", "t__*")  # not signed in yet
    assert before.returncode == 0, before.stderr
    write_config(tmp_path / "config", {"t": {"url": oauth_server, "oauth": True}})
    out = b.run("-p", "go", "--allow", "t__*")
    lines = [line for line in out.stderr.splitlines() if "MCP server t" in line]
    assert len(lines) == 1, out.stderr
    assert "needs you to sign in: run `bastion mcp login t` in a terminal" in lines[0]

    login = signed_in(b, tmp_path, oauth_server)
    assert login.returncode == 0, login.stderr
    assert "signed in to MCP server t: 1 tools" in login.stderr
    assert (
        "open this page to sign in to t" in login.stderr
    )  # the URL, for a machine without a browser
    stored = b.home / "mcp" / "oauth" / "t.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert stat.S_IMODE(stored.parent.stat().st_mode) == 0o700
    token = json.loads(stored.read_text())["tokens"]["access_token"]
    assert token not in login.stdout + login.stderr  # never shown

    server2 = loopback([call("c1", "t__echo", text="hi"), {"text": "done"}])
    b.env["OPENAI_BASE_URL"] = server2.base_url
    used = b.run("-p", "go", "--allow", "t__*")
    assert used.returncode == 0, used.stderr
    (echo,) = tool_messages(server2.requests()[1])
    assert echo["content"] == "echo: hi"
    assert token not in used.stdout + used.stderr

    out = b.run("mcp", "logout", "t")
    assert out.returncode == 0 and "its sign-in was deleted" in out.stderr
    assert not stored.exists()


def test_a_forged_redirect_signs_nothing_in(bastion, loopback, tmp_path, oauth_server):
    b = bastion(loopback([]))
    out = signed_in(b, tmp_path, oauth_server, forge=True)
    assert out.returncode == 1, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("bastion:")]
    assert len(lines) == 1 and "the redirect's state was not this sign-in's" in lines[0]
    assert not (b.home / "mcp" / "oauth" / "t.json").exists()


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"command": "x"}, "does not use OAuth"),
        (None, "no MCP server 't' in your config"),
    ],
)
def test_login_to_a_server_without_oauth_is_one_line(bastion, loopback, tmp_path, table, says):
    b = bastion(loopback([]))
    write_config(tmp_path / "config", {"t": table} if table else {})
    out = b.run("mcp", "login", "t")
    assert out.returncode == 1 and says in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_oauth_on_a_stdio_server_is_a_config_error(bastion, loopback, tmp_path):
    b = bastion(loopback([]))
    write_config(tmp_path / "config", {"t": {"command": "x", "oauth": True}})
    out = b.run("-p", "hi")
    assert out.returncode == 2 and "oauth goes with url" in out.stderr


def test_a_planted_link_for_the_token_folder_is_refused(bastion, loopback, tmp_path, oauth_server):
    """The tokens' folder replaced by a link elsewhere: login refuses in one line and
    neither writes nor deletes anything where the link points."""
    b = bastion(loopback([]))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "t.json").write_text("keep me")
    (b.home / "mcp").mkdir(parents=True, exist_ok=True)
    (b.home / "mcp" / "oauth").symlink_to(elsewhere)
    out = signed_in(b, tmp_path, oauth_server)
    assert out.returncode == 1 and "is not a folder of this user" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert [p.name for p in elsewhere.iterdir()] == ["t.json"]
    assert (elsewhere / "t.json").read_text() == "keep me"
