from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tools import Access, Limits, ToolContext, ToolResult, Workspace, native, run_tool

REQUIRED = os.environ.get("BASTION_REQUIRE_NATIVE") == "1"
WHY_NOT_NATIVE = (
    f"tools._native is not in use ({native.REASON}); to build it, install a C/C++ "
    "compiler and RE2's headers (Debian: build-essential libre2-dev), then "
    "`pip install -e .` again"
)
# Without the module (and unless CI requires it) the tools tests run on the Python
# path only, and test_native.py skips as a whole: one line each says why.
PATHS = ["native", "python"] if native.NATIVE is not None or REQUIRED else ["python"]


def require_native() -> None:
    """Skip what needs tools._native where it is not built, saying why and how to
    build it; with BASTION_REQUIRE_NATIVE=1 (CI) its absence fails instead."""
    if native.NATIVE is None:
        if REQUIRED:
            pytest.fail(WHY_NOT_NATIVE + " [BASTION_REQUIRE_NATIVE=1]")
        pytest.skip(WHY_NOT_NATIVE)


@pytest.fixture(autouse=True, params=PATHS)
def hot_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every tools test runs twice: with tools._native and on the pure-Python path
    it falls back to (only the latter where the module is missing, see PATHS)."""
    if request.param == "python":
        monkeypatch.setattr(native, "NATIVE", None)
    else:
        require_native()
    return str(request.param)


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: pathlib.Path) -> pathlib.Path:
    """A directory beside the workspace holding things that must never leak."""
    path = tmp_path / "outside"
    (path / ".ssh").mkdir(parents=True)
    (path / ".ssh" / "id_rsa").write_text("SECRET-KEY-MATERIAL\n")
    (path / "passwd").write_text("root:SECRET-PASSWD\n")
    return path


@pytest.fixture
def workspace(root: pathlib.Path) -> Iterator[Workspace]:
    with Workspace.open(root) as ws:
        yield ws


@pytest.fixture
def ctx(workspace: Workspace, tmp_path: pathlib.Path) -> ToolContext:
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    return ToolContext(workspace, artifacts_dir=artifacts)


Call = Callable[..., Any]


@pytest.fixture
def call(ctx: ToolContext) -> Call:
    """``await call("read_file", path="a")`` runs a tool through run_tool."""

    async def _call(
        name: str,
        *,
        tool_ctx: ToolContext | None = None,
        authorize: Callable[[str, Access], bool] | None = None,
        limits: Limits | None = None,
        **args: Any,
    ) -> ToolResult:
        use = tool_ctx or ctx
        if authorize is not None or limits is not None:
            use = ToolContext(
                use.workspace,
                limits or use.limits,
                authorize or use.authorize_path,
                use.artifacts_dir,
                use.env,
            )
        result = await run_tool(name, args, use)
        assert isinstance(result, ToolResult)
        result.model_text()  # always renders
        return result

    return _call


def code(result: ToolResult) -> str | None:
    return result.refusal.code.value if result.refusal else None
