"""ACP session modes: bastion's approval modes, offered to the editor and switched by it.

`session/new` and `session/load` answer with the modes and the one in force; an editor's
`session/set_mode` switches the approval mode the way Shift+Tab does in the app (the
driving process's `set_approval_mode`, so an attached terminal shows it too); a switch
made elsewhere (`bastion attach`'s Shift+Tab) reaches the editor as a
`current_mode_update`. What each mode lets run is decided by the harness, never here.
"""

from __future__ import annotations

from typing import Final

from acp import RequestError
from acp.schema import CurrentModeUpdate, SessionMode, SessionModeState

__all__ = ["MODES", "check_mode", "mode_state", "mode_update"]

#: id: (name, description), in Shift+Tab's order.
MODES: Final = {
    "read-only": ("Read only", "Only reading tools run; nothing is written or run."),
    "ask": ("Ask", "Reads run; each write and command asks you first."),
    "auto-edit": ("Auto edit", "Reads and writes inside the workspace run; commands ask."),
    "full-auto": ("Full auto", "Everything runs; path rules and the sandbox still hold."),
    "plan": ("Plan", "Reads and a todo list only: the model plans, you approve the plan."),
}

INVALID_PARAMS: Final = -32602  # JSON-RPC's invalid parameters (as tui.acp_session's)


def mode_state(current: str) -> SessionModeState:
    """The modes an editor may offer, and `current`."""
    available = [SessionMode(id=m, name=n, description=d) for m, (n, d) in MODES.items()]
    return SessionModeState(current_mode_id=current, available_modes=available)


def mode_update(mode: str) -> CurrentModeUpdate:
    return CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode)


def check_mode(mode_id: object) -> str:
    """`mode_id` if it names a mode; else the request's one error line."""
    if isinstance(mode_id, str) and mode_id in MODES:
        return mode_id
    raise RequestError(
        INVALID_PARAMS,
        f"no mode {mode_id!r}: bastion's modes are {', '.join(MODES)}",
        {"modeId": mode_id},
    )
