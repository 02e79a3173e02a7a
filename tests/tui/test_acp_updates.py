"""`tui.acp_updates.prompt_text`: an editor's prompt blocks as the text bastion submits."""

from __future__ import annotations

from acp import image_block, resource_block, resource_link_block, text_block
from acp.schema import TextResourceContents

from tui.acp_updates import prompt_text


def test_links_to_workspace_files_become_mentions_and_others_stay_uris(tmp_path):
    cwd = str(tmp_path)
    blocks = [
        text_block("explain"),
        resource_link_block("x.py", (tmp_path / "src" / "x.py").as_uri()),
        text_block("and"),
        resource_link_block("my notes.md", (tmp_path / "my notes.md").as_uri()),
        resource_link_block("passwd", "file:///etc/passwd"),
        resource_link_block("web", "https://example.com/a"),
    ]
    text, skipped = prompt_text(blocks, cwd)
    assert text == (
        'explain @src/x.py and @"my notes.md" file:///etc/passwd https://example.com/a '
    )
    assert skipped == []


def test_embedded_text_follows_the_prompt_and_images_are_left_out(tmp_path):
    blocks = [
        text_block("look"),
        resource_block(TextResourceContents(uri="file:///a.txt", text="alpha")),
        image_block("AAAA", "image/png"),
    ]
    text, skipped = prompt_text(blocks, str(tmp_path))
    assert text == 'look\n\n<resource uri="file:///a.txt">\nalpha\n</resource>'
    assert skipped == ["the prompt's image was left out (bastion takes text and files)"]
