"""The installed version, for `bastion --version`."""

from __future__ import annotations

import sys


def installed_version() -> str:
    """The installed version, from the `bastion-VERSION.dist-info` folder on the import
    path (beside the package in a regular install, in site-packages in an editable one),
    else from importlib.metadata, which costs ~60 ms to import."""
    import os

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for folder in (here, *sys.path):
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("bastion-") and name.endswith(".dist-info"):
                return name[len("bastion-") : -len(".dist-info")]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bastion")
    except PackageNotFoundError:
        return "0+unknown"
