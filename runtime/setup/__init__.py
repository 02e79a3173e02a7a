"""What a session is opened with: the user's configuration and, in a trusted folder,
what the project's files may change of it (`load.py`, `project.py`), assembled from
the settings each room checks (providers, the catalog, hooks, MCP servers, the
sandbox, budgets); following it live (`watch.py`); the trust question's preview
(`preview.py`); the first-run report (`firstrun.py`).

May import: model, providers, store, config, and the work rooms (context, hooks, mcp,
plan, run), whose settings it assembles. Imported by: agents, harness, ipc, testing,
and the front ends through the runtime's public API.
"""
