"""sha256 of file contents; hashlib (and OpenSSL) load on first use only."""

from __future__ import annotations


def sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()
