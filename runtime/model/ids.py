"""Identifiers: UUIDv7, time-ordered so ids sort the way they were made."""

from __future__ import annotations

import os
import threading
import time

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def uuid7() -> str:
    """A UUIDv7 string (RFC 9562): 48-bit ms time, 12-bit counter, 62 random bits.

    The counter keeps ids made in the same millisecond in creation order.
    """
    global _last_ms, _counter
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            _counter += 1
            if _counter > 0xFFF:
                _last_ms += 1
                _counter = 0
            ms = _last_ms
        else:
            _last_ms = ms
            _counter = int.from_bytes(os.urandom(2), "big") & 0x3FF
        counter = _counter
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= counter << 64
    value |= 0b10 << 62
    value |= rand
    # (formatted here: the uuid module costs ~4 ms to import, platform and all)
    digits = f"{value:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def uuid7_time(text: str) -> float | None:
    """When the UUIDv7 `text` was made, in epoch seconds; None if it is not a UUIDv7."""
    import uuid

    try:
        value = uuid.UUID(text)
    except ValueError:
        return None
    if value.version != 7:
        return None
    return (value.int >> 80) / 1000.0


def parse_uuid(text: str) -> str:
    """The canonical form of a UUID string; raises ValueError if it is not one."""
    import uuid

    return str(uuid.UUID(text.strip()))


def now() -> float:
    """Wall-clock seconds, as every record's time is stored."""
    import time

    return time.time()
