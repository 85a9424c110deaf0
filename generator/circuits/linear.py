"""XOR programs for GF(2)-linear maps: which pairs to add so that every row of a matrix is one
column. Rows are bitmasks over columns; a step (a, b) appends column a + column b.

Two heuristics, the shorter program kept: Paar's greedy (C. Paar, "Optimized arithmetic for
Reed-Solomon encoders", ISIT 1997: add the pair of columns that occurs in the most rows; ties broken
at random, the shortest of several seeded runs), and for narrow matrices Boyar and Peralta's
distance heuristic (J. Boyar, R. Peralta, "A new combinational logic minimization technique with
applications to cryptology", SEA 2010: add the sum of two columns that most lowers the sum of the
rows' distances, the fewest additions each row still needs; ties to the largest Euclidean norm of
the distances). The distances come from a breadth-first search over all 2^n vectors, hence narrow.
"""
from __future__ import annotations

from collections import Counter
from random import Random

PAAR_TRIES = 64
BP_MAX_COLUMNS = 10  # 2^10 vectors a search, a search per step


def xor_program(rows: list[int], columns: int) -> list[tuple[int, int]]:
    runs = [paar(rows, columns, Random(seed)) for seed in range(PAAR_TRIES)]
    if columns <= BP_MAX_COLUMNS:
        runs.append(boyar_peralta(rows, columns))
    return min(runs, key=len)


def paar(rows: list[int], columns: int, rng: Random) -> list[tuple[int, int]]:
    rows = list(rows)
    steps: list[tuple[int, int]] = []
    while True:
        pairs: Counter[tuple[int, int]] = Counter()
        for row in rows:
            idx = [i for i in range(columns) if row >> i & 1]
            pairs.update((a, b) for k, a in enumerate(idx) for b in idx[k + 1:])
        if not pairs:
            return steps
        most = max(pairs.values())
        a, b = rng.choice(sorted(p for p, n in pairs.items() if n == most))
        steps.append((a, b))
        rows = [r ^ (1 << a) ^ (1 << b) ^ (1 << columns) if r >> a & 1 and r >> b & 1 else r for r in rows]
        columns += 1


def boyar_peralta(rows: list[int], columns: int) -> list[tuple[int, int]]:
    base = [1 << i for i in range(columns)]
    targets = list(dict.fromkeys(rows))
    steps: list[tuple[int, int]] = []
    while True:
        fewest = fewest_terms(base, columns)
        dist = [fewest[t] - 1 for t in targets]
        if max(dist) <= 0:
            return steps
        have = set(base)
        best: tuple[tuple[int, int], int, int, int] | None = None
        for j in range(len(base)):
            for k in range(j + 1, len(base)):
                v = base[j] ^ base[k]
                if v in have:
                    continue
                new = [min(d, fewest[t ^ v]) for d, t in zip(dist, targets)]  # v plus fewest[t ^ v] terms
                score = (sum(new), -sum(x * x for x in new))
                if best is None or score < best[0]:
                    best = (score, j, k, v)
        assert best is not None
        _, j, k, v = best
        steps.append((j, k))
        base.append(v)


def fewest_terms(base: list[int], columns: int) -> list[int]:
    """For every vector, the fewest base vectors that sum to it (breadth-first from 0)."""
    fewest = [-1] * (1 << columns)
    fewest[0] = 0
    layer = [0]
    while layer:
        nxt = []
        for x in layer:
            for b in base:
                if fewest[x ^ b] < 0:
                    fewest[x ^ b] = fewest[x] + 1
                    nxt.append(x ^ b)
        layer = nxt
    return fewest
