"""Reading the files bastion takes settings and instructions from, as tool reads are read.

Two kinds of file, two rules:

- a *project* file (`.bastion/config.toml`, `.bastion/settings.toml`, AGENTS.md in
  the repository) is untrusted input: it is opened from a pinned directory
  descriptor segment by segment (`tools.workspace`), so a symlink anywhere on
  the way refuses, and only a regular file is read (a FIFO or device is opened
  non-blocking and refused, never waited on);
- a *user* file (`$XDG_CONFIG_HOME/bastion/…`) may be a symlink the user made,
  but it too must end at a regular file, opened non-blocking.

Both are read up to a cap (`MAX_FILE_BYTES`, 256 KiB): a config file over it is
refused in one line, an instruction file is cut with a note. Parsed TOML and
JSON are held to `MAX_DEPTH` levels of nesting: deeper input is one line, never
a RecursionError's traceback.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from runtime.model.errors import ConfigError
from tools.refusal import RefusalCode, Refused
from tools.workspace import RelPath, Workspace, WorkspaceError

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "FileBytes",
    "check_depth",
    "load_json",
    "parse_toml",
    "read_project_file",
    "read_user_file",
    "too_deep",
    "too_large",
]

#: The most bytes read from one config or instruction file.
MAX_FILE_BYTES = 256 * 1024
#: The deepest nesting of tables and arrays a config or imported file may have.
MAX_DEPTH = 64


class FileBytes(msgspec.Struct, frozen=True):
    """What was read: at most `cap` bytes of a file of `size` bytes."""

    data: bytes
    size: int

    @property
    def cut(self) -> bool:
        return len(self.data) < self.size


class UnsafeFile(ConfigError):
    """A settings or instruction file that is not a regular file reached without links."""

    code = "unsafe_file"


def _read_fd(fd: int, size: int, cap: int) -> FileBytes:
    chunks: list[bytes] = []
    left = cap
    while left > 0:
        chunk = os.read(fd, min(left, 65536))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    return FileBytes(data, max(size, len(data)))


def read_project_file(
    root: str | os.PathLike[str], rel: str, cap: int = MAX_FILE_BYTES
) -> FileBytes | None:
    """`rel` under `root`, pinned: None when it does not exist; UnsafeFile when a symlink
    is on the way or it is not a regular file; ConfigError when it cannot be read."""
    shown = os.path.join(os.fspath(root), rel)
    try:
        ws = Workspace.open(root)
    except WorkspaceError as exc:
        raise ConfigError(str(exc), hint="check that the folder exists") from None
    try:
        fd, st = ws.open_file(RelPath(tuple(p for p in rel.split("/") if p)))
    except Refused as exc:
        if exc.refusal.code is RefusalCode.NOT_FOUND:
            return None
        raise UnsafeFile(
            f"cannot read {shown}: {exc.refusal.message}",
            hint="bastion reads project files only as regular files inside the folder, "
            "never through a symlink",
        ) from None
    finally:
        ws.close()
    try:
        return _read_fd(fd, st.st_size, cap)
    except OSError as exc:
        raise ConfigError(
            f"cannot read {shown}: {exc.strerror or exc}", hint="check its permissions"
        ) from None
    finally:
        os.close(fd)


def read_user_file(path: Path, cap: int = MAX_FILE_BYTES) -> FileBytes | None:
    """A file in the user's config dir (a symlink the user made is followed): None when
    it does not exist; UnsafeFile when it is a FIFO, device or folder."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}",
            hint="fix its permissions or remove it",
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise UnsafeFile(
                f"cannot read {path}: it is {what}",
                hint="make it a regular file, or remove it",
            )
        return _read_fd(fd, st.st_size, cap)
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}", hint="fix its permissions or remove it"
        ) from None
    finally:
        os.close(fd)


def too_large(path: str | Path, size: int, cap: int = MAX_FILE_BYTES) -> ConfigError:
    return ConfigError(
        f"{path} is {size:,} bytes, over the {cap // 1024} KiB bastion reads of a settings file",
        hint="keep it small (it holds settings, not data), or remove it",
    )


def check_depth(data: Any, where: str, limit: int = MAX_DEPTH) -> None:
    """ConfigError when `data` nests tables or arrays deeper than `limit` (iterative)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            raise ConfigError(
                f"{where} nests tables or arrays more than {limit} levels deep",
                hint="flatten it; bastion refuses deeper input rather than recurse",
            )
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def parse_toml(raw: bytes, path: str | Path) -> dict[str, Any]:
    """A TOML document as data; ConfigError (one line) for bad UTF-8, bad TOML or depth."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, raw, exc.start) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})", hint="fix or remove that file") from None
    except RecursionError:
        raise too_deep(path) from None
    check_depth(data, str(path))
    return data


_BARE_KEY = re.compile(r"\s*([A-Za-z0-9_.-]+)\s*=")


def _not_utf8(path: str | Path, raw: bytes, at: int) -> ConfigError:
    """Name the bad byte, its line and, when the line is `key = ...`, the key."""
    line = raw.count(b"\n", 0, at) + 1
    start = raw.rfind(b"\n", 0, at) + 1
    key = _BARE_KEY.match(raw[start:at].decode("utf-8", "replace"))
    where = f"line {line}, in the value of {key.group(1)}" if key else f"line {line}"
    return ConfigError(
        f"{path} is not UTF-8 text (byte 0x{raw[at]:02x} on {where})", hint="save it as UTF-8"
    )


def load_json(text: str | bytes, where: str) -> Any:
    """JSON as data; ConfigError (one line) for bad JSON or nesting past MAX_DEPTH."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise too_deep(where) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where} is not valid JSON ({exc})", hint="check the file") from None
    check_depth(data, where)
    return data


def too_deep(where: str | Path) -> ConfigError:
    return ConfigError(
        f"{where} nests tables or arrays more than {MAX_DEPTH} levels deep",
        hint="flatten it; bastion refuses deeper input rather than recurse",
    )
