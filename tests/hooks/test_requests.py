"""What a PreRequest hook is given of a request and what its answer makes of it
(runtime.hooks.requests): a message returned as given is the original, whole; the
system prompt and the tools are the request's own; the oldest messages left out of a
huge request stay in front."""

from __future__ import annotations

import json

from runtime.hooks import requests
from runtime.hooks.requests import replacement, shown
from runtime.model.llm import ImagePart, Message, ModelRequest, TextPart, ToolCall, ToolSpec

TOOLS = (ToolSpec("read_file", "read", {"type": "object"}),)


def request(*messages: Message) -> ModelRequest:
    return ModelRequest("m", (Message("system", "be careful"), *messages), TOOLS)


def echoed(found: requests.Shown) -> list[dict]:
    """The messages as a hook that changes nothing returns them (through JSON)."""
    return json.loads(json.dumps(found.messages))


def test_a_message_returned_as_given_is_sent_whole_with_its_images():
    image = ImagePart("image/png", "aGVsbG8=")
    long = "x" * (requests.MESSAGE_CHARS + 500)
    req = request(
        Message("user", (TextPart("look"), image)),
        Message("assistant", "", (ToolCall("c1", "read_file", '{"path": "a"}'),)),
        Message("tool", long, tool_call_id="c1"),
    )
    found = shown(req)
    assert found.messages[0]["content"] == "look\n[image: image/png]"
    assert found.messages[2]["content"].startswith("x" * 100)
    assert "500 more characters are not shown to hooks" in found.messages[2]["content"]
    made = replacement(found, echoed(found))
    assert isinstance(made, ModelRequest)
    assert made.messages == req.messages and made.tools == TOOLS


def test_a_changed_message_is_sent_as_written_and_the_system_prompt_stays():
    req = request(Message("user", "hello"), Message("user", "hello"))
    found = shown(req)
    answer = [*echoed(found)[:1], {"role": "user", "content": "changed"}]
    made = replacement(found, answer)
    assert isinstance(made, ModelRequest)
    assert [m.content for m in made.messages] == ["be careful", "hello", "changed"]
    assert made.messages[0].role == "system" and made.tools == TOOLS


def test_the_oldest_messages_of_a_huge_request_are_left_out_and_kept_in_front(monkeypatch):
    monkeypatch.setattr(requests, "STDIN_CHARS", 180)  # two messages of ~75
    req = request(*(Message("user", f"message {i} " + "y" * 40) for i in range(4)))
    found = shown(req)
    assert found.omitted == 2 and len(found.messages) == 2
    assert "2 oldest messages are left out" in found.payload()["messages_note"]
    made = replacement(found, [{"role": "user", "content": "only this"}])
    assert isinstance(made, ModelRequest)
    assert [m.content for m in made.messages][-1] == "only this"
    assert made.messages[:3] == req.messages[:3]  # the system prompt and the two left out


def test_what_cannot_be_sent_is_a_problem_not_a_request():
    found = shown(request(Message("user", "hi")))
    for answer in (
        [{"role": "system", "content": "obey"}],
        [{"role": "user", "content": "hi", "name": "x"}],
        [{"role": "assistant", "content": "", "tool_calls": [{"id": "", "name": "f"}]}],
        [{"role": "user", "content": "hi", "tool_call_id": "c1"}],
        "hi",
        [],
    ):
        assert isinstance(replacement(found, answer), str), answer
