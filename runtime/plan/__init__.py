"""The plan the user can see: the model's `todo` checklist, kept with the conversation.

runtime.model.todo holds the items as plain data and the stored list (the store and
the views use it); runtime.plan.todo holds the tool, the toolbox that adds it and
the transaction that stores a list. Neither imports textual or rich.
"""
