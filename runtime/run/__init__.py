"""Running a conversation's work: the driver that holds its lease, the model loop of one
run, tool calls from intent to result with their recorded effects, approvals being
answered, admission of input, budgets, and what a run streamed but has not committed
yet.
"""
