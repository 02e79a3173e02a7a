"""The session commands' usual forms, read without argparse.

`bastion sessions`, `sessions search Q`, `sessions rm ID`, `export ID` and
`fork ID` answer from the store in a few milliseconds; argparse and the regular
expressions it loads would cost as much again (issue 28). `quick_parse` reads the
plain forms of these command lines into the same attributes argparse gives, and
returns None for anything else (`--help`, an abbreviated or unknown flag, `--x=y`,
a missing or extra argument), which `tui.parsers` then reads, with its help and
its errors. tests/test_quickargs.py checks the two agree on every command line
made from a pool of words.
"""

from __future__ import annotations

TYPE_CHECKING = False  # (typing costs this path ~5 ms to import)
if TYPE_CHECKING:
    from typing import Any

    Flags = dict[str, Any]


class Namespace:
    """What argparse's Namespace is to the commands: the options as attributes."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def __repr__(self) -> str:
        return f"Namespace({self.__dict__!r})"


def _plain(word: str) -> bool:
    """A word argparse takes as a value (not an option, not empty)."""
    return bool(word) and not word.startswith("-")


def _read(
    words: list[str], switches: dict[str, str], options: dict[str, tuple[str, tuple[str, ...]]]
) -> tuple[Flags, list[str]] | None:
    """`words` as switches (store_true), options with one value (choices: any when
    empty) and positionals; None at anything else."""
    found: Flags = {}
    positionals: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in switches:
            found[switches[word]] = True
        elif word in options:
            dest, choices = options[word]
            if i + 1 == len(words) or not _plain(words[i + 1]):
                return None
            if choices and words[i + 1] not in choices:
                return None
            found[dest] = words[i + 1]
            i += 1
        elif _plain(word):
            positionals.append(word)
        else:
            return None
        i += 1
    return found, positionals


def _sessions(words: list[str]) -> Namespace | None:
    at = next((i for i, w in enumerate(words) if w in ("search", "rm") or _plain(w)), len(words))
    head = _read(words[:at], {"--json": "json", "--all": "all"}, {})
    if head is None or head[1]:
        return None
    values: Flags = {"json": False, "all": False, "action": None, **head[0]}
    if at == len(words):
        return Namespace(values)
    action, rest = words[at], words[at + 1 :]
    if action == "search":
        tail = _read(rest, {"--json": "json"}, {})
        if tail is None or len(tail[1]) != 1:
            return None
        return Namespace({**values, **tail[0], "action": "search", "query": tail[1][0]})
    if action == "rm":
        tail = _read(rest, {"--force": "force"}, {})
        if tail is None or len(tail[1]) != 1:
            return None
        return Namespace({**values, "action": "rm", "id": tail[1][0], "force": False, **tail[0]})
    return None


def _one_id(
    words: list[str], defaults: Flags, options: dict[str, tuple[str, tuple[str, ...]]]
) -> Namespace | None:
    read = _read(words, {}, options)
    if read is None or len(read[1]) != 1:
        return None
    return Namespace({"id": read[1][0], **defaults, **read[0]})


def quick_parse(name: str, words: list[str]) -> Namespace | None:
    """The options of `bastion NAME WORDS...`, or None when argparse should read them."""
    if name == "sessions":
        return _sessions(words)
    if name == "export":
        output = ("output", ())
        fmt = ("format", ("json", "markdown"))
        options = {"--format": fmt, "-o": output, "--output": output}
        return _one_id(words, {"format": "json", "output": None}, options)
    if name == "fork":
        return _one_id(words, {"at": None}, {"--at": ("at", ())})
    return None
