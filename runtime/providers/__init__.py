"""The model providers (see `runtime.providers.registry`).

Only the built-in prefixes live here, so that checking a model spec (the config
watcher does, in the app's process) does not load httpx and the providers.
"""

BUILTIN_PREFIXES = ("openai", "anthropic", "openai-responses", "ollama", "llamacpp")
