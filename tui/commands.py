"""The session subcommands: sessions, export, import, attach, fork. None takes a lease.

What they print about a session (its title, folder, a snippet of its text) or a
folder (a trusted one's name, what its project files would change) shows its
control characters (`runtime.visible`); their JSON escapes them
(`runtime.visible_json`)."""

from __future__ import annotations

import sys
import time

from runtime import (
    BastionError,
    ReadOnlyStore,
    SessionHit,
    SessionRow,
    typed_prefix,
    visible,
    visible_json,
)
from tui.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError, error_line

TYPE_CHECKING = False  # (typing costs the session commands ~5 ms to import)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from runtime import Harness, SearchHit

# The harness (asyncio, the store's threads, the driver) is imported only by the
# commands that write or need a whole session: listing and searching read the store
# with `ReadOnlyStore`, one sqlite3 connection (issue 28).


async def _id(harness: Harness, raw: str) -> str:
    """The session `raw` names: its full id or any unique start of it (as git takes
    commit ids); a BastionError of one line when it names none, or several."""
    return await harness.resolve_id(raw)


def _run(coro: Any) -> int:
    import asyncio

    try:
        return int(asyncio.run(coro))
    except BastionError as exc:
        error_line(str(exc))
        return EXIT_USAGE


def _readonly(read: Callable[[ReadOnlyStore], int]) -> int | None:
    """`read(store)` on the store opened read-only, or None when it cannot be (missing,
    another schema version): the caller then goes through the harness."""
    store = ReadOnlyStore.open()
    if store is None:
        return None
    try:
        with store:
            return read(store)
    except BastionError as exc:
        error_line(str(exc))
        return EXIT_USAGE


def _bad_id(raw: str | None) -> int | None:
    """EXIT_USAGE, with its one line said, when `raw` cannot name a session (neither a
    whole id nor 4+ of its first digits): checked before any store is opened or made."""
    if raw is None:
        return None
    try:
        typed_prefix(raw)
    except BastionError as exc:
        error_line(str(exc))
        return EXIT_USAGE
    return None


def sessions(opts: Any) -> int:
    bad = _bad_id(opts.id) if opts.action == "rm" else None
    if bad is not None:
        return bad
    if opts.action != "rm":
        code = _readonly(lambda store: _look(store, opts))
        if code is not None:
            return code
    return _run(_sessions(opts))


def _look(store: ReadOnlyStore, opts: Any) -> int:
    """`sessions` and `sessions search` on the store opened read-only."""
    import os

    if opts.action == "search":
        _print_hits(store.search(opts.query), opts.json)
    else:
        _print_list(store.list_conversations(None if opts.all else os.getcwd()), opts.json)
    return EXIT_OK


async def _sessions(opts: Any) -> int:
    import os

    from runtime import Harness

    harness = await Harness.open()
    try:
        if opts.action == "rm":
            conv_id = await _id(harness, opts.id)
            await harness.delete_conversation(conv_id, force=getattr(opts, "force", False))
            print(f"removed {conv_id}", file=sys.stderr)
            return EXIT_OK
        if opts.action == "search":
            hits = await harness.search(opts.query)
            _print_hits(
                [SessionHit(SessionRow.of(h.conversation), *_rest(h)) for h in hits], opts.json
            )
            return EXIT_OK
        found = await harness.list_conversations(None if opts.all else os.getcwd())
        _print_list([SessionRow.of(c) for c in found], opts.json)
        return EXIT_OK
    finally:
        await harness.close()


def _print_list(found: list[SessionRow], as_json: bool) -> None:
    if as_json:
        rows = [
            {
                "id": c.id,
                "title": c.title,
                "cwd": c.cwd,
                "created_at": c.created_at,
                "updated_at": c.updated_at,
                "model": c.model,
            }
            for c in found
        ]
        print(visible_json(rows))
    elif not found:
        print(
            "no conversations here (bastion sessions --all lists every directory)",
            file=sys.stderr,
        )
    else:
        for c in found:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.updated_at))
            title = visible(c.title, lines=False) if c.title else "(untitled)"
            print(f"{c.id}  {when}  {title}")


def age(seconds: float) -> str:
    """How long ago, for people: 45s, 12m, 3h, 9d."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def _rest(hit: SearchHit) -> tuple[str, str, float, tuple[tuple[str, bool], ...]]:
    return hit.entry_id, hit.entry_kind, hit.score, hit.spans


def _print_hits(hits: list[SessionHit], as_json: bool) -> None:
    """Each hit: session id, age, title and cwd, then its snippet with the matches marked
    (bold on a terminal, [brackets] otherwise); best first."""
    now = time.time()
    if as_json:
        rows = [
            {
                "id": h.conversation.id,
                "title": h.conversation.title,
                "cwd": h.conversation.cwd,
                "updated_at": h.conversation.updated_at,
                "age": age(now - h.conversation.updated_at),
                "entry_id": h.entry_id,
                "kind": h.entry_kind,
                "score": h.score,
                "snippet": h.marked(),
                "spans": [list(s) for s in h.spans],
            }
            for h in hits
        ]
        print(visible_json(rows))
        return
    if not hits:
        print("no conversation matches", file=sys.stderr)
        return
    before, after = ("\x1b[1m", "\x1b[0m") if sys.stdout.isatty() else ("[", "]")
    for h in hits:
        c = h.conversation
        title = visible(c.title, lines=False) if c.title else "(untitled)"
        cwd = visible(c.cwd, lines=False)
        print(f"{c.id}  {age(now - c.updated_at):>4} ago  {title}  ({cwd})")
        # (the bold is bastion's; the text between is shown, never obeyed)
        snippet = "".join(
            f"{before}{visible(t, lines=False)}{after}" if hit else visible(t, lines=False)
            for t, hit in h.spans
        )
        print(f"    {snippet}")


def export(opts: Any) -> int:
    bad = _bad_id(opts.id)
    if bad is not None:
        return bad
    if opts.output:
        _check_output(opts.output)
    code = _readonly(lambda store: _export_committed(store, opts))
    return code if code is not None else _run(_export(opts))


def _export_committed(store: ReadOnlyStore, opts: Any) -> int:
    """`bastion export` on the store opened read-only: what is committed, which is all
    a process driving nothing sees."""
    from runtime import committed_export, committed_view, export_markdown

    conv_id = store.resolve_id(opts.id)
    if opts.format == "json":
        doc = store.read(lambda db: committed_export(db, conv_id))
        text = visible_json(doc, indent=2) + "\n"
    else:
        text = export_markdown(store.read(lambda db: committed_view(db, conv_id)))
    _emit(opts.output, text)
    return EXIT_OK


def _emit(output: str | None, text: str) -> None:
    if output:
        _write_output(output, text)
    elif sys.stdout.isatty():  # read on a terminal: its control characters shown
        sys.stdout.write(visible(text))
    else:  # a file or a pipe: the transcript as it is
        sys.stdout.write(text)


def _check_output(path: str) -> None:
    """Refuse an -o FILE whose directory is missing before the store is opened."""
    from pathlib import Path

    parent = Path(path).parent
    if not parent.is_dir():
        problem = "is not a directory" if parent.exists() else "does not exist"
        raise UsageError(
            f"cannot write {path}: the directory {parent} {problem} "
            "(create it, or pick another -o FILE)"
        )


def _write_output(path: str, text: str) -> None:
    """`text` to FILE: a new file 0600 (a transcript is private), an existing one in
    its own mode (`tui.files.write_private`)."""
    from pathlib import Path

    from tui.files import write_private

    try:
        write_private(Path(path), text)
    except OSError as exc:
        raise UsageError(
            f"cannot write {path}: {exc.strerror or exc} (pick another -o FILE)"
        ) from None


async def _export(opts: Any) -> int:
    from runtime import Harness

    harness = await Harness.open()
    try:
        conv_id = await _id(harness, opts.id)
        if opts.format == "json":
            doc = await harness.export(conv_id)
            text = visible_json(doc, indent=2) + "\n"
        else:
            from runtime import export_markdown

            text = export_markdown(await harness.snapshot(conv_id))
    finally:
        await harness.close()
    _emit(opts.output, text)
    return EXIT_OK


def import_(opts: Any) -> int:
    return _run(_import(opts.file, opts.cwd))


def compact(opts: Any) -> int:
    bad = _bad_id(opts.id)
    return bad if bad is not None else _run(_compact(opts))


async def _compact(opts: Any) -> int:
    """`bastion compact ID [INSTRUCTIONS]`: one summary committed, or a line saying why not."""
    import os

    from runtime import Harness, load_config, model_resolver

    config = load_config(os.getcwd())
    harness = await Harness.open(resolve_model=model_resolver(config), config=config)
    try:
        conv_id = await _id(harness, opts.id)
        entry = await harness.compact(conv_id, opts.instructions)
    finally:
        await harness.close()
    if entry is None:
        print(f"{conv_id}: nothing to compact yet (no whole earlier turn)", file=sys.stderr)
        return EXIT_OK
    data = entry.data
    print(
        f"{conv_id}: compacted {data['compacted']} entries (positions {data['from']}-"
        f"{data['through']}) into a summary of {len(entry.text)} characters; "
        "the originals are kept",
        file=sys.stderr,
    )
    return EXIT_OK


#: The largest export `bastion import` reads.
MAX_IMPORT_BYTES = 512 * 1024 * 1024


def _read_import(path: str) -> str:
    """The export's text: stdin for "-", else a regular file (never a FIFO or device,
    which could block or never end) of at most MAX_IMPORT_BYTES."""
    import os
    import stat

    if path == "-":
        return sys.stdin.read()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UsageError(f"cannot read {path}: it is not a regular file")
            if st.st_size > MAX_IMPORT_BYTES:
                raise UsageError(
                    f"cannot read {path}: {st.st_size:,} bytes is over the "
                    f"{MAX_IMPORT_BYTES // 2**20} MiB an export may be"
                )
            with os.fdopen(os.dup(fd), "rb") as f:
                return f.read(MAX_IMPORT_BYTES + 1).decode("utf-8")
        finally:
            os.close(fd)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(
            f"cannot read {path}: {reason} (give a file from `bastion export`)"
        ) from None


def _import_cwd(raw: str | None) -> str:
    import os

    folder = os.path.realpath(raw or os.getcwd())
    if not os.path.isdir(folder):
        raise UsageError(f"--cwd {raw}: not a folder (give the folder the session works in)")
    return folder


async def _import(path: str, cwd: str | None = None) -> int:
    from runtime import Harness

    folder = _import_cwd(cwd)
    text = _read_import(path)
    harness = await Harness.open()
    try:
        conv = await harness.import_conversation(text, cwd=folder)
    finally:
        await harness.close()
    print(
        f"imported {path} as a new session in {folder}; resume with `bastion -r {conv.id}`",
        file=sys.stderr,
    )
    print(conv.id)
    return EXIT_OK


def trust(opts: Any) -> int:
    """`bastion trust [DIR] [--revoke | --list]`: record (or forget) the user's trust of a
    folder, saying what its project files will change."""
    try:
        return _trust(opts)
    except BastionError as exc:
        error_line(str(exc))
        return EXIT_USAGE


def _trust(opts: Any) -> int:
    import os

    from runtime import TrustState, project_preview, recorded_trust, set_trust

    if opts.list:
        decisions = recorded_trust()
        if not decisions:
            print("no folder is trusted yet (bastion trust DIR trusts one)", file=sys.stderr)
        for folder, state in sorted(decisions.items()):
            print(f"{state.value:<10} {visible(folder, lines=False)}")
        return EXIT_OK
    folder = os.path.realpath(opts.dir)
    if not os.path.isdir(folder):
        raise UsageError(f"{opts.dir}: not a folder (give the folder to trust)")
    if opts.revoke:
        set_trust(folder, TrustState.UNKNOWN)
        shown = visible(folder, lines=False)
        print(f"{shown}: forgotten; its project files are ignored again", file=sys.stderr)
        return EXIT_OK
    changes = project_preview(folder)
    set_trust(folder, TrustState.TRUSTED)
    print(
        f"trusted {visible(folder, lines=False)}: its project files apply to bastion run in "
        "it or beneath it",
        file=sys.stderr,
    )
    for line in changes or ["(it has no project files yet)"]:  # (the repository's words)
        print(f"  {visible(line, lines=False)}", file=sys.stderr)
    return EXIT_OK


def fork(opts: Any) -> int:
    bad = _bad_id(opts.id)
    if bad is not None:
        return bad
    return _run(_fork(opts.id, _entry_id(opts.at) if opts.at else None))


def _entry_id(raw: str) -> str:
    from runtime import parse_uuid

    try:
        return parse_uuid(raw)
    except ValueError:
        raise UsageError(
            f"--at {raw!r} is not an entry id (entry ids are in `bastion export ID`)"
        ) from None


async def _fork(raw_id: str, at_entry: str | None) -> int:
    from runtime import Harness

    harness = await Harness.open()
    try:
        conv_id = await _id(harness, raw_id)
        forked = await harness.fork(conv_id, at_entry)
    finally:
        await harness.close()
    where = f"at entry {at_entry}" if at_entry else "with all of its history"
    print(f"forked {conv_id} {where}; resume with `bastion -r {forked.id}`", file=sys.stderr)
    print(forked.id)
    return EXIT_OK


def attach(opts: Any) -> int:
    """The app on a terminal (stdin and stdout both), else (or with --plain) line mode."""
    bad = _bad_id(opts.id)
    if bad is not None:
        return bad
    try:
        conv_id = _found(opts.id)
    except BastionError as exc:
        error_line(str(exc))
        return EXIT_USAGE
    try:
        if not opts.plain and sys.stdin.isatty() and sys.stdout.isatty():
            from tui.attach_app import run_app

            return _run_sync(lambda: run_app(conv_id))
        from tui.attach import attach as attach_session

        return _run(attach_session(conv_id))
    except KeyboardInterrupt:
        return EXIT_OK


def _found(raw: str) -> str:
    """The id `raw` names, read from the store read-only when it can be."""
    store = ReadOnlyStore.open()
    if store is not None:
        with store:
            return store.resolve_id(raw)
    import asyncio

    return asyncio.run(_found_in_harness(raw))


async def _found_in_harness(raw: str) -> str:
    from runtime import Harness

    harness = await Harness.open()
    try:
        return await _id(harness, raw)
    finally:
        await harness.close()


def _run_sync(call: Any) -> int:
    try:
        return int(call())
    except BastionError as exc:
        error_line(str(exc))
        return EXIT_USAGE


def mcp(opts: Any) -> int:
    """`bastion mcp login NAME` / `bastion mcp logout NAME` (runtime.mcp.oauth)."""
    import asyncio
    import os
    import webbrowser

    from runtime import LoginFailed, default_home, load_config, mcp_login, mcp_logout

    try:
        config = load_config(os.getcwd())
        if opts.action == "logout":
            gone = mcp_logout(opts.name, default_home())
            said = "its sign-in was deleted" if gone else "it had no stored sign-in"
            print(f"MCP server {opts.name}: {said}", file=sys.stderr)
            return EXIT_OK

        def say(line: str) -> None:
            print(visible(line, lines=False), file=sys.stderr, flush=True)

        tools = asyncio.run(
            mcp_login(config.mcp_servers, opts.name, default_home(), webbrowser.open, say)
        )
    except LoginFailed as exc:
        error_line(str(exc))
        return EXIT_FAILED
    except BastionError as exc:
        error_line(str(exc))
        return EXIT_USAGE
    print(f"signed in to MCP server {opts.name}: {tools} tools", file=sys.stderr)
    return EXIT_OK
