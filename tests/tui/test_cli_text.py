"""The command line refuses text that is not UTF-8 before anything is opened."""

from __future__ import annotations

import io
import os

import pytest

from tui.cli import EXIT_USAGE, UsageError, main, require_utf8, utf8_stdin


def argv_bytes(raw: bytes) -> str:
    """What Python makes of a command-line argument holding these bytes."""
    return os.fsdecode(raw)


@pytest.mark.parametrize(
    ("raw", "where"),
    [(b"caf\xc3\xa9 \xff", "byte 0xff at offset 6"), (b"\xfe", "byte 0xfe at offset 0")],
)
def test_an_argument_that_is_not_utf8_names_the_byte(raw: bytes, where: str) -> None:
    with pytest.raises(UsageError) as caught:
        require_utf8(argv_bytes(raw), "the prompt")
    assert str(caught.value).startswith(f"the prompt is not valid UTF-8 ({where})")


def test_utf8_text_passes() -> None:
    require_utf8("café ☕ \u2028 ok", "the prompt")  # no UsageError: all of it is UTF-8
    with pytest.raises(
        UsageError, match=r"the prompt is not valid UTF-8 \(byte 0xff at offset 10\)"
    ):
        require_utf8("café ☕ \udcff", "the prompt")  # the same text, one byte that is not


def test_stdin_is_decoded_strictly() -> None:
    class Stdin:
        def __init__(self, data: bytes) -> None:
            self.buffer = io.BytesIO(data)

    assert utf8_stdin(Stdin("héllo\n".encode())).read() == "héllo\n"
    with pytest.raises(UsageError, match=r"stdin is not valid UTF-8 \(byte 0xe9 at offset 1\)"):
        utf8_stdin(Stdin("héllo".encode("latin-1")))


def test_main_refuses_before_opening_anything(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("BASTION_HOME", str(tmp_path / "home"))
    assert main(["-p", argv_bytes(b"hi \xff")]) == EXIT_USAGE
    assert main(["-p", "hi", "--request-key", argv_bytes(b"\xff")]) == EXIT_USAGE
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" is not valid")[0] for line in lines] == [
        "bastion: the prompt",
        "bastion: --request-key",
    ]
    assert not (tmp_path / "home").exists()
