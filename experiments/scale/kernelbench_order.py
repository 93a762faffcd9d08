"""The order in which a whole-KernelBench bench takes its problems, so that a bench cut short has done a random sample
of every level: each level's problems shuffled with a fixed seed, then interleaved in proportion to the levels' sizes
(level 1 : level 2 : level 3 = 100 : 100 : 50 takes two of level 1, two of level 2, one of level 3 in turn).

    python3 experiments/scale/kernelbench_order.py KERNELBENCH_DIR [--seed 0] [--match REGEX] > order.txt

``--match``: only the problems whose ``level/file`` name the regular expression finds, case-insensitive (issue 62's
heavy operations of levels 1 and 2: ``--match '^level[12]/.*(conv|matmul|gemm|matrix|linear)'``).
"""
import argparse
import random
import re
from pathlib import Path


def order(root: Path, seed: int = 0, match: str = "") -> list[str]:
    levels = {}
    for folder in sorted(root.glob("level*")):
        names = sorted(f"{folder.name}/{p.name}" for p in folder.glob("*.py")
                       if re.search(match, f"{folder.name}/{p.name}", re.IGNORECASE))
        if not names:
            continue
        random.Random(f"{seed}/{folder.name}").shuffle(names)
        levels[folder.name] = names
    total = sum(len(v) for v in levels.values())
    taken = {name: 0 for name in levels}
    out = []
    while len(out) < total:  # next: the level furthest behind its share of what has been taken
        name = min((n for n in levels if taken[n] < len(levels[n])),
                   key=lambda n: ((taken[n] + 1) / len(levels[n]), n))
        out.append(levels[name][taken[name]])
        taken[name] += 1
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--match", default="", help="a regular expression the problems' level/file names must match")
    args = parser.parse_args()
    print("\n".join(order(args.root, args.seed, args.match)))
