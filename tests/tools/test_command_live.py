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
