"""The Harness, the runtime's facade and public API: one class put together from the
operations each module here adds (driving, approvals, sessions), and export and import
of a conversation.
"""

from runtime.harness.facade import (
    Harness,
    Interruption,
    Subscription,
    default_home,
    new_conversation,
)

__all__ = ["Harness", "Interruption", "Subscription", "default_home", "new_conversation"]
