"""Every event survives the ledger: to_dict, JSON, from_dict gives the same value."""

from __future__ import annotations

import json

from runtime.model.events import (
    AttemptReset,
    EntryAdded,
    EntryTextAppended,
    LeaseChanged,
    ReasoningDelta,
    RulesUpdated,
    RunUpdated,
    TextDelta,
    ToolCallUpdated,
    event_from_dict,
    event_to_dict,
)
from runtime.model.records import Entry, Run, ToolCallRecord


def roundtrip(event):
    return event_from_dict(json.loads(json.dumps(event_to_dict(event))))


def test_events_roundtrip():
    entry = Entry(
        "e1",
        "c1",
        3,
        "assistant",
        "complete",
        "hi \u2028 there",
        1.0,
        "r1",
        {"tool_calls": [{"id": "t", "name": "read_file", "arguments": "{}"}]},
    )
    run = Run("r1", "c1", "i1", "completed", 1.0, 2.0, 3, "answered", None, {"input_tokens": 1})
    call = ToolCallRecord(
        "t",
        "c1",
        "r1",
        "e1",
        0,
        "read_file",
        "{}",
        True,
        "not_required",
        "done",
        1.0,
        2.0,
        {"ok": True},
        "e2",
    )
    for event in (
        EntryAdded("c1", 4, entry),
        EntryTextAppended("c1", 5, "e1", 0, "abc"),
        RunUpdated("c1", 6, run),
        ToolCallUpdated("c1", 7, call),
        LeaseChanged("c1", 8, "o", 12, 3),
        RulesUpdated("c1", 9, [{"kind": "command", "pattern": "git status", "scope": "session"}]),
        ToolCallUpdated(
            "c1", 10, call.but(review={"diff": "-a\n+b\n", "note": "", "allowed_by": []})
        ),
        TextDelta("c1", "r1", 7, 1, "e1", 0, "x"),
        ReasoningDelta("c1", "r1", 7, 2, "e1", "y"),
        AttemptReset("c1", "r1", 7, 3, "e1", 2, "HTTP 500"),
    ):
        assert roundtrip(event) == event
