"""Images reach multimodal models in each provider's format (EXIF orientation applied,
downscaled to the provider's limit), from a prompt path and from read_file; a model
without image input gets a placeholder."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from runtime import Harness
from runtime.context.images import fit_image, load_image, prompt_images
from runtime.model.llm import ImagePart
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.openai import OpenAIChatProvider
from runtime.run.deps import LoopSettings
from runtime.run.toolbox import WorkspaceToolbox
from runtime.setup.load import Config
from runtime.testing.server import LoopbackServer

RED, BLUE = (220, 20, 20), (20, 20, 220)


def sideways_photo(path: Path) -> None:
    """3000x1000, red left and blue right, stored with EXIF orientation 6 (rotate 90° CW):
    shown upright it is 1000x3000 with red on top."""
    image = Image.new("RGB", (3000, 1000), BLUE)
    image.paste(Image.new("RGB", (1500, 1000), RED), (0, 0))
    exif = Image.Exif()
    exif[0x0112] = 6
    image.save(path, "JPEG", exif=exif.tobytes(), quality=90)


def decoded(data: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(data)))


def upright(image: Image.Image, long_side: int) -> None:
    width, height = image.size
    assert height == long_side and abs(width - long_side / 3) <= 1, image.size
    rgb = image.convert("RGB")
    top, bottom = rgb.getpixel((width // 2, 5)), rgb.getpixel((width // 2, height - 5))
    assert top[0] > 150 > top[2] and bottom[2] > 150 > bottom[0], (top, bottom)


def test_load_and_fit(tmp_path: Path) -> None:
    sideways_photo(tmp_path / "p.jpg")
    part = load_image(tmp_path / "p.jpg")
    upright(decoded(part.data), 2000)
    small = fit_image(part, 1568)
    assert small.media_type == "image/jpeg"
    upright(decoded(small.data), 1568)
    assert fit_image(small, 2048) is not None and fit_image(small, 2048).data == small.data


def test_prompt_paths(tmp_path: Path) -> None:
    sideways_photo(tmp_path / "shot.jpg")
    (tmp_path / "docs").mkdir()
    sideways_photo(tmp_path / "docs" / "d.jpeg")
    (tmp_path / "bad.png").write_bytes(b"not a png")
    images, notes = prompt_images(
        "compare shot.jpg with @docs/d.jpeg, ignore missing.png and bad.png.", tmp_path
    )
    assert len(images) == 2 and all(isinstance(i, ImagePart) for i in images)
    assert len(notes) == 1 and notes[0].startswith("bad.png")


async def run_once(tmp_path: Path, provider: Any, spec: str, prompt: str) -> None:
    harness = await Harness.open(
        tmp_path / "b.sqlite",
        resolve_model=lambda s: (provider, s.split("/", 1)[1]),
        toolbox_factory=lambda conv: WorkspaceToolbox(conv.cwd, tmp_path / "artifacts"),
        loop_settings=LoopSettings(checkpoint_interval=0.02),
        config=Config(),
    )
    try:
        conv = await harness.create_conversation(str(tmp_path / "work"), settings={"model": spec})
        await harness.drive(conv.id)
        run = await harness.wait((await harness.submit(conv.id, prompt)).id, conv.id)
        assert run.state == "completed", run.error
    finally:
        await harness.close()


READ = [
    {"text": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "p.jpg"}}]},
    {"text": "A red and blue picture."},
]


def openai_images(body: dict[str, Any]) -> list[Image.Image]:
    out = []
    for message in body["messages"]:
        if isinstance(message["content"], list):
            for part in message["content"]:
                if part["type"] == "image_url":
                    url = part["image_url"]["url"]
                    assert url.startswith("data:image/jpeg;base64,")
                    out.append(decoded(url.split(",", 1)[1]))
    return out


def anthropic_images(body: dict[str, Any]) -> list[Image.Image]:
    out = []

    def walk(blocks: list[dict[str, Any]]) -> None:
        for block in blocks:
            if block["type"] == "image":
                assert block["source"]["type"] == "base64"
                out.append(decoded(block["source"]["data"]))
            elif block["type"] == "tool_result" and isinstance(block["content"], list):
                walk(block["content"])

    for message in body["messages"]:
        if isinstance(message["content"], list):
            walk(message["content"])
    return out


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    sideways_photo(tmp_path / "work" / "p.jpg")
    return tmp_path


@pytest.mark.parametrize("source", ["prompt", "read_file"])
async def test_openai_chat_gets_image_url(work: Path, source: str) -> None:
    turns = READ if source == "read_file" else [{"text": "A picture."}]
    prompt = "what is in p.jpg?" if source == "prompt" else "look at the picture"
    async with LoopbackServer(turns) as server:
        provider = OpenAIChatProvider("openai", server.base_url)
        await run_once(work, provider, "openai/gpt-4o", prompt)
        body = server.requests[-1].body
    [image] = openai_images(body)
    upright(image, 2000)


@pytest.mark.parametrize("source", ["prompt", "read_file"])
async def test_anthropic_gets_base64_image_block_at_its_limit(work: Path, source: str) -> None:
    turns = READ if source == "read_file" else [{"text": "A picture."}]
    prompt = "what is in p.jpg?" if source == "prompt" else "look at the picture"
    async with LoopbackServer(turns) as server:
        provider = AnthropicProvider("anthropic", server.url)
        await run_once(work, provider, "anthropic/claude-sonnet-4-5", prompt)
        body = server.requests[-1].body
    [image] = anthropic_images(body)
    upright(image, 1568)


@pytest.mark.parametrize("source", ["prompt", "read_file"])
async def test_a_model_without_images_gets_a_placeholder(work: Path, source: str) -> None:
    turns = READ if source == "read_file" else [{"text": "I cannot see it."}]
    prompt = "what is in p.jpg?" if source == "prompt" else "look at the picture"
    async with LoopbackServer(turns) as server:
        provider = OpenAIChatProvider("ollama", server.base_url)
        await run_once(work, provider, "ollama/llama3.2", prompt)
        body = server.requests[-1].body
    assert openai_images(body) == []
    sent = json.dumps(body["messages"])
    assert "does not take image input" in sent and 'models.\\"ollama/llama3.2\\"' in sent
