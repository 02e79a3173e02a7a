"""The transports of the one protocol (runtime.model.protocol): JSON lines over a
stream socket (`wire.py`); the harness's side of a connection (`server.py`) and the
front ends' (`client.py`, `HarnessClient`); the app's harness process started over a
socket pair (`spawn.py`); a driving process's attach sockets (`listen.py`) and who may
use them (`peer.py`); an in-process harness reached the same way (`local.py`); the
coalescing event channel (`channel.py`); and the child interpreters' import path
(`pypath.py`).

May import: model, store, harness (the one it serves), and the rooms below it.
Imported by: the front ends through the runtime's public API, and runtime.testing.
"""
