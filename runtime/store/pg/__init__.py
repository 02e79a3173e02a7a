"""The PostgreSQL engine (a team's sessions in one database): psycopg 3, imported only
when a store URL is configured (`pip install -e '.[postgresql]'` in bastion's clone).

`connection` wraps a psycopg connection in the runtime's `Db` (the `?`
placeholders, booleans as the schema's integers), `schema` is the schema and its
numbered migrations, `engine` the transactions (the Engine of
runtime.store.interface), `search` full text with tsvector and ts_rank.
"""
