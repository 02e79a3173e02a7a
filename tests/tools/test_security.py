"""The security corpus: every case is a clear refusal or a bounded result, and
nothing outside the workspace is ever read, written or named."""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from runtime.testing.waiting import gone, until
from tools import Access, Limits

from .conftest import code

SECRETS = ("SECRET-KEY-MATERIAL", "SECRET-PASSWD")


def leaks(result: object, outside: pathlib.Path) -> bool:
    text = str(result.to_dict()) + result.model_text()  # type: ignore[attr-defined]
    return any(s in text for s in SECRETS) or str(outside) in text


# -- links out of the workspace ---------------------------------------------------


@pytest.fixture
def linked(root: pathlib.Path, outside: pathlib.Path) -> pathlib.Path:
    """File and directory links out of the workspace at several depths."""
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "real.txt").write_text("fine\n")
    (root / "passwd").symlink_to(outside / "passwd")
    (root / "ssh").symlink_to(outside / ".ssh")
    (root / "a" / "ssh").symlink_to(outside / ".ssh")
    (root / "a" / "b" / "up").symlink_to(outside)
    (root / "a" / "b" / "c" / "key").symlink_to(outside / ".ssh" / "id_rsa")
    (root / "a" / "b" / "c" / "rel").symlink_to("../../../../outside/passwd")
    return root


LINKED_FILES = [
    "passwd",
    "ssh/id_rsa",
    "a/ssh/id_rsa",
    "a/b/up/passwd",
    "a/b/up/.ssh/id_rsa",
    "a/b/c/key",
    "a/b/c/rel",
]


@pytest.mark.parametrize("path", LINKED_FILES)
async def test_read_through_link_refuses(call, linked, outside, path):
    result = await call("read_file", path=path)
    assert code(result) == "FORBIDDEN"
    assert "symbolic link" in result.refusal.message
    assert not leaks(result, outside)


@pytest.mark.parametrize("path", [*LINKED_FILES, "ssh/new", "a/b/up/new.txt"])
async def test_write_through_link_refuses(call, linked, outside, path):
    before = sorted(p.name for p in outside.rglob("*"))
    result = await call("write_file", path=path, content="pwned\n", overwrite=True)
    assert code(result) == "FORBIDDEN"
    assert sorted(p.name for p in outside.rglob("*")) == before
    assert (outside / "passwd").read_text() == "root:SECRET-PASSWD\n"
    assert (outside / ".ssh" / "id_rsa").read_text() == "SECRET-KEY-MATERIAL\n"


@pytest.mark.parametrize("path", ["passwd", "ssh/id_rsa", "a/b/c/key"])
async def test_edit_through_link_refuses(call, linked, outside, path):
    result = await call("edit_file", path=path, old_text="SECRET", new_text="x")
    assert code(result) == "FORBIDDEN"
    assert (outside / "passwd").read_text() == "root:SECRET-PASSWD\n"


@pytest.mark.parametrize("path", ["ssh", "a/ssh", "a/b/up", "a/b/up/.ssh"])
async def test_list_through_link_refuses(call, linked, outside, path):
    result = await call("list_directory", path=path)
    assert code(result) == "FORBIDDEN"
    assert not leaks(result, outside)


async def test_walking_tools_never_follow_links(call, linked, outside):
    listing = await call("list_directory", path="a/b/c")
    kinds = {e["name"]: e["type"] for e in listing.data["entries"]}
    assert kinds == {"real.txt": "file", "key": "symlink", "rel": "symlink"}
    found = await call("glob", pattern="**/*")
    assert found.data["files"] == ["a/b/c/real.txt"]
    search = await call("search_files", pattern="SECRET")
    assert search.ok and search.data["matches"] == []
    assert search.data["coverage"]["complete"]
    for path in ("ssh", "a/b/up"):
        result = await call("search_files", pattern="SECRET", path=path)
        assert code(result) == "FORBIDDEN"
        assert not leaks(result, outside)
    assert not leaks(found, outside) and not leaks(listing, outside)


async def test_run_command_cwd_through_link_refuses(call, linked, outside):
    result = await call("run_command", command="cat id_rsa", cwd="ssh")
    assert code(result) == "FORBIDDEN"
    assert not leaks(result, outside)


# -- a directory swapped for a link between authorization and open ----------------


def swapper(root: pathlib.Path, outside: pathlib.Path, target: str):
    """An authorize_path hook that swaps ``target`` for a link out when it is asked."""

    def authorize(path: str, access: Access) -> bool:
        if path == target and not (root / target).is_symlink():
            (root / target).rename(root / f"{target}.moved")
            (root / target).symlink_to(outside / ".ssh")
        return True

    return authorize


async def test_swap_between_authorize_and_open_read(call, root, outside):
    (root / "sub").mkdir()
    (root / "sub" / "id_rsa").write_text("harmless\n")
    result = await call("read_file", path="sub/id_rsa", authorize=swapper(root, outside, "sub"))
    assert code(result) == "FORBIDDEN"
    assert (root / "sub").is_symlink()
    assert not leaks(result, outside)


async def test_swap_between_authorize_and_open_write(call, root, outside):
    (root / "sub").mkdir()
    result = await call(
        "write_file",
        path="sub/id_rsa",
        content="pwned",
        overwrite=True,
        authorize=swapper(root, outside, "sub"),
    )
    assert code(result) == "FORBIDDEN"
    assert (outside / ".ssh" / "id_rsa").read_text() == "SECRET-KEY-MATERIAL\n"


async def test_swap_between_authorize_and_open_edit(call, root, outside):
    (root / "sub").mkdir()
    (root / "sub" / "id_rsa").write_text("SECRET-KEY-MATERIAL\n")
    result = await call(
        "edit_file",
        path="sub/id_rsa",
        old_text="SECRET",
        new_text="x",
        authorize=swapper(root, outside, "sub"),
    )
    assert code(result) == "FORBIDDEN"
    assert (outside / ".ssh" / "id_rsa").read_text() == "SECRET-KEY-MATERIAL\n"


async def test_swap_during_search_walk(call, root, outside):
    (root / "sub").mkdir()
    (root / "sub" / "x.txt").write_text("SECRET-ish but mine\n")
    result = await call(
        "search_files", pattern="SECRET-KEY", authorize=swapper(root, outside, "sub")
    )
    assert result.ok
    assert result.data["matches"] == []
    assert not leaks(result, outside)


async def test_parent_swapped_after_open_is_caught_before_rename(ctx, root, outside, monkeypatch):
    """Identity is re-checked before the write lands: if the directory we hold is no
    longer the one the path names, the write is refused and nothing lands."""
    from tools import write
    from tools.tooldef import guarded

    (root / "sub").mkdir()
    real_verify = write.verify_still

    def swap_then_verify(ws, parent_fd, rel, expected):
        (root / "sub").rename(root / "elsewhere")
        (root / "sub").mkdir()
        return real_verify(ws, parent_fd, rel, expected)

    monkeypatch.setattr(write, "verify_still", swap_then_verify)
    result = guarded("write_file", write.write_file, ctx, {"path": "sub/f.txt", "content": "x"})
    assert code(result) == "CONFLICT"
    assert not (root / "sub" / "f.txt").exists()
    assert not (root / "elsewhere" / "f.txt").exists()
    assert [p.name for p in (root / "elsewhere").iterdir()] == []


# -- textual path rules -------------------------------------------------------------


@pytest.mark.parametrize("path", ["../outside/passwd", "a/../../outside/passwd", "..", "a/.."])
async def test_dotdot_refused(call, root, outside, path):
    for tool, extra in (
        ("read_file", {}),
        ("write_file", {"content": "x"}),
        ("list_directory", {}),
        ("search_files", {"pattern": "x"}),
    ):
        result = await call(tool, path=path, **extra)
        assert code(result) == "INVALID_ARGUMENT", (tool, path)
        assert "'..'" in result.refusal.message
    assert (outside / "passwd").read_text() == "root:SECRET-PASSWD\n"


async def test_absolute_inside_workspace_names_relative_path(call, root):
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("x\n")
    result = await call("read_file", path=str(root / "src" / "a.py"))
    assert code(result) == "INVALID_ARGUMENT"
    assert "'src/a.py'" in result.refusal.hint


async def test_absolute_outside_workspace_refused(call, outside):
    result = await call("read_file", path=str(outside / "passwd"))
    assert code(result) == "INVALID_ARGUMENT"
    assert not leaks(result, outside)
    result = await call("read_file", path="~/.ssh/id_rsa")
    assert code(result) == "INVALID_ARGUMENT"


@pytest.mark.parametrize("path", ["a\\b", "..\\outside", "a\x00b", "x" * 256, "a/" * 2100 + "b"])
async def test_malformed_paths_refused(call, path):
    for tool, extra in (
        ("read_file", {}),
        ("write_file", {"content": "x"}),
        ("glob", {"pattern": "*"}),
        ("run_command", {"command": "true"}),
    ):
        key = "cwd" if tool == "run_command" else "path"
        args = {key: path, **extra}
        result = await call(tool, **args)
        assert code(result) == "INVALID_ARGUMENT", (tool, path[:20])


# -- special files ------------------------------------------------------------------


async def test_fifo_refused_without_hanging(call, root):
    os.mkfifo(root / "pipe")
    started = time.monotonic()
    result = await call("read_file", path="pipe")
    assert code(result) == "FORBIDDEN"
    for tool, extra in (
        ("write_file", {"content": "x", "overwrite": True}),
        ("edit_file", {"old_text": "a", "new_text": "b"}),
    ):
        assert code(await call(tool, path="pipe", **extra)) == "FORBIDDEN"
    search = await call("search_files", pattern="x")
    assert search.ok
    listing = await call("list_directory")
    assert listing.data["entries"] == [{"name": "pipe", "type": "other"}]
    assert time.monotonic() - started < 20  # an outer bound: a hang would be forever


async def test_device_through_symlink_refused(call, root):
    (root / "zero").symlink_to("/dev/zero")
    (root / "null").symlink_to("/dev/null")
    for name in ("zero", "null"):
        assert code(await call("read_file", path=name)) == "FORBIDDEN"
        assert code(await call("write_file", path=name, content="x", overwrite=True)) == "FORBIDDEN"


async def test_device_node_in_workspace_refused(call, root):
    try:
        os.mknod(root / "zero", 0o600 | 0o020000, os.makedev(1, 5))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot create a device node here: {exc}")
    assert code(await call("read_file", path="zero")) == "FORBIDDEN"
    result = await call("search_files", pattern="x")
    assert result.ok and result.data["files_searched"] == 0


async def test_socket_refused(call, root):
    import socket

    path = root / "s.sock"
    if len(str(path)) > 100:
        pytest.skip("socket path too long for AF_UNIX")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(path))
        assert code(await call("read_file", path="s.sock")) == "FORBIDDEN"
    finally:
        sock.close()


# -- case-insensitive volumes ---------------------------------------------------------


async def test_case_variant_refused_on_insensitive_lookup(call, root, monkeypatch):
    """Simulates a case-insensitive volume: 'SECRETS.txt' reaches the same inode as
    'secrets.txt' but the directory listing spells it 'secrets.txt'."""
    import tools.workspace as workspace

    (root / "secrets.txt").write_text("hidden\n")
    os.link(root / "secrets.txt", root / "SECRETS.txt")
    real_listdir = os.listdir
    monkeypatch.setattr(
        workspace.os, "listdir", lambda fd: [n for n in real_listdir(fd) if n != "SECRETS.txt"]
    )
    denied = {"secrets.txt"}
    result = await call("read_file", path="SECRETS.txt", authorize=lambda p, a: p not in denied)
    assert code(result) == "FORBIDDEN"
    assert "spelled differently" in result.refusal.message
    assert "'secrets.txt'" in result.refusal.hint


def casefold_mount(tmp_path: pathlib.Path) -> pathlib.Path | None:
    """A loop-mounted vfat (case-insensitive) volume, when this machine can make one."""
    if os.geteuid() != 0 or not shutil.which("mkfs.vfat") or not shutil.which("mount"):
        return None
    image, mount = tmp_path / "vfat.img", tmp_path / "mnt"
    mount.mkdir()
    with open(image, "wb") as fh:
        fh.truncate(8 * 1024 * 1024)
    try:
        subprocess.run(["mkfs.vfat", str(image)], check=True, capture_output=True, timeout=30)
        subprocess.run(
            ["mount", "-o", "loop", str(image), str(mount)],
            check=True,
            capture_output=True,
            timeout=30,
        )
    except (subprocess.SubprocessError, OSError):
        return None
    return mount


async def test_case_variant_refused_on_real_insensitive_mount(tmp_path, call):
    mount = casefold_mount(tmp_path)
    if mount is None:
        pytest.skip(
            "no case-insensitive volume can be made here (needs root, mkfs.vfat and "
            "loop mounts); the lookup logic is covered by the simulated test"
        )
    try:
        (mount / "secrets").mkdir()
        (mount / "secrets" / "k.txt").write_text("hidden\n")
        from tools import ToolContext, Workspace

        with Workspace.open(mount) as ws:
            ctx = ToolContext(
                ws, artifacts_dir=tmp_path, authorize_path=lambda p, a: not p.startswith("secrets")
            )
            result = await call("read_file", tool_ctx=ctx, path="SECRETS/k.txt")
            assert code(result) == "FORBIDDEN"
            result = await call("read_file", tool_ctx=ctx, path="secrets/k.txt")
            assert code(result) == "FORBIDDEN"
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True, timeout=30)


# -- sizes and content ------------------------------------------------------------------


async def test_huge_file_refused_and_search_bounded(call, root):
    with open(root / "huge.log", "wb") as fh:
        fh.truncate(200 * 1024 * 1024)
    result = await call("read_file", path="huge.log")
    assert code(result) == "TOO_LARGE"
    assert "search_files" in result.refusal.hint
    started = time.monotonic()
    search = await call("search_files", pattern="needle")
    assert search.ok and time.monotonic() - started < 20
    assert not search.data["coverage"]["complete"]
    assert any("content limit" in r for r in search.data["coverage"]["reasons"])


async def test_invalid_utf8_refused_with_hint(call, root):
    (root / "bad.txt").write_bytes(b"hello \xff\xfe world\n")
    result = await call("read_file", path="bad.txt")
    assert code(result) == "INVALID_ARGUMENT"
    assert "UTF-8" in result.refusal.message and result.refusal.hint
    edit = await call("edit_file", path="bad.txt", old_text="hello", new_text="bye")
    assert code(edit) == "INVALID_ARGUMENT"
    assert (root / "bad.txt").read_bytes() == b"hello \xff\xfe world\n"


async def test_catastrophic_regex_on_long_line_is_bounded(call, root):
    (root / "long.txt").write_text("a" * 100_000 + "\n" + "a" * 8000 + "!\nshort aaa\n")
    started = time.monotonic()
    result = await call("search_files", pattern="(a+)+$")
    assert time.monotonic() - started < 20  # an outer bound: a hang would be forever
    assert result.ok
    assert [m["line"] for m in result.data["matches"]] == [3]
    assert result.data["skipped"]["long_lines"] == 1
    assert not result.data["coverage"]["complete"]


async def test_backreferences_and_lookaround_refused(call):
    for pattern in (r"(a)\1", r"foo(?=bar)", r"(?<!x)y", r"(?!a)b"):
        result = await call("search_files", pattern=pattern)
        assert code(result) == "INVALID_ARGUMENT"
        assert "RE2" in result.refusal.message and result.refusal.hint


# -- default write policy -------------------------------------------------------------------


async def test_git_and_bastion_never_written(call, root):
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    for path in (
        ".git/config",
        ".git/hooks/pre-commit",
        ".GIT/config",
        "sub/.git/config",
        ".bastion/settings.toml",
    ):
        result = await call("write_file", path=path, content="x", overwrite=True)
        assert code(result) == "FORBIDDEN", path
    edit = await call("edit_file", path=".git/config", old_text="[core]", new_text="[x]")
    assert code(edit) == "FORBIDDEN"
    assert (root / ".git" / "config").read_text() == "[core]\n"
    assert not (root / ".bastion").exists()
    assert not (root / ".git" / "hooks").exists()
    assert not (root / "sub").exists()
    read = await call("read_file", path=".git/config")
    assert read.ok


async def test_hook_denial_is_recursive_and_reported(call, root):
    (root / "private" / "deep").mkdir(parents=True)
    (root / "private" / "deep" / "k.txt").write_text("needle\n")
    (root / "open.txt").write_text("needle\n")
    asked: list[str] = []

    def authorize(path: str, access: Access) -> bool:
        asked.append(path)
        return path != "private"

    result = await call("read_file", path="private/deep/k.txt", authorize=authorize)
    assert code(result) == "FORBIDDEN" and asked == ["private"]
    search = await call("search_files", pattern="needle", authorize=authorize)
    assert [m["path"] for m in search.data["matches"]] == ["open.txt"]
    assert not search.data["coverage"]["complete"]
    assert any("withheld" in r for r in search.data["coverage"]["reasons"])
    listing = await call("list_directory", authorize=authorize)
    assert [e["name"] for e in listing.data["entries"]] == ["open.txt"]
    assert not listing.data["coverage"]["complete"]
    found = await call("glob", pattern="**/*.txt", authorize=authorize)
    assert found.data["files"] == ["open.txt"] and not found.data["coverage"]["complete"]


async def test_hook_that_raises_denies(call, root):
    (root / "a.txt").write_text("x\n")

    def broken(path: str, access: Access) -> bool:
        raise RuntimeError("boom")

    assert code(await call("read_file", path="a.txt", authorize=broken)) == "FORBIDDEN"


# -- processes --------------------------------------------------------------------------------


async def test_timeout_kills_grandchildren(call, root):
    script = "(sleep 30; echo late > marker) & echo $! > grandchild.pid; sleep 30"
    started = time.monotonic()
    result = await call("run_command", command=script, timeout_ms=500)
    assert time.monotonic() - started < 20  # not the 30 s sleep
    assert code(result) == "TIMEOUT"
    assert result.data["timed_out"] is True
    pid = int((root / "grandchild.pid").read_text())
    await until(lambda: gone(pid), "the grandchild to die")
    assert not (root / "marker").exists()


async def test_cancel_kills_process_group(ctx, root):
    from tools import run_tool

    task = asyncio.ensure_future(
        run_tool("run_command", {"command": "sleep 60 & echo $! > bg.pid; sleep 60"}, ctx)
    )
    await until(
        lambda: (root / "bg.pid").exists() and (root / "bg.pid").read_text().strip(),
        "the command to write bg.pid",
    )
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pid = int((root / "bg.pid").read_text())
    await until(lambda: gone(pid), "the background process to die")


async def test_fifty_megabytes_of_output_is_bounded(call, ctx):
    started = time.monotonic()
    result = await call(
        "run_command", command="head -c 50000000 /dev/zero | tr '\\0' 'x' | fold -w 100"
    )
    assert time.monotonic() - started < 30
    assert result.ok and result.data["exit_code"] == 0
    assert result.data["truncated"] is True
    assert result.data["output_bytes"] == 50_000_000 + 499_999  # fold adds no final newline
    assert len(result.data["output"]) < 40_000
    assert len(result.model_text()) < 40_000
    page = await call("read_output", id=result.data["output_id"], offset=499_999, limit=10)
    assert page.ok and page.data["lines_returned"] == 2
    assert page.data["content"] == "x" * 100 + "\n" + "x" * 100


async def test_read_output_ids_are_strict(call, ctx):
    (ctx.artifacts_dir / "secret.log").write_text("x\n")
    for bad in ("../secret", "secret", "out_" + "0" * 31, "out_" + "g" * 32, "out_" + "0" * 32):
        result = await call("read_output", id=bad)
        assert code(result) == "SPILL_REFERENCE_UNKNOWN", bad


async def test_limits_time_budget_marks_partial(call, root):
    for i in range(30):
        (root / f"d{i}").mkdir()
        (root / f"d{i}" / "f.txt").write_text("x\n")
    result = await call("search_files", pattern="x", limits=Limits(time_budget_s=0.0))
    assert result.ok and not result.data["coverage"]["complete"]
    assert any("time budget" in r for r in result.data["coverage"]["reasons"])


async def test_dangling_link_is_never_created_through(call, root, outside):
    (root / "dangle").symlink_to(outside / "created-by-link")
    (root / "d").mkdir()
    (root / "d" / "dangle").symlink_to(outside / "also-created")
    for path in ("dangle", "d/dangle"):
        for overwrite in (False, True):
            result = await call("write_file", path=path, content="x", overwrite=overwrite)
            assert code(result) == "FORBIDDEN", (path, overwrite)
    assert not (outside / "created-by-link").exists()
    assert not (outside / "also-created").exists()


async def test_glob_and_include_cannot_escape(call, root):
    for pattern in ("../**", "a/../../*", "/tmp/*"):
        assert code(await call("glob", pattern=pattern)) == "INVALID_ARGUMENT"
        result = await call("search_files", pattern="x", include=pattern)
        assert code(result) == "INVALID_ARGUMENT"
