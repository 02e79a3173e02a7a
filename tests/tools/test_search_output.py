"""Issue 37 item 7 (seed 000's `search_output`): spilled output can be searched, not
only paged, through read_output's `pattern`, with the same locator check: only an
artifact id a command of this session returned names a file that is read."""

from __future__ import annotations

from .conftest import code


async def test_a_pattern_returns_the_matching_lines_with_their_numbers(call, ctx):
    script = "for i in $(seq 1 20000); do echo line $i; done; echo 'ERROR: disk full'"
    result = await call("run_command", command=script)
    output_id = result.data["output_id"]
    assert result.data["truncated"] is True
    found = await call("read_output", id=output_id, pattern=r"ERROR|line 1999\d$")
    assert found.ok
    assert found.data["content"].splitlines() == [
        *(f"{n}: line {n}" for n in range(19990, 20000)),
        "20001: ERROR: disk full",
    ]
    assert "11 matching line(s)" in found.model_text()
    literal = await call("read_output", id=output_id, pattern="line 7.", literal=True)
    assert literal.data["matches"] == 0 and "0 matching line(s)" in literal.model_text()
    paged = await call("read_output", id=output_id, pattern="line 5", limit=2, offset=10)
    assert paged.data["content"].splitlines() == ["50: line 50", "51: line 51"]
    assert paged.data["next_offset"] == 52


async def test_a_bad_pattern_or_a_forged_id_is_refused(call, ctx):
    result = await call("run_command", command="seq 1 20000")
    output_id = result.data["output_id"]
    assert code(await call("read_output", id=output_id, pattern="(a")) == "INVALID_ARGUMENT"
    assert code(await call("read_output", id=output_id, pattern=r"(a)\1")) == "INVALID_ARGUMENT"
    for forged in ("../etc/passwd", "out_" + "0" * 32, output_id + "/x"):
        refused = await call("read_output", id=forged, pattern="root")
        assert code(refused) == "SPILL_REFERENCE_UNKNOWN", forged
