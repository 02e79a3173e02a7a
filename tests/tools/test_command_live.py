"""run_command's live output: the host sees what the command prints while it runs."""

from __future__ import annotations


async def test_output_arrives_while_the_command_runs(call, ctx):
    seen: list[str] = []
    live = ctx._replace(on_output=seen.append)
    result = await call(
        "run_command", tool_ctx=live,
        command="echo first; sleep 0.3; printf 'h\\xc3'; sleep 0.1; printf '\\xa9llo\\n'",
    )  # fmt: skip
    assert result.ok
    assert "".join(seen) == result.data["output"] == "first\nhéllo\n"
    assert len(seen) >= 2  # "first" came before the command ended
    assert seen[0] == "first\n"


async def test_live_output_of_a_huge_command_is_all_delivered(call, ctx):
    total = 0

    def count(text: str) -> None:
        nonlocal total
        total += len(text)

    live = ctx._replace(on_output=count)
    result = await call("run_command", tool_ctx=live, command="yes abcdefghi | head -c 3000000")
    assert result.ok and result.data["truncated"] is True
    assert total == 3_000_000 == result.data["output_bytes"]


def test_output_so_far_is_bounded_and_says_what_it_left_out():
    from tools.output import OutputSoFar

    small = OutputSoFar()
    for text in ("a", "b\n", "c"):
        small.feed(text)
    assert small.text() == "ab\nc" and small.total == 4
    big = OutputSoFar(head=4, tail=3)
    for text in ("0123", "45", "6789"):
        big.feed(text)
    assert big.text() == "0123\n…[3 characters omitted]…\n789"
    assert big.total == 10


# --- a failed output pump (issue 25, item 7) -------------------------------------
# 4 MB of output fills the pipe (64 KiB) many times over: a pump that died on the
# first failure left the command blocked on a full pipe until its timeout (5 s here).
FLOOD = "yes abcdefghi | head -c 4000000; echo done"


async def test_failed_output_pump_a_spill_write_that_fails_keeps_draining(call, ctx, monkeypatch):
    import errno

    from tools import command

    def full(self, chunk: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(command.Sink, "write", full)
    result = await call("run_command", command=FLOOD, timeout_ms=60_000)
    assert result.ok, result.model_text()
    assert result.data["timed_out"] is False and result.data["exit_code"] == 0
    assert result.data["output_bytes"] == 4_000_005
    assert result.data["output"].rstrip().endswith("done")  # the tail was kept
    assert "No space left on device" in result.data["output_error"]
    assert "No space left on device" in result.model_text()


async def test_failed_output_pump_a_raising_on_output_keeps_draining(call, ctx):

    calls = 0

    def broken(text: str) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("the screen went away")

    result = await call(
        "run_command", tool_ctx=ctx._replace(on_output=broken), command=FLOOD, timeout_ms=60_000
    )
    assert result.ok, result.model_text()
    assert result.data["timed_out"] is False and result.data["exit_code"] == 0
    assert result.data["output_bytes"] == 4_000_005 and result.data["truncated"] is True
    assert calls == 1  # not called again after it failed
    assert "the screen went away" in result.data["output_error"]
