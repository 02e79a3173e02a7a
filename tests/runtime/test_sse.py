"""The SSE decoder: line endings, fields, chunk boundaries, Unicode line separators."""

from __future__ import annotations

import json

from runtime.providers.sse import DataBatch, ServerSentEvent, SSEDecoder, parse_sse

TRICKY = "a\u2028b\u2029c\x85d\u000bе\u000cf"  # LS, PS, NEL, VT, FF: none ends a line

SAMPLE = (
    b": a comment first\r\n"
    b"retry: 1500\n"
    b"event: greeting\r"
    b"id: 7\r\n"
    b"data: hello\n"
    b"data:world\r\n"
    b"\r\n"
    b"data: " + json.dumps({"text": TRICKY}, ensure_ascii=False).encode() + b"\n\n"
    b"data\n"
    b"\n"
    b"id\n"
    b'data: {"multi":\r'
    b"data: 1}\r"
    b"\r"
    b"event: lonely\n\n"
    b"data:  two spaces\n\n"
    b"data: caf\xc3\xa9 \xe2\x98\x95\n\n"
    b"data: the end without a blank line"
)

EXPECTED = [
    ServerSentEvent("hello\nworld", "greeting", "7", 1500),
    ServerSentEvent(json.dumps({"text": TRICKY}, ensure_ascii=False), "message", "7", 1500),
    ServerSentEvent("", "message", "7", 1500),
    ServerSentEvent('{"multi":\n1}', "message", "", 1500),
    ServerSentEvent(" two spaces", "message", "", 1500),
    ServerSentEvent("café ☕", "message", "", 1500),
    ServerSentEvent("the end without a blank line", "message", "", 1500),
]


def feed_all(chunks: list[bytes], *, batch: bool = False) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        result = decoder.feed_batch(chunk) if batch else decoder.feed(chunk)
        if isinstance(result, DataBatch):
            events.extend(ServerSentEvent(p.decode()) for p in result.payloads())
        else:
            events.extend(result)
    return events + decoder.close()


def test_sample_parses_whole() -> None:
    assert parse_sse(SAMPLE) == EXPECTED


def test_unicode_line_separators_stay_inside_the_payload() -> None:
    payload = json.dumps({"content": TRICKY}, ensure_ascii=False)
    events = parse_sse(f"data: {payload}\n\n".encode())
    assert len(events) == 1
    assert json.loads(events[0].data) == {"content": TRICKY}


def test_every_two_way_split_gives_the_same_events() -> None:
    for split in range(1, len(SAMPLE)):
        assert feed_all([SAMPLE[:split], SAMPLE[split:]]) == EXPECTED, f"split at {split}"


def test_every_three_way_split_of_the_tricky_part() -> None:
    part = SAMPLE[SAMPLE.index(b"data: {") : SAMPLE.index(b"data\n")]
    events = parse_sse(part)
    for i in range(1, len(part)):
        for j in range(i, len(part)):
            assert feed_all([part[:i], part[i:j], part[j:]]) == events, (i, j)


def test_byte_at_a_time() -> None:
    assert feed_all([SAMPLE[i : i + 1] for i in range(len(SAMPLE))]) == EXPECTED


def test_crlf_split_across_chunks_is_one_line_break() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    # The LF completing the CRLF must not count as the blank line that dispatches.
    assert decoder.feed(b"\ndata: b\r") == []
    assert decoder.feed(b"\n\r\n") == [ServerSentEvent("a\nb")]


def test_lone_cr_line_endings() -> None:
    assert parse_sse(b"data: x\r\rdata: y\r\r") == [ServerSentEvent("x"), ServerSentEvent("y")]


def test_event_name_resets_but_id_persists() -> None:
    events = parse_sse(b"event: a\nid: 1\ndata: x\n\ndata: y\n\n")
    assert events == [ServerSentEvent("x", "a", "1"), ServerSentEvent("y", "message", "1")]


def test_id_with_nul_is_ignored_and_empty_id_clears() -> None:
    events = parse_sse(b"id: 3\ndata: a\n\nid: x\x00y\ndata: b\n\nid\ndata: c\n\n")
    assert [e.id for e in events] == ["3", "3", ""]


def test_retry_takes_digits_only() -> None:
    events = parse_sse(b"retry: soon\ndata: a\n\nretry: 20\ndata: b\n\n")
    assert [e.retry for e in events] == [None, 20]


def test_blank_lines_without_data_dispatch_nothing() -> None:
    assert parse_sse(b"\n\n\r\n: ping\n\nevent: x\n\n") == []


def test_unknown_fields_are_ignored() -> None:
    assert parse_sse(b"foo: bar\ndata: ok\n\n") == [ServerSentEvent("ok")]


def test_leading_bom_is_dropped_even_when_split() -> None:
    stream = b"\xef\xbb\xbfdata: x\n\n"
    for split in range(len(stream)):
        assert feed_all([stream[:split], stream[split:]]) == [ServerSentEvent("x")]


def test_utf8_split_inside_a_character() -> None:
    stream = "data: é\u2028☕\n\n".encode()
    for split in range(len(stream)):
        assert feed_all([stream[:split], stream[split:]]) == [ServerSentEvent("é\u2028☕")]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert parse_sse(b"data: \xff\n\n") == [ServerSentEvent("\ufffd")]


def test_close_twice_is_harmless() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: x")
    assert decoder.close() == [ServerSentEvent("x")]
    assert decoder.close() == []


# --- the batch fast path ------------------------------------------------------

OPENAI_LIKE = (
    b"".join(
        b"data: " + json.dumps({"i": i, "t": TRICKY}, ensure_ascii=False).encode() + b"\n\n"
        for i in range(20)
    )
    + b"data: [DONE]\n\n"
)


def test_batch_of_plain_data_events() -> None:
    decoder = SSEDecoder()
    decoder.feed_batch(b": warm-up comment\n\n")
    result = decoder.feed_batch(OPENAI_LIKE)
    assert isinstance(result, DataBatch)
    assert result.count == 21
    assert json.loads(result.json_array().replace(b"[DONE]", b"null"))[:2] == [
        {"i": 0, "t": TRICKY},
        {"i": 1, "t": TRICKY},
    ]
    assert result.last() == b"[DONE]"
    shorter = result.without_last()
    assert shorter is not None and shorter.count == 20


def test_batch_path_matches_event_path_at_every_split() -> None:
    for split in range(1, len(OPENAI_LIKE)):
        chunks = [OPENAI_LIKE[:split], OPENAI_LIKE[split:]]
        assert feed_all(chunks, batch=True) == feed_all(chunks), f"split at {split}"


def test_batch_path_falls_back_for_anything_else() -> None:
    for split in range(1, len(SAMPLE)):
        chunks = [SAMPLE[:split], SAMPLE[split:]]
        assert [e.data for e in feed_all(chunks, batch=True)] == [e.data for e in EXPECTED]


def test_batch_path_with_mixed_shapes_in_sequence() -> None:
    stream = OPENAI_LIKE[:-14] + b'event: error\ndata: {"x":1}\n\n' + OPENAI_LIKE
    for size in (1, 5, 64, 333, len(stream)):
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        assert [e.data for e in feed_all(chunks, batch=True)] == [e.data for e in feed_all(chunks)]
