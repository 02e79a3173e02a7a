"""Scheduling a turn's tool calls: which may overlap and how they run together.

Imports only runtime.model.records and runtime.run.toolbox (value types); the call runner
(runtime.run.calls) decides what one call does, this package only when it runs.
"""

from runtime.schedule.parallel import MAX_PARALLEL, groups, may_overlap, run_together

__all__ = ["MAX_PARALLEL", "groups", "may_overlap", "run_together"]
