"""When the app draws: frames paced to leave the cores to the harness, and new output
held off the screen while the user types (so a key's echo never waits for a frame of
a fast stream). Pure functions of the clock; `BastionApp.follow` and `_held` use them.
"""

from __future__ import annotations

__all__ = [
    "ECHO_POLL",
    "FRAME",
    "GAP",
    "KEY_QUIET",
    "MAX_HOLD",
    "REST",
    "SWITCH_INTERVAL",
    "due",
    "hold",
    "pause",
    "urgent",
]

# The view is shown at most this often; events in between are folded together. Streamed
# text is what mostly arrives between frames: at 400 chars/s a frame adds about 80
# characters (a line or two), and each frame lays out and repaints the transcript.
# Measured with `python tests/bench/bench_live.py --only cpu` (the app and its harness
# process, CPU per 15 s of a 400 chars/s answer): 10 frames a second cost 1.9-2.0 s,
# 6 a second 1.7 s, 5 a second 1.5 s (with the streaming segment's headroom,
# `tui.widgets.markdown.HEADROOM`); the budget is 1.5 s. Urgent events (a run
# ending, an approval) wake the loop at once (`EventChannel.rest`), and a key's echo is
# drawn by Textual on its own, never waiting for this.
FRAME = 1 / 5
REST = 3.0  # between frames, this thread rests at least REST times the CPU it used
KEY_QUIET = 0.1  # new output waits until no key came for this long (seconds)...
MAX_HOLD = 1.0  # ...and after this long, for the gap after the next key's echo:
ECHO_POLL = 0.003  # how often held output looks for a key's echo to be drawn
GAP = 0.02  # the time after a key's echo is drawn in which held output is shown
# How long a thread holds the interpreter lock while another waits for it (Python's
# default is 5 ms). A key read while the render-ahead thread renders waits for the
# lock on the driver's thread and again on the app's; at 1 ms, measured with
# `python tests/bench/bench_live.py --runs 3 --only echo` (3 interleaved pairs, load
# 2-3), key echo p99 while a 2 MB answer streams went from 18/21/27 ms to 16/19/14
# ms, with no change in CPU while streaming (`--only cpu`, 2 pairs).
SWITCH_INTERVAL = 0.001


def pause(
    spent: float, now: tuple[float, float], mark: tuple[float, float], *, shared: bool = False
) -> float:
    """Seconds to wait before the next frame, `spent` seconds after this one began.

    `now` and `mark` are (wall clock, this thread's CPU time) now and after the last
    frame. The CPU since then includes Textual's layout and drawing of that frame
    (done between frames): waiting `(1 + REST) * used - elapsed` keeps this
    thread's share of a frame's cycle under 1 / (1 + REST), and frames come at most
    every FRAME seconds. `shared`: the harness runs on this thread too (tests that
    open it on the app's loop), so its CPU is not the screen's: rest REST * spent.
    """
    if shared:
        return max(FRAME - spent, REST * spent, 0.0)
    elapsed, used = now[0] - mark[0], now[1] - mark[1]
    return max(FRAME - spent, (1 + REST) * used - elapsed, 0.0)


def hold(
    now: float, typed_at: float, shown_at: float, echoed_at: float, *, urgent: bool = False
) -> float:
    """Seconds to keep new output off the screen at `now`, the last key typed at
    `typed_at`, the last frame shown at `shown_at` and the last key's echo drawn at
    `echoed_at` (0: show it now).

    A frame of a fast stream can take tens of milliseconds, and a key typed
    meanwhile is drawn only after it. So while the user types, the transcript
    waits for a pause of KEY_QUIET; a typist's gaps between keys are longer, so
    it still moves between keys. When the keys come faster than that for
    MAX_HOLD, or the output is `urgent` (a run ended, an approval is asked), it
    is shown in the gap just after a key's echo is drawn (not before it, which
    would make the echo wait for the frame), the moment the next key is least
    likely to arrive. The caller looks again at least every GAP.
    """
    since_key = now - typed_at
    if since_key >= KEY_QUIET:
        return 0.0
    if not due(now, shown_at, urgent=urgent):
        return min(KEY_QUIET - since_key, shown_at + MAX_HOLD - now)
    if echoed_at < typed_at:  # its echo is not drawn yet
        return min(ECHO_POLL, KEY_QUIET - since_key)
    if now - echoed_at < GAP:
        return 0.0
    return min(GAP, KEY_QUIET - since_key)  # the next key's gap, or the pause


def due(now: float, shown_at: float, *, urgent: bool = False) -> bool:
    """Held output will be shown in the gap after the next key's echo (see `hold`): it
    is urgent, or has been held for MAX_HOLD since the last frame at `shown_at`."""
    return urgent or now - shown_at >= MAX_HOLD


def urgent(batch: object) -> bool:
    """Whether `batch` (from `EventChannel.get`) holds something to show at once:
    a resync, or an URGENT event (a run ending, an approval asked, an item taken)."""
    from runtime import URGENT

    return not isinstance(batch, list) or any(isinstance(event, URGENT) for event in batch)
