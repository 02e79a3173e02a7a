"""run_command and read_output: cwd pinning, argv, env, exit codes, spills."""

from __future__ import annotations

from .conftest import code


async def test_shell_and_argv(call, root):
    shell = await call("run_command", command="echo hello; echo err >&2; exit 3")
    assert shell.ok and shell.data["exit_code"] == 3
    assert "hello" in shell.data["output"] and "err" in shell.data["output"]
    assert shell.data["truncated"] is False and shell.data["output_id"] is None
    assert isinstance(shell.data["duration_ms"], int)
    argv = await call("run_command", argv=["printf", "%s|", "a b", "$HOME"])
    assert argv.data["output"] == "a b|$HOME|"


async def test_cwd_is_pinned_and_relative(call, root):
    (root / "sub").mkdir()
    result = await call("run_command", command="pwd; ls", cwd="sub")
    assert result.data["output"].splitlines()[0] == str(root / "sub")
    missing = await call("run_command", command="true", cwd="nope")
    assert code(missing) == "NOT_FOUND"


async def test_explicit_environment(call, ctx, monkeypatch):
    from tools import ToolContext

    monkeypatch.setenv("SOME_TOKEN", "hunter2")
    default = await call("run_command", command="echo ${SOME_TOKEN:-unset} $TERM")
    assert default.data["output"].strip() == "unset dumb"
    custom = ToolContext(
        ctx.workspace, artifacts_dir=ctx.artifacts_dir, env={"PATH": "/usr/bin:/bin", "X": "1"}
    )
    result = await call("run_command", tool_ctx=custom, command="echo $X")
    assert result.data["output"].strip() == "1"


async def test_argument_contract(call):
    both = await call("run_command", command="true", argv=["true"])
    assert code(both) == "INVALID_ARGUMENT"
    neither = await call("run_command")
    assert code(neither) == "INVALID_ARGUMENT"
    too_long = await call("run_command", command="true", timeout_ms=600_001)
    assert code(too_long) == "INVALID_ARGUMENT"
    missing = await call("run_command", argv=["definitely-not-a-program-xyz"])
    assert code(missing) == "NOT_FOUND"


async def test_spill_and_read_output_paging(call, ctx):
    result = await call("run_command", command="seq 1 20000")
    assert result.data["truncated"] is True
    text = result.data["output"]
    assert text.startswith("1\n2\n") and text.rstrip().endswith("20000")
    assert "omitted" in text
    output_id = result.data["output_id"]
    assert output_id in result.model_text()
    page = await call("read_output", id=output_id, offset=100, limit=3)
    assert page.data["content"] == "100\n101\n102" and page.data["next_offset"] == 103
    last = await call("read_output", id=output_id, offset=19999)
    assert last.data["content"] == "19999\n20000" and last.data["next_offset"] is None
    past = await call("read_output", id=output_id, offset=30000)
    assert code(past) == "INVALID_ARGUMENT"


async def test_small_output_leaves_no_artifact(call, ctx):
    await call("run_command", command="echo small")
    assert list(ctx.artifacts_dir.iterdir()) == []


async def test_background_process_does_not_hold_the_call(call):
    import time

    started = time.monotonic()
    result = await call("run_command", command="sleep 30 & echo started")
    assert result.ok and "started" in result.data["output"]
    assert time.monotonic() - started < 20  # not the background sleep's 30 s
