"""A superseded run's work, left out of what a model reads (runtime.run.redirect): the
request builder (runtime.context.messages), the summariser (runtime.context.compaction)
and the handoff note's writer (runtime.context.handoff) all read entries through
`without_superseded`."""

from __future__ import annotations

from collections.abc import Sequence

from runtime.model.records import Entry, EntryKind, superseded_runs

__all__ = ["DISCARDED", "without_superseded"]

DISCARDED = (
    "[The user discarded your unfinished answer to the message above. It had called: "
    "{tools}; whatever those changed in the workspace stays changed.]"
)


def without_superseded(entries: Sequence[Entry]) -> list[Entry]:
    """`entries` less the work of superseded runs (the module docstring): in place of
    each such run's first dropped entry, a note naming the tools it called, if any."""
    gone = superseded_runs(entries)
    if not gone:
        return list(entries)
    out: list[Entry] = []
    noted: set[str] = set()
    for entry in entries:
        run = entry.run_id
        if run not in gone or entry.kind not in (EntryKind.ASSISTANT, EntryKind.TOOL_RESULT):
            out.append(entry)
            continue
        if run in noted:
            continue
        noted.add(run)
        names = sorted({str(e.data.get("name", "")) for e in entries
                        if e.run_id == run and e.kind == EntryKind.TOOL_RESULT} - {""})  # fmt: skip
        if names:
            text = DISCARDED.format(tools=", ".join(names))
            out.append(entry.but(kind=EntryKind.NOTE, text=text, data={"for_model": text}))
    return out
