"""The app's command palette (Ctrl+P): the slash commands of `tui.slash`, the same
registry as the prompt's."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui.slash import COMMANDS, SlashCommand


class _SlashHost(Protocol):
    async def run_slash(self, command: SlashCommand, arg: str) -> None: ...


__all__ = ["SlashProvider"]


class SlashProvider(Provider):
    """The command palette's commands: the same registry as the prompt's."""

    def _hits(self) -> Iterable[SlashCommand]:
        return [c for c in COMMANDS if "app" in c.fronts]

    def _runner(self, command: SlashCommand) -> Callable[[], Any]:
        run_slash = cast(_SlashHost, self.app).run_slash  # (only BastionApp installs it)
        return partial(run_slash, command, "")

    async def discover(self) -> Hits:
        for command in self._hits():
            yield DiscoveryHit(f"/{command.name}", self._runner(command), help=command.summary)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in self._hits():
            score = matcher.match(f"/{command.name} {command.summary}")
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(f"/{command.name}"),
                    self._runner(command),
                    help=command.summary,
                )
