"""Settings and trust: the user's and the project's config files, live reload, approval
modes and rules (with the shell splitting that proves a rule safe), workspace trust and
what an untrusted project may change, the first-run report, and where bastion keeps its
files.
"""
