"""The rows every bench script reports, gathered into one table at the end.

Each script prints its own detail as it goes and also calls `record` for the rows
that have a reference and a target. `nox -s bench` points `BASTION_BENCH_ROWS` at
one file for the whole session; `python tests/bench/rows.py FILE` then prints the
table (markdown) with the machine's load, which is what the closing note quotes.
Run on its own, a script records nothing beyond its printed lines.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ENV = "BASTION_BENCH_ROWS"


def record(
    what: str,
    ours: str,
    reference: str,
    ratio: float | None,
    target: float | None,
    meets: bool | None = None,
    note: str = "",
) -> None:
    """One row: `ratio` is ours / reference (None when the row has no reference),
    `target` the most that ratio may be (None: reported, no target). `meets` may
    be given for rows whose target is not a ratio (an absolute bound)."""
    if meets is None and ratio is not None and target is not None:
        meets = ratio <= target
    path = os.environ.get(ENV)
    if not path:
        return
    line = {
        "what": what,
        "ours": ours,
        "reference": reference,
        "ratio": ratio,
        "target": target,
        "meets": meets,
        "note": note,
        "load": os.getloadavg()[0],
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def _cell_target(row: dict) -> str:
    if row["meets"] is None:
        return ""
    bound = f"<= {row['target']:g}x" if row["target"] is not None else row["note"]
    return f"{bound}: {'meets' if row['meets'] else 'MISSES'}"


def table(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lines = [
        "| row | bastion | reference | ratio | target | load |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratio = f"{row['ratio']:.2f}x" if row["ratio"] is not None else ""
        lines.append(
            f"| {row['what']} | {row['ours']} | {row['reference']} | {ratio} "
            f"| {_cell_target(row)} | {row['load']:.1f} |"
        )
    judged = [row for row in rows if row["meets"] is not None]
    met = sum(1 for row in judged if row["meets"])
    lines.append("")
    lines.append(f"{met} of {len(judged)} rows with a target meet it; {len(rows)} rows in all.")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/bench/rows.py ROWS_FILE", file=sys.stderr)
        return 2
    path = Path(argv[0])
    if not path.exists():
        print(f"no rows were recorded in {path}: run the bench scripts with {ENV} set")
        return 1
    print(table(path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
