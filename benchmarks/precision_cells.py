"""Does a task's default precision move its published numbers? fp32 pages against bf16 pages.

A task's default moves to bf16 only when running it both ways moves no cell by more
than the cell's 95 % half-width and changes no claim verdict or tie group (README,
"Precision"). This script reads the pages `relbench run` drew for one task at each
precision (the same tasks file, two stores) and prints, per task:

* every ranked cell (each score column with an interval, the paired Δ aside): the fp32 score [95 % CI], the bf16 score, |Δ|, the fp32 half-width
  and whether |Δ| exceeds it (``MOVED``);
* every claim's verdict at both precisions;
* the first row's tie group (bold rows) at both precisions;

and ends with one line per task: ``qualifies`` or ``stays fp32`` and why.

    relbench run tasks.yaml --task T --precision bf16 --output /tmp/bf16/results \\
        --leaderboards /tmp/bf16/lb
    python benchmarks/precision_cells.py leaderboards /tmp/bf16/lb --task T [--task U]
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

CELL = re.compile(r"(-?\d+\.\d+) \[(-?\d+\.\d+), (-?\d+\.\d+)\]")
VERDICT = re.compile(r"^- (.+?): \*\*(holds|does not hold|inconclusive)\*\*", re.M)


@dataclass(frozen=True)
class Cell:
    """One ranked row's score and 95 % interval, and whether it is in the first row's group."""

    score: float
    low: float
    high: float
    tied: bool


def ranking(page: str) -> dict[tuple[str, ...], Cell]:
    """The scored cells of a page's ranking tables (the ``#``-numbered tables): every
    column with a 95 % interval but the paired Δ, keyed by the table's heading, the row's
    identity columns (those before the first score column) and the column."""
    cells: dict[tuple[str, ...], Cell] = {}
    heading = ""
    lines = page.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("#"):
            heading = line.lstrip("# ").strip()
        if not line.startswith("| #"):
            continue
        header = [h.strip() for h in line.strip("|").split("|")]
        scored = [j for j, h in enumerate(header) if "[95 % CI]" in h and not h.startswith("Δ")]
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            fields = [f.strip() for f in row.strip("|").split("|")]
            for j in scored:
                match = CELL.search(fields[j])
                if match:
                    key = (heading, *fields[1:scored[0]], header[j].split(" [")[0])
                    cells[key] = Cell(*map(float, match.groups()), tied=fields[j].startswith("**"))
    return cells


def verdicts(page: str) -> dict[str, str]:
    """Claim → verdict, as the page states them."""
    return dict(VERDICT.findall(page))


def compare(task: str, fp32_page: str, bf16_page: str) -> list[str]:
    """The report lines of one task; the last says whether bf16 qualifies."""
    a, b = ranking(fp32_page), ranking(bf16_page)
    out = [f"== {task}", f"{'cell':90s} {'fp32 [95 % CI]':>24s} {'bf16':>7s} {'|Δ|':>7s} {'half-width':>10s}"]
    moved, regrouped = [], []
    for key, cell in a.items():
        other = b.get(key)
        name = " · ".join(k for k in key[1:] if k not in ("-", ""))
        if other is None:
            out.append(f"{name:90s} missing at bf16")
            moved.append(name)
            continue
        delta, half = abs(other.score - cell.score), (cell.high - cell.low) / 2
        flag = "MOVED" if delta > half else ""
        if flag:
            moved.append(name)
        if cell.tied != other.tied:
            regrouped.append(name)
        out.append(f"{name:90s} {cell.score:.3f} [{cell.low:.3f}, {cell.high:.3f}] {other.score:7.3f} {delta:7.3f} "
                   f"{half:10.3f} {flag}{' GROUP' if cell.tied != other.tied else ''}")
    va, vb = verdicts(fp32_page), verdicts(bf16_page)
    changed = [c for c in va if vb.get(c) != va[c]]
    for claim, verdict in va.items():
        out.append(f"claim: {claim}: {verdict} → {vb.get(claim, 'missing')}")
    why = [f"{len(moved)} cell(s) beyond their half-width" if moved else "",
           f"{len(regrouped)} tie-group change(s)" if regrouped else "",
           f"{len(changed)} claim verdict(s) changed" if changed else ""]
    why = [w for w in why if w]
    out.append(f"{task}: {'stays fp32: ' + ', '.join(why) if why else 'qualifies'} "
               f"({len(a)} cells, {len(va)} claims compared)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fp32", type=Path, help="leaderboards folder drawn at fp32")
    parser.add_argument("bf16", type=Path, help="leaderboards folder drawn at bf16")
    parser.add_argument("--task", action="append", required=True)
    args = parser.parse_args()
    for task in args.task:
        pages = [folder / f"{task}.md" for folder in (args.fp32, args.bf16)]
        missing = [str(p) for p in pages if not p.is_file()]
        if missing:
            sys.exit(f"precision_cells: no page {', '.join(missing)}; run the task into that folder first")
        print("\n".join(compare(task, *(p.read_text() for p in pages))), end="\n\n")


if __name__ == "__main__":
    main()
