"""stop_job: end a background job this session started (tools/jobs.py).

Its whole process tree goes (SIGTERM, then SIGKILL after a grace: the supervisor's
work, setsid and double forks included). Stopping a job that has already ended
changes nothing and says so in one line. It changes nothing in the workspace and
only ever ends a process of this session's own jobs, so it runs without asking
(read_only), like reading the job's output; running it again is harmless.
"""

from __future__ import annotations

from typing import Any

from tools.context import ToolContext
from tools.output import unknown_job
from tools.result import ToolResult, register_formatter
from tools.tooldef import ToolDef

NAME = "stop_job"
DESCRIPTION = (
    "Stop a background job started by run_command with background: true (`id`: its "
    "job_id): it and every process it started are ended (SIGTERM, then SIGKILL after a "
    "second). Returns its exit code and last output."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "string", "description": "The job_id, e.g. job_1."}},
    "required": ["id"],
    "additionalProperties": False,
}


async def stop_job(ctx: ToolContext, raw_args: dict[str, Any]) -> ToolResult:
    text = str(raw_args["id"])
    data = await ctx.jobs.stop(text, "by the model") if ctx.jobs is not None else None
    if data is None:
        return ToolResult.from_refused(NAME, unknown_job(text))
    return ToolResult.success(NAME, data)


def format_text(data: dict[str, Any]) -> str:
    if not data["stopped"]:
        return f"[{data['id']} had already ended: {data['words']}; nothing to stop]"
    text = f"[{data['id']} (`{data['command']}`): {data['words']}]"
    for note in data.get("notes") or ():
        text += f"\n[{note}]"
    if data.get("last_output", "").strip():
        text += f"\nits last output:\n{data['last_output'].rstrip()}"
    return text


register_formatter(NAME, format_text)
TOOL = ToolDef(NAME, DESCRIPTION, PARAMETERS, read_only=True, replay_safe=True, run=stop_job)
