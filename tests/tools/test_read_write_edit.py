"""Ordinary behaviour of read_file, write_file and edit_file."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import os
import stat

from .conftest import code


async def test_read_numbers_lines_and_pages(call, root):
    (root / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    first = await call("read_file", path="f.txt", limit=4)
    assert first.ok
    assert first.data["content"].splitlines()[0] == "     1\tline 1"
    assert first.data["lines_returned"] == 4 and first.data["next_offset"] == 5
    assert first.data["total_lines"] == 10
    assert "offset=5" in first.model_text()
    rest = await call("read_file", path="f.txt", offset=5)
    assert rest.data["content"].splitlines()[-1] == "    10\tline 10"
    assert rest.data["next_offset"] is None
    whole = (root / "f.txt").read_bytes()
    assert first.data["sha256"] == rest.data["sha256"] == hashlib.sha256(whole).hexdigest()
    past = await call("read_file", path="f.txt", offset=11)
    assert code(past) == "INVALID_ARGUMENT"


async def test_read_byte_cap_hints_to_page(call, root):
    (root / "big.txt").write_text(("x" * 1000 + "\n") * 1000)
    result = await call("read_file", path="big.txt")
    assert result.ok and result.data["truncated"]
    assert result.data["lines_returned"] < 1000
    assert len(result.data["content"].encode()) <= 256 * 1024
    assert f"offset={result.data['next_offset']}" in result.model_text()


async def test_read_does_not_split_on_unicode_line_separators(call, root):
    (root / "u.txt").write_text("a\u2028b\u0085c\nd\n")
    result = await call("read_file", path="u.txt")
    assert result.data["total_lines"] == 2


async def test_read_empty_file_and_missing_file(call, root):
    (root / "empty.txt").write_text("")
    empty = await call("read_file", path="empty.txt")
    assert empty.ok and empty.data["total_lines"] == 0
    missing = await call("read_file", path="nope.txt")
    assert code(missing) == "NOT_FOUND" and missing.refusal.hint
    directory = await call("read_file", path=".")
    assert code(directory) == "INVALID_ARGUMENT" and "list_directory" in directory.refusal.hint


async def test_read_binary_refused(call, root):
    (root / "b.bin").write_bytes(b"\x00\x01\x02abc")
    result = await call("read_file", path="b.bin")
    assert code(result) == "INVALID_ARGUMENT" and "run_command" in result.refusal.hint


async def test_read_image_is_shrunk_and_oriented(call, root):
    from PIL import Image

    image = Image.new("RGB", (3000, 1000), (200, 10, 10))
    exif = image.getexif()
    exif[0x0112] = 6  # rotate 90° on display
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", exif=exif)
    (root / "photo.jpg").write_bytes(buffer.getvalue())
    result = await call("read_file", path="photo.jpg")
    assert result.ok and len(result.images) == 1
    block = result.images[0]
    assert (block.width, block.height) == (667, 2000)  # rotated, then fit to 2000
    assert result.data["original_width"] == 3000
    decoded = Image.open(io.BytesIO(base64.b64decode(block.data)))
    assert decoded.size == (667, 2000)
    assert len(block.data) <= 4_500_000
    assert result.to_dict()["images"][0]["media_type"] == block.media_type


async def test_read_png_with_alpha_stays_png(call, root):
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGBA", (10, 10), (0, 0, 0, 0)).save(buffer, format="PNG")
    (root / "t.png").write_bytes(buffer.getvalue())
    result = await call("read_file", path="t.png")
    assert result.images[0].media_type == "image/png"


async def test_read_corrupt_image_refused(call, root):
    (root / "bad.png").write_bytes(b"not an image")
    result = await call("read_file", path="bad.png")
    assert code(result) == "INVALID_ARGUMENT"


async def test_write_creates_parents_and_reports_them(call, root):
    result = await call("write_file", path="a/b/c.txt", content="hello\n")
    assert result.ok
    assert result.data["created_directories"] == ["a", "a/b"]
    assert (root / "a" / "b" / "c.txt").read_text() == "hello\n"
    again = await call("write_file", path="a/b/d.txt", content="x")
    assert again.data["created_directories"] == []


async def test_write_plan_is_authorized_before_anything_is_created(call, root):
    asked: list[str] = []

    def authorize(path, access):
        asked.append(path)
        assert not (root / "new").exists(), "created before authorization"
        return path != "new/deep"

    result = await call("write_file", path="new/deep/f.txt", content="x", authorize=authorize)
    assert code(result) == "FORBIDDEN"
    assert asked == ["new", "new/deep"]
    assert not (root / "new").exists()


async def test_write_refuses_overwrite_unless_asked(call, root):
    (root / "f.txt").write_text("old")
    refused = await call("write_file", path="f.txt", content="new")
    assert code(refused) == "CONFLICT" and "overwrite" in refused.refusal.hint
    assert (root / "f.txt").read_text() == "old"
    done = await call("write_file", path="f.txt", content="new", overwrite=True)
    assert done.ok and done.data["overwritten"]
    assert (root / "f.txt").read_text() == "new"


async def test_write_keeps_mode_and_leaves_no_temp_files(call, root):
    (root / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "run.sh", 0o751)
    await call("write_file", path="run.sh", content="#!/bin/sh\necho hi\n", overwrite=True)
    assert stat.S_IMODE(os.stat(root / "run.sh").st_mode) == 0o751
    await call("edit_file", path="run.sh", old_text="hi", new_text="bye")
    assert stat.S_IMODE(os.stat(root / "run.sh").st_mode) == 0o751
    assert sorted(p.name for p in root.iterdir()) == ["run.sh"]


async def test_write_onto_directory_refused(call, root):
    (root / "d").mkdir()
    result = await call("write_file", path="d", content="x", overwrite=True)
    assert code(result) == "INVALID_ARGUMENT"


async def test_write_under_a_file_refused(call, root):
    (root / "f").write_text("x")
    result = await call("write_file", path="f/child.txt", content="x")
    assert code(result) == "INVALID_ARGUMENT"


async def test_edit_replaces_one_snippet_literally(call, root):
    (root / "m.py").write_text("def f():\n    return 1\n")
    result = await call("edit_file", path="m.py", old_text="return 1", new_text=r"return '\1 $0'")
    assert result.ok
    assert (root / "m.py").read_text() == "def f():\n    return '\\1 $0'\n"
    assert "-    return 1" in result.data["diff"] and "+    return" in result.data["diff"]
    assert result.data["sha256"] == hashlib.sha256((root / "m.py").read_bytes()).hexdigest()
    assert "---" in result.model_text()


async def test_edit_ambiguous_is_conflict_with_count(call, root):
    (root / "m.py").write_text("x = 1\nx = 1\nx = 1\n")
    result = await call("edit_file", path="m.py", old_text="x = 1", new_text="x = 2")
    assert code(result) == "CONFLICT" and "3 times" in result.refusal.message
    assert result.data["count"] == 3
    assert "replace_all" in result.refusal.hint
    everything = await call(
        "edit_file", path="m.py", old_text="x = 1", new_text="x = 2", replace_all=True
    )
    assert everything.data["replacements"] == 3
    assert (root / "m.py").read_text() == "x = 2\nx = 2\nx = 2\n"


async def test_edit_missing_snippet_hints_nearest_lines(call, root):
    (root / "m.py").write_text("def handler(request):\n    return response\n")
    result = await call(
        "edit_file", path="m.py", old_text="def handle(request):", new_text="def h(r):"
    )
    assert code(result) == "NOT_FOUND"
    assert "line 1" in result.refusal.hint and "def handler(request):" in result.refusal.hint


async def test_edit_expected_sha(call, root):
    (root / "m.txt").write_text("alpha\n")
    read = await call("read_file", path="m.txt")
    (root / "m.txt").write_text("alpha beta\n")
    stale = await call(
        "edit_file",
        path="m.txt",
        old_text="alpha",
        new_text="gamma",
        expected_sha256=read.data["sha256"],
    )
    assert code(stale) == "CONFLICT" and "read_file" in stale.refusal.hint
    fresh = await call("read_file", path="m.txt")
    ok = await call(
        "edit_file",
        path="m.txt",
        old_text="alpha",
        new_text="gamma",
        expected_sha256=fresh.data["sha256"],
    )
    assert ok.ok


async def test_edit_keeps_crlf_files_working(call, root):
    (root / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    result = await call("edit_file", path="w.txt", old_text="one\ntwo", new_text="1\n2")
    assert result.ok
    assert (root / "w.txt").read_bytes() == b"1\r\n2\r\n"


async def test_concurrent_edits_of_one_file_all_land(call, root):
    (root / "c.txt").write_text("".join(f"item{i}\n" for i in range(40)))
    results = await asyncio.gather(
        *(
            call("edit_file", path="c.txt", old_text=f"item{i}\n", new_text=f"done{i}\n")
            for i in range(40)
        )
    )
    assert all(r.ok for r in results), [r.refusal for r in results if not r.ok]
    assert (root / "c.txt").read_text() == "".join(f"done{i}\n" for i in range(40))


async def test_edit_refuses_empty_and_identical(call, root):
    (root / "m.txt").write_text("a\n")
    assert (
        code(await call("edit_file", path="m.txt", old_text="", new_text="b")) == "INVALID_ARGUMENT"
    )
    assert (
        code(await call("edit_file", path="m.txt", old_text="a", new_text="a"))
        == "INVALID_ARGUMENT"
    )


async def test_read_image_pixel_bomb_refused_before_decoding(call, root):
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    for side in (20000, 9000):  # 400 M px (Pillow's own guard), 81 M px (ours)
        header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
        png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")
        (root / "bomb.png").write_bytes(png)
        result = await call("read_file", path="bomb.png")
        assert code(result) == "TOO_LARGE", side
