"""The durable store: one SQLite file, its schema and migrations, write transactions that
append to the ledger, full-text search, ids, forks, and what can be said about the file
when SQLite cannot use it. Nothing here knows about models or tools.
"""
