"""Issue 37, item 3: the seeds' promises about hooks that rewrite and replace, one test
each (the successor of test_seed_promises.py for these items; each runs the real
harness through the case in tests/hooks that proves it, and each fails on the code
before them: hooks could only allow or deny, there was no compaction hook, and a
resumed run asked the model again and ran a crashed Stop hook a second time).

- seed 004: `beforeTool` may "block or rewrite arguments";
- seed 004: `afterTool` may "replace the result";
- seed 004: compaction hooks exist (PreCompact, Claude Code's name);
- an effect hook runs at most once: a Stop hook a crash cut off is reported and not
  run again;
- seed 004: `beforeRequest` may "replace the messages of one request" (PreRequest);
- seed 004: `afterResponse` (PostResponse: each response, at most once);
- seed 004: `afterTools` "runs once a round's tools are done" (PostToolBatch).
"""

from __future__ import annotations

from tests.hooks.test_pre_compact import (
    test_pre_compact_adds_instructions_to_the_summary as pre_compact_case,
)
from tests.hooks.test_pre_compact import (
    test_pre_compact_blocks_automatic_compaction as pre_compact_block_case,
)
from tests.hooks.test_pre_request import (
    test_a_hook_replaces_the_messages_of_each_request_and_the_record_keeps_them as request_case,
)
from tests.hooks.test_replace import (
    test_the_model_sees_the_replacement_and_a_resumed_session_too as replace_case,
)
from tests.hooks.test_rewrite import (
    test_the_rewritten_arguments_run_and_the_model_is_told as rewrite_case,
)
from tests.hooks.test_round_hooks import (
    test_post_response_sees_each_response_and_its_context_reaches_the_model as response_case,
)
from tests.hooks.test_round_hooks import (
    test_post_tool_batch_runs_once_a_round_with_every_result as tool_batch_case,
)
from tests.hooks.test_stop_crash import (
    test_a_stop_hook_cut_off_by_a_crash_is_reported_once_and_not_run_again as stop_case,
)


async def test_seed_before_tool_may_rewrite_arguments(tmp_path):
    await rewrite_case(tmp_path)


async def test_seed_after_tool_may_replace_the_result(tmp_path):
    await replace_case(tmp_path)


async def test_seed_a_compaction_hook_guides_or_blocks_an_automatic_compaction(tmp_path):
    await pre_compact_case(tmp_path / "guides")
    await pre_compact_block_case(tmp_path / "blocks")


async def test_seed_a_stop_hook_a_crash_cut_off_is_reported_and_runs_once(tmp_path):
    await stop_case(tmp_path)


async def test_seed_before_request_replaces_the_messages_of_one_request(tmp_path):
    await request_case(tmp_path)


async def test_seed_after_response_sees_each_response(tmp_path):
    await response_case(tmp_path)


async def test_seed_after_tools_runs_once_a_round_is_done(tmp_path):
    await tool_batch_case(tmp_path)
