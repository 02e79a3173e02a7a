"""Session ids as git takes commit ids: any unique prefix, in every command that takes
one; an ambiguous prefix gets one line naming the sessions it starts."""

from __future__ import annotations

import json

from runtime.store.shortids import canonical_prefix, short_ids

# Two sessions made in the same minute share their first 8 (here 13) hex digits.
A = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e"
B = "0192f7a4-6c1e-7f00-8b3e-5f6a7b8c9d0e"
C = "0192f8a4-0000-7000-8000-000000000000"


def sessions(loopback, bastion):
    server = loopback([{"text": f"answer {n}"} for n in range(12)])
    b = bastion(server)
    for conv_id, prompt in ((A, "alpha question"), (B, "bravo question"), (C, "charlie")):
        out = b.run("-p", "--session-id", conv_id, prompt)
        assert out.returncode == 0, out.stderr
    return b


def test_short_ids_are_long_enough_to_be_unique():
    short = short_ids([A, B, C])
    assert short == {A: "0192f7a4-6c1e-7d", B: "0192f7a4-6c1e-7f", C: "0192f8a4"}
    assert canonical_prefix("0192F7A46C1E7D") == "0192f7a4-6c1e-7d"
    assert canonical_prefix("not-hex") is None


def test_every_command_takes_a_unique_prefix(loopback, bastion):
    b = sessions(loopback, bastion)
    # -r: with and without the hyphen, any case
    out = b.json("-p", "-r", "0192F7A46C1E7D", "again", "--output-format", "json")
    assert out["session_id"] == A and out["status"] == "completed"
    # the tail the app's status line shows (no id starts with it)
    assert json.loads(b.run("export", "00000000").stdout)["conversation"]["id"] == C
    shared = b.run("export", "7b8c9d0e")  # A's and B's tails are the same here
    assert (
        shared.returncode == 2
        and "7b8c9d0e" in shared.stderr
        and "(alpha question)" in shared.stderr
    )
    # export, fork
    exported = json.loads(b.run("export", "0192f7a4-6c1e-7f").stdout)
    assert exported["conversation"]["id"] == B
    forked = b.run("fork", "0192f8")
    assert forked.returncode == 0, forked.stderr
    copy = forked.stdout.strip().splitlines()[-1]
    assert json.loads(b.run("export", copy).stdout)["conversation"]["parent_id"] == C
    # attach (no driver: it follows the ledger, stdin at its end, until interrupted)
    attach = b.run("attach", "0192f8a4", timeout=10, input="/quit\n")
    assert "not a session id" not in attach.stderr and "no session" not in attach.stderr
    # sessions rm
    removed = b.run("sessions", "rm", "0192f8a4")
    assert removed.returncode == 0 and C in removed.stderr, removed.stderr
    assert C not in b.run("sessions", "--all").stdout


def test_an_ambiguous_prefix_names_the_sessions_in_one_line_and_changes_nothing(loopback, bastion):
    b = sessions(loopback, bastion)
    before = b.run("sessions", "--all").stdout
    for args in (
        ("-p", "-r", "0192f7a4", "hi"),
        ("export", "0192f7a4"),
        ("fork", "0192f7a4"),
        ("sessions", "rm", "0192f7a4"),
        ("attach", "0192f7a4"),
    ):
        out = b.run(*args)
        assert out.returncode == 2, (args, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1, out.stderr
        assert "0192f7a4-6c1e-7d (alpha question)" in lines[0], lines[0]
        assert "0192f7a4-6c1e-7f (bravo question)" in lines[0], lines[0]
        assert "give more of the id" in lines[0]
    assert b.run("sessions", "--all").stdout == before
    none = b.run("export", "0192aaaa")
    assert none.returncode == 2 and "no session id starts with 0192aaaa" in none.stderr
    short = b.run("export", "019")
    assert short.returncode == 2 and "at least 4" in short.stderr


def test_what_cannot_be_an_id_is_refused_before_a_store_is_made(bastion):
    b = bastion(None)
    for args in (("-p", "-r", "nope", "hi"), ("export", "nope"), ("fork", "xyz"),
                 ("sessions", "rm", "01"), ("attach", "zz"), ("compact", "q")):  # fmt: skip
        out = b.run(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 and "session id" in out.stderr
    assert not (b.home / "bastion.sqlite").exists()
