from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tools import Access, Limits, ToolContext, ToolResult, Workspace, native, run_tool


@pytest.fixture(autouse=True, params=["native", "python"])
def hot_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every tools test runs twice: with tools._native (the build must have made
    it) and on the pure-Python path it falls back to."""
    if request.param == "python":
        monkeypatch.setattr(native, "NATIVE", None)
    elif native.NATIVE is None:
        pytest.fail(
            "tools._native is not built (`pip install -e .` compiles tools/csrc/ (needs libre2-dev))"
        )
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
