"""What the model sees and what it costs: the request built from stored entries, project
instructions, @mentions and images, token counts, the model catalog, usage, and
compaction of long conversations.
"""
