"""Where the store is: an SQLite file (the default) or a PostgreSQL URL, and how such
a URL may be shown (never with its password)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["URL_SCHEMES", "is_url", "redacted"]

URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(location: str) -> bool:
    """Is `location` a PostgreSQL URL (rather than a file's path)?"""
    return location.startswith(URL_SCHEMES)


def redacted(url: str) -> str:
    """`url` as it may be printed, logged or exported: any password (in the user part
    or as a `password=` parameter) replaced by `***`."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            user, _, host = netloc.rpartition("@")
            if ":" in user:
                user = user.split(":", 1)[0] + ":***"
            netloc = f"{user}@{host}"
        query = re.sub(r"(?i)(^|&)(password=)[^&]*", r"\1\2***", parts.query)
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return url.split("://", 1)[0] + "://***"  # (unparseable: say nothing of it)
