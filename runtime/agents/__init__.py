"""Subagents: the `task` tool and the child conversations it starts.

- `definitions`: the kinds of agent (built in, the user's and a trusted project's
  Markdown files), and what a file may and may not change;
- `children`: the child's link to its parent and to the call that started it;
- `task`: the tool, the toolboxes a parent and a child get, and `equip`, which
  the harness calls for every driver it starts.

Imports the store, the records and the admission transaction; the harness imports
this room, never the other way round (the harness is reached through `ChildHost`).
"""

from __future__ import annotations

from runtime.agents.children import (
    ChildLink,
    children_of,
    fork_children,
    subagent_of,
    unfinished_children,
)
from runtime.agents.definitions import (
    BUILTIN,
    READ_ONLY_TOOLS,
    AgentCatalog,
    AgentDefinition,
    AgentFileError,
    load_agents,
    parse_agent_file,
)
from runtime.agents.task import TASK_TOOL, ChildHost, ChildToolbox, TaskToolbox, equip

__all__ = [
    "BUILTIN",
    "READ_ONLY_TOOLS",
    "TASK_TOOL",
    "AgentCatalog",
    "AgentDefinition",
    "AgentFileError",
    "ChildHost",
    "ChildLink",
    "ChildToolbox",
    "TaskToolbox",
    "children_of",
    "equip",
    "fork_children",
    "load_agents",
    "parse_agent_file",
    "subagent_of",
    "unfinished_children",
]
