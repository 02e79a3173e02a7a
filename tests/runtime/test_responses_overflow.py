"""Context overflow -> compaction -> retry over the OpenAI Responses wire format.

The loopback server's `/v1/responses` route answers with what the Responses API
sends when the input does not fit the model's window. It says so in three ways,
each recorded from the real API:

- before streaming, HTTP 400 with `{"error": {"type": "invalid_request_error",
  "code": "context_length_exceeded", "param": "input", "message": "Your input
  exceeds the context window of this model. ..."}}` (as quoted in
  the-open-agent/openagent#2344 and james-6-23/codex2api#415);
- in a stream already open, a `response.failed` event whose `response.error` is
  `{"code": "context_length_exceeded", "message": ...}` (the payload openai/codex
  replays in codex-rs/codex-api/src/sse/responses.rs, `context_window_error_is_fatal`);
- in a stream already open, an `error` event carrying the error object nested
  under `error` (as quoted in dyad-sh/dyad#1672).

For each, the harness compacts once (the summary request also goes to
`/v1/responses`), retries without the compacted turns, and completes; a second
overflow after compacting fails the run with one message, and no loop.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime import compacted_through
from runtime.model.llm import ProviderError
from runtime.model.records import EntryKind, EntryStatus
from runtime.providers.responses import ResponsesProvider
from runtime.setup.load import Config
from runtime.testing.server import LoopbackServer
from tests.runtime.test_compaction import ask, open_with
from tests.runtime.test_responses_provider import over_loopback

MESSAGE = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
HTTP_400 = {
    "status": 400,
    "body": {
        "error": {
            "message": MESSAGE,
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    },
}
# The stream opens (response.created, response.in_progress: sequence numbers 0 and 1),
# then the terminal event says the response failed.
RESPONSE_FAILED = {
    "error_event_after_chunks": 0,
    "body": {
        "type": "response.failed",
        "sequence_number": 2,
        "response": {
            "id": "resp_loopback_overflow",
            "object": "response",
            "created_at": 1759510079,
            "status": "failed",
            "background": False,
            "error": {"code": "context_length_exceeded", "message": MESSAGE},
            "usage": None,
            "user": None,
            "metadata": {},
        },
    },
}
ERROR_EVENT = {
    "error_event_after_chunks": 0,
    "body": {
        "type": "error",
        "sequence_number": 2,
        "error": {
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
            "message": MESSAGE,
            "param": "input",
        },
    },
}
SHAPES = {"http-400": HTTP_400, "response.failed": RESPONSE_FAILED, "error-event": ERROR_EVENT}


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_each_shape_is_a_typed_context_overflow(shape: str) -> None:
    _, error = await over_loopback([{"text": "never sent", "fault": SHAPES[shape]}])
    assert isinstance(error, ProviderError), error
    assert error.is_context_overflow() and not error.retryable
    assert error.code == "context_length_exceeded" and MESSAGE in error.message
    assert error.status == (400 if shape == "http-400" else None)


def sent(body: dict[str, Any]) -> str:
    """Everything a Responses request gives the model: instructions and input items."""
    return json.dumps([body.get("instructions"), body["input"]])


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_overflow_compacts_and_retries_once(tmp_path: Path, shape: str) -> None:
    fault = SHAPES[shape]
    turns = [
        {"text": "first answer"},
        {"text": "second answer"},
        {"fault": fault},  # THIRD PROMPT does not fit
        {"text": "THE SUMMARY"},  # the summariser, over /v1/responses too
        {"text": "third answer"},  # the retry, without the compacted turns
        {"fault": fault},  # FOURTH PROMPT does not fit
        {"text": "ANOTHER SUMMARY"},
        {"fault": fault},  # nor after compacting: the run fails
    ]
    async with LoopbackServer(turns) as server:
        provider = ResponsesProvider("openai-responses", server.base_url)
        harness = await open_with(tmp_path, provider, Config())
        spec = "openai-responses/gpt-4.1"
        conv = await harness.create_conversation(str(tmp_path), settings={"model": spec})
        await harness.drive(conv.id)
        first = await ask(harness, conv.id, "FIRST PROMPT")
        second = await ask(harness, conv.id, "SECOND PROMPT")
        third = await ask(harness, conv.id, "THIRD PROMPT")
        fourth = await ask(harness, conv.id, "FOURTH PROMPT")
        snap = await harness.snapshot(conv.id)
        await harness.close()
        requests = server.requests
        remaining = server.remaining
    assert [first.state, second.state] == ["completed", "completed"]
    assert third.state == "completed", third.error
    bodies = [r.body for r in requests]
    # every request, the summariser's included, went over the Responses API
    assert all(r.path == "/v1/responses" for r in requests), [r.path for r in requests]
    assert all(b["model"] == "gpt-4.1" and b["stream"] is True for b in bodies)
    assert "FIRST PROMPT" in sent(bodies[2])  # the request that overflowed
    summariser = sent(bodies[3])
    assert "FIRST PROMPT" in summariser and "first answer" in summariser
    retried = sent(bodies[4])
    assert "THE SUMMARY" in retried and "THIRD PROMPT" in retried
    assert "FIRST PROMPT" not in retried and "first answer" not in retried
    # the second overflow: compacted once more, retried once, then one failure, no loop
    assert fourth.state == "failed"
    assert fourth.error["code"] == "context_length_exceeded"
    message = fourth.error["message"]
    assert MESSAGE in message and "even after compacting" in message and "/new" in message
    assert len(bodies) == 8 and remaining == 0
    assert "ANOTHER SUMMARY" in sent(bodies[7]) and "FOURTH PROMPT" in sent(bodies[7])
    # the store kept every original entry, in order, the compacted ones marked
    users = [e.text for e in snap.entries if e.kind == EntryKind.USER]
    assert users == ["FIRST PROMPT", "SECOND PROMPT", "THIRD PROMPT", "FOURTH PROMPT"]
    answers = [
        e.text
        for e in snap.entries
        if e.kind == EntryKind.ASSISTANT and e.status == EntryStatus.COMPLETE
    ]
    assert answers == ["first answer", "second answer", "third answer"]
    summaries = [e for e in snap.entries if e.kind == EntryKind.SUMMARY]
    assert [s.text for s in summaries] == ["THE SUMMARY", "ANOTHER SUMMARY"]
    assert [s.data["reason"] for s in summaries] == ["overflow", "overflow"]
    # what the first summary covers is exactly what the retry left out
    through = summaries[0].data["through"]
    covered = [e for e in snap.entries if e.position <= through and e.text]
    assert [e.text for e in covered][:2] == ["FIRST PROMPT", "first answer"]
    assert all(json.dumps(e.text)[1:-1] not in retried for e in covered)
    kept = [e for e in snap.entries if e.kind == EntryKind.USER and e.position > through]
    assert all(e.text in retried for e in kept[:-1])  # all but FOURTH PROMPT, not yet asked
    assert compacted_through(snap.entries) == summaries[1].data["through"] > through


async def test_an_overflow_with_nothing_to_compact_fails_at_once(tmp_path: Path) -> None:
    """The first prompt alone is too long: there is no whole turn to summarise, so no
    summary request, no retry, and a message that says what is left to do."""
    async with LoopbackServer([{"fault": RESPONSE_FAILED}, {"text": "unused"}]) as server:
        provider = ResponsesProvider("openai-responses", server.base_url)
        harness = await open_with(tmp_path, provider, Config())
        spec = "openai-responses/gpt-4.1"
        conv = await harness.create_conversation(str(tmp_path), settings={"model": spec})
        await harness.drive(conv.id)
        run = await ask(harness, conv.id, "HUGE PROMPT")
        snap = await harness.snapshot(conv.id)
        await harness.close()
        requests = server.requests
    assert run.state == "failed" and run.error["code"] == "context_length_exceeded"
    assert "nothing older can be compacted" in run.error["message"]
    assert len(requests) == 1
    assert [e.text for e in snap.entries if e.kind == EntryKind.USER] == ["HUGE PROMPT"]
    assert not [e for e in snap.entries if e.kind == EntryKind.SUMMARY]
