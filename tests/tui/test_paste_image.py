"""Issue 40: Ctrl+V attaches the system clipboard's image: a fake `xclip` on PATH hands
over a PNG; the app saves it privately, names it in the prompt, and the model gets it
as an image part. No image, no tool: one line, the prompt unchanged."""

from __future__ import annotations

import io
import os
import stat

from PIL import Image

from runtime.testing.scripted import ScriptedProvider
from tests.tui.conftest import SIZE, notices, run_settled, wait_for
from tui.widgets import PromptInput


def fake_xclip(folder, png: bytes | None):
    folder.mkdir(exist_ok=True)
    if png is not None:
        (folder / "clip.png").write_bytes(png)
    body = f'cat "{folder}/clip.png"' if png is not None else "exit 1"
    script = folder / "xclip"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (200, 10, 10)).save(out, "PNG")
    return out.getvalue()


async def test_ctrl_v_attaches_the_clipboards_image(harness_process, tmp_path, monkeypatch):
    fake_xclip(tmp_path / "bin", png())
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    proc = harness_process([{"text": "A red rectangle."}])  # BASTION_HOME: tmp_path/home
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        prompt = app.query_one(PromptInput)
        await pilot.press(*"what is this? ", "ctrl+v")
        await wait_for(lambda: "@" in prompt.text, pilot)
        path = prompt.text.split("@", 1)[1].strip()
        assert path.startswith(str(proc.home / "pasted"))
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        await pilot.press("enter")
        await wait_for(lambda: run_settled(app), pilot)
    content = proc.requests[0].body["messages"][-1]["content"]
    # Attached as an image: this model (openai/test, unknown to the catalog) takes none,
    # so the request carries the placeholder that says so in its place (runtime.context.images).
    shown = " ".join(part.get("text", "") for part in content)
    assert "images = true" in shown and len(content) >= 2, content


async def test_no_image_on_the_clipboard_is_one_line(harness_process, tmp_path, monkeypatch):
    fake_xclip(tmp_path / "bin", None)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("DISPLAY", ":0")
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press(*"keep", "ctrl+v")
        await wait_for(lambda: "holds no image" in notices(app), pilot)
        assert app.query_one(PromptInput).text == "keep"
