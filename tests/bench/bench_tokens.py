"""Benchmark: the token estimate's speed, and its error against provider-reported counts.

    python tests/bench/bench_tokens.py [--runs 7] [--only speed,long,error,computed]

The estimator is `runtime.context.tokens`: `count_messages` (cl100k_base in OpenAI's chat
accounting) and `count_request` (that plus the tool definitions, corrected for
Claude models), which the harness runs before every model request to decide
whether to compact, and which stands in for usage when a server reports none.

1. speed: `count_messages` on scripted coding conversations of about 50 KB,
   500 KB and 2 MB (prompts, answers with code blocks, tool calls with their JSON
   arguments, tool results holding source files and test logs), as tokens per
   second and as a ratio against raw tiktoken `encode` of the same texts joined
   into one string, timed in the same run (medians of `--runs` interleaved runs;
   the ratio is our per-message overhead).
2. long: the wait before a request on a long conversation: `count_request` on a
   conversation of about 200,000 tokens with bastion's own tool definitions,
   median of `--runs`; and the first estimate in a fresh process, which also
   loads the encoding (`python -c`, median of 3).
3. error: the estimate of each request in `tests/bench/token_corpus.json` against
   the input-token count its provider reported for it, copied from a published
   source named in each row (the OpenAI cookbook's recorded API counts, OpenAI's
   API reference examples, Anthropic's token-counting docs). Per provider family:
   how many rows, and the mean and worst signed relative error (estimate -
   reported) / reported, for `count_request` and, for comparison, for what the
   threshold used before it (`count_messages` without the role tokens, plus the
   tools' schema JSON / 4).
   Rows whose messages carry a `name` (which bastion never sends) are marked.
   With so few published rows per family these are spot checks, not a fit: no
   number in runtime.context.tokens was derived from them.

4. computed, kept apart from the published rows: on text-only scripted
   conversations (50 KB and 500 KB), `count_messages` (cl100k_base) against the
   exact count for the gpt-4o family, o200k_base in the cookbook's formula (which
   matched the API for gpt-4o in the cookbook's check). o200k_base cannot be
   downloaded here; it is rebuilt from the ranks the quicktok-v1 package ships and
   used only if its sha256 is the one OpenAI publishes (tiktoken checks it too). The
   row is skipped without that package (`nox -s bench` installs it).

Run by `nox -s bench`. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tools as coding_tools
from runtime.context import tokens
from runtime.model.llm import Message, ModelRequest, ToolCall, ToolSpec

CORPUS = Path(__file__).with_name("token_corpus.json")
KB = 1024
WORDS = " ".join(
    (
        "the function returns a list of paths that match when the cache is cold we read",
        "each file once and keep its hash so an edit can check nothing changed under it",
        "tests fail because the fixture opens the store twice error handling retry",
        "request response stream token window summary conversation",
    )
).split(" ")
NAMES = " ".join(
    (
        "store entry conversation ledger request budget window token summary reader writer",
        "path offset limit chunk cursor result status error retry handler config session",
    )
).split(" ")


# --- a scripted coding conversation -------------------------------------------------


def prose(rng: random.Random, words: int) -> str:
    out = []
    for i in range(words):
        word = rng.choice(WORDS)
        out.append(word.capitalize() if i == 0 or out[-1].endswith(".") else word)
        if rng.random() < 0.08:
            out[-1] += "."
    return " ".join(out) + "."


def code(rng: random.Random, functions: int) -> str:
    """Python-looking source: functions with arguments, branches, calls and strings."""
    lines = ["from __future__ import annotations", "", "import json", ""]
    for _ in range(functions):
        name = "_".join(rng.sample(NAMES, 2))
        args = ", ".join(f"{a}: {rng.choice(['int', 'str', 'Path', 'dict[str, Any]'])}"
                         for a in rng.sample(NAMES, rng.randint(1, 3)))  # fmt: skip
        var, other = rng.sample(NAMES, 2)
        lines += [
            f"def {name}({args}) -> {rng.choice(['int', 'str', 'bool', 'None'])}:",
            f'    """{prose(rng, rng.randint(5, 14))}"""',
            f"    {var} = {other}.get({json.dumps(rng.choice(NAMES))}, {rng.randint(0, 4096)})",
            f"    if {var} is None or {var} < {rng.randint(1, 99)}:",
            f'        raise ValueError(f"{{{var}!r}} is not a {other}")',
            f"    for index, item in enumerate({other}[{rng.randint(0, 9)}:]):",
            f"        {var} += len(item) * {rng.randint(2, 64)}",
            f"    return {var}",
            "",
        ]
    return "\n".join(lines)


def test_log(rng: random.Random, lines: int) -> str:
    out = []
    for _ in range(lines):
        path = f"tests/{rng.choice(NAMES)}/test_{rng.choice(NAMES)}.py"
        test = f"test_{'_'.join(rng.sample(NAMES, 3))}"
        out.append(f"{path}::{test} {rng.choice(['PASSED', 'PASSED', 'PASSED', 'FAILED'])} "
                   f"[{rng.randint(0, 100):3d}%] {rng.random():.3f}s")  # fmt: skip
    return "\n".join(out)


def conversation(size: int, seed: int) -> list[Message]:
    """Turns of a coding session until the text is about `size` characters: a prompt,
    a tool call or two with their results (a file read, a test run), an edit, and an
    answer with a code block."""
    rng = random.Random(seed)
    messages = [Message("system", prose(rng, 400))]
    chars = 0
    turn = 0
    while chars < size:
        turn += 1
        prompt = prose(rng, rng.randint(15, 120))
        if rng.random() < 0.3:
            prompt += "\n\n```python\n" + code(rng, 1) + "```"
        path = f"runtime/{rng.choice(NAMES)}.py"
        read = ToolCall(f"call_{turn}_1", "read_file", json.dumps({"path": path}))
        source = code(rng, rng.randint(3, 25))
        run = ToolCall(f"call_{turn}_2", "run_command", json.dumps({"command": "pytest -q"}))
        old, new = code(rng, 1), code(rng, 1)
        edit = ToolCall(f"call_{turn}_3", "edit_file",
                        json.dumps({"path": path, "old_text": old, "new_text": new}))  # fmt: skip
        answer = prose(rng, rng.randint(40, 200)) + "\n\n```python\n" + code(rng, 2) + "```"
        turn_messages = [
            Message("user", prompt),
            Message("assistant", prose(rng, 12), tool_calls=(read, run)),
            Message("tool", source, tool_call_id=read.id),
            Message("tool", test_log(rng, rng.randint(5, 60)), tool_call_id=run.id),
            Message("assistant", "", tool_calls=(edit,)),
            Message("tool", json.dumps({"ok": True, "replaced": 1}), tool_call_id=edit.id),
            Message("assistant", answer),
        ]
        messages += turn_messages
        chars += sum(len(texts(m)) for m in turn_messages)
    return messages


def texts(message: Message) -> str:
    content = message.content if isinstance(message.content, str) else ""
    return content + "".join(c.name + c.arguments for c in message.tool_calls)


def bastion_tools() -> tuple[ToolSpec, ...]:
    return tuple(ToolSpec(d.name, d.description, d.parameters) for d in coding_tools.TOOLS.values())


# --- timing -------------------------------------------------------------------------


def interleaved(
    ours: Callable[[], object], ref: Callable[[], object], runs: int
) -> tuple[float, float]:
    """Medians of `runs` alternating timings of each (one warm-up call of each first)."""
    ours()
    ref()
    a, b = [], []
    for _ in range(runs):
        for fn, into in ((ours, a), (ref, b)):
            started = time.perf_counter()
            fn()
            into.append(time.perf_counter() - started)
    return statistics.median(a), statistics.median(b)


def bench_speed(runs: int) -> None:
    enc = tokens.encoding()
    print("1. speed: count_messages vs tiktoken encode of the same text joined")
    for size in (50 * KB, 500 * KB, 2048 * KB):
        messages = conversation(size, seed=size)
        joined = "".join(texts(m) for m in messages)
        counted = tokens.count_messages(messages).tokens or 0
        reference = len(enc.encode(joined, disallowed_special=()))

        def ours(ms: list[Message] = messages) -> object:
            tokens.clear_cache()  # a first count: nothing remembered
            return tokens.count_messages(ms)

        def ref(text: str = joined) -> object:
            return enc.encode(text, disallowed_special=())

        t_ours, t_ref = interleaved(ours, ref, runs)
        again = fresh(messages)
        tokens.count_messages(messages)
        started = time.perf_counter()
        tokens.count_messages(again)
        t_again = time.perf_counter() - started
        print(
            f"  {len(joined) / KB:,.0f} KB, {len(messages):,} messages, {counted:,} tokens "
            f"(joined text {reference:,}): {counted / t_ours / 1e6:.2f} M tokens/s "
            f"({t_ours * 1e3:.1f} ms) vs encode {reference / t_ref / 1e6:.2f} M tokens/s "
            f"({t_ref * 1e3:.1f} ms) -> {t_ours / t_ref:.2f}x; counted again "
            f"(remembered): {t_again * 1e3:.1f} ms"
        )


def fresh(messages: list[Message]) -> list[Message]:
    """The same messages as new string objects, as a request rebuilt from the store has."""
    return [
        Message(m.role, m.content[:1] + m.content[1:], m.tool_calls, m.tool_call_id)
        if isinstance(m.content, str)
        else m
        for m in messages
    ]


def bench_long(runs: int) -> None:
    print("2. long: estimating a ~200,000-token conversation before a request")
    specs = bastion_tools()
    size = 600 * KB
    messages = conversation(size, seed=7)
    while (tokens.count_messages(messages).tokens or 0) < 200_000:
        size += 50 * KB
        messages = conversation(size, seed=7)
    one_more = conversation(8 * KB, seed=8)[1:]  # the next turn, without its system prompt
    for model in ("gpt-4.1", "claude-sonnet-4-5"):
        request = ModelRequest(model, tuple(messages), specs)
        after = ModelRequest(model, tuple(fresh(messages) + one_more), specs)
        counted = tokens.count_request(request).tokens or 0
        first, then = [], []
        for _ in range(runs):
            tokens.clear_cache()
            started = time.perf_counter()
            tokens.count_request(request)
            middle = time.perf_counter()
            tokens.count_request(after)
            first.append(middle - started)
            then.append(time.perf_counter() - middle)
        print(
            f"  {model}: {len(messages):,} messages, {size / KB:,.0f} KB, estimate "
            f"{counted:,} tokens: {statistics.median(first) * 1e3:.0f} ms; the next request "
            f"(one turn more, rebuilt): {statistics.median(then) * 1e3:.1f} ms (medians of {runs})"
        )
    script = (
        "import time; t = time.perf_counter(); from runtime.context import tokens; "
        "from runtime.model.llm import Message; "
        "tokens.count_messages([Message('user', 'hello world')]); "
        "print(time.perf_counter() - t)"
    )
    cold = [
        float(
            subprocess.run(
                [sys.executable, "-c", script], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(3)
    ]
    print(f"  first estimate in a fresh process (imports, loads cl100k_base): "
          f"{statistics.median(cold) * 1e3:.0f} ms (median of 3)")  # fmt: skip


# --- error against published counts ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    id: str
    family: str
    model: str
    reported: int
    request: ModelRequest
    named: bool  # some message carries a `name`, which bastion never sends


def load_corpus(path: Path = CORPUS) -> list[Row]:
    rows = []
    for raw in json.loads(path.read_text(encoding="utf-8"))["rows"]:
        messages = tuple(Message(m["role"], m["content"]) for m in raw["messages"])
        specs = tuple(
            ToolSpec(t["name"], t["description"], t["parameters"]) for t in raw.get("tools", ())
        )
        named = any("name" in m for m in raw["messages"])
        request = ModelRequest(raw["model"], messages, specs)
        rows.append(Row(raw["id"], raw["family"], raw["model"], raw["reported"], request, named))
    return rows


def before(request: ModelRequest) -> int:
    """The compaction threshold's estimate before count_request: count_messages as it
    was (3 tokens a message, the role not counted), the tools' schemas as JSON at 4
    characters a token, no correction for Claude."""
    schemas = len(json.dumps([t.parameters for t in request.tools])) if request.tools else 0
    messages = (tokens.count_messages(request.messages).tokens or 0) - len(request.messages)
    return messages + schemas // 4


def now(request: ModelRequest) -> int:
    return tokens.count_request(request).tokens or 0


def summary(errors: list[float]) -> str:
    worst = max(errors, key=abs)
    return f"mean {statistics.mean(errors):+.1%}, worst {worst:+.1%}"


def bench_error() -> None:
    rows = load_corpus()
    print(f"3. error against provider-reported input tokens ({CORPUS.name}, {len(rows)} rows)")
    for row in rows:
        old, new = before(row.request), now(row.request)
        mark = "  (messages carry `name`)" if row.named else ""
        print(
            f"  {row.family:16} {row.model:24} reported {row.reported:4}  "
            f"before {old:4} ({(old - row.reported) / row.reported:+.0%})  "
            f"now {new:4} ({(new - row.reported) / row.reported:+.0%}){mark}"
        )
    families = sorted({r.family for r in rows})
    print("  per family (signed error = (estimate - reported) / reported):")
    for family in families:
        mine = [r for r in rows if r.family == family]
        for label, chosen in (
            ("all rows", mine),
            ("without `name`", [r for r in mine if not r.named]),
        ):
            if not chosen or (label != "all rows" and len(chosen) == len(mine)):
                continue
            old = [(before(r.request) - r.reported) / r.reported for r in chosen]
            new = [(now(r.request) - r.reported) / r.reported for r in chosen]
            absolute = statistics.mean(abs(now(r.request) - r.reported) for r in chosen)
            requests = len({json.dumps(_key(r)) for r in chosen})
            print(
                f"    {family} ({label}): {len(chosen)} published counts of {requests} distinct "
                f"requests; before {summary(old)}; now {summary(new)} "
                f"(mean |error| {absolute:.0f} tokens)"
            )


# --- computed rows: o200k_base, exact, offline ----------------------------------------

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


def o200k_base() -> Any | None:
    """OpenAI's o200k_base (gpt-4o, gpt-4.1, o-series, gpt-5), offline, or None.

    The ranks come from the data file the quicktok-v1 package ships (read, not run),
    written out as the `.tiktoken` file OpenAI publishes; it is used only if its sha256
    is the one tiktoken itself expects for that file, and tiktoken checks it again when
    it loads it."""
    spec = importlib.util.find_spec("quicktok")
    if spec is None or spec.origin is None:
        return None
    raw = (Path(spec.origin).parent / "data" / "o200k.vocab").read_bytes()
    ranks, at = [], 4  # u32 count, then (u16 length, bytes, u32 rank) per token
    while at < len(raw):
        size = int.from_bytes(raw[at : at + 2], "little")
        token = raw[at + 2 : at + 2 + size]
        rank = int.from_bytes(raw[at + 2 + size : at + 6 + size], "little")
        ranks.append((rank, token))
        at += 6 + size
    text = b"".join(base64.b64encode(t) + b" %d\n" % r for r, t in sorted(ranks))
    if hashlib.sha256(text).hexdigest() != O200K_SHA256:
        return None
    import tiktoken
    from tiktoken_ext import openai_public

    with tempfile.TemporaryDirectory(prefix="bastion-o200k-") as cache:
        (Path(cache) / hashlib.sha1(O200K_URL.encode()).hexdigest()).write_bytes(text)
        saved = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = cache
        try:
            return tiktoken.Encoding(**openai_public.o200k_base())
        finally:
            if saved is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = saved


def cookbook_count(enc: Any, messages: list[Message]) -> int:
    """The OpenAI cookbook's num_tokens_from_messages for gpt-4o (3 tokens a message,
    each key's value encoded, 3 for the reply), which matched the API's prompt_tokens
    for gpt-4o and gpt-4o-mini in the cookbook's own check."""
    total = 3
    for m in messages:
        assert isinstance(m.content, str)
        total += 3 + len(enc.encode(m.role)) + len(enc.encode(m.content, disallowed_special=()))
    return total


def bench_computed() -> None:
    enc = o200k_base()
    print("4. computed (not published): count_messages vs o200k_base in the cookbook's formula")
    if enc is None:
        print(
            "  skipped: o200k_base needs the quicktok-v1 package's data (pip install quicktok-v1)"
        )
        return
    for size in (50 * KB, 500 * KB):
        # text messages only: the formula is OpenAI's for role and content, not tool calls
        messages = [m for m in conversation(size, seed=size + 1) if not m.tool_calls]
        messages = [m if m.role != "tool" else Message("user", m.content) for m in messages]
        exact = cookbook_count(enc, messages)
        ours = tokens.count_messages(messages).tokens or 0
        print(
            f"  gpt-4o family, {len(messages):,} text messages ({size / KB:,.0f} KB of prompts, "
            f"code answers, file contents and test logs): o200k_base {exact:,}, estimate "
            f"{ours:,} ({(ours - exact) / exact:+.1%})"
        )


def _key(row: Row) -> Any:
    return [[m.role, m.content] for m in row.request.messages], [t.name for t in row.request.tools]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--only", default="speed,long,error,computed")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if tokens.encoding() is None:
        print("no tiktoken encoding available offline: nothing to measure", file=sys.stderr)
        return 1
    if "speed" in only:
        bench_speed(args.runs)
    if "long" in only:
        bench_long(args.runs)
    if "error" in only:
        bench_error()
    if "computed" in only:
        bench_computed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
