"""The busiest CTA of the persistent d64 schedule, in tile-times, for tile orders that treat the partial last tile
of each head differently (ladder IV's next lever at head_dim 64; no GPU).

At b4_h32_s4096_d64 the d64 rungs (v32, v34) use 192-row tiles: 4096 / 192 = 21.33, so the 22nd query tile of each
head holds 64 valid rows, and its other two consumer warpgroups compute rows beyond S (TMA zero-fills their Q, the
TMA store drops their O): 128 of the 4,224 rows computed per head, 3.0% of the MMA work. On 132 CTAs the static
strided order (kernels/common/sm90/tile_scheduler.cuh: CTA b takes positions b, b + 132, ...) gives 44 CTAs 22 tiles
and the rest 21, so the kernel lasts 22 tile-times whatever a partial tile costs. If a tile whose two upper consumers
skip their work cost ``w`` of a full one (``--weights``), this prints the busiest CTA's load for:

  current   each head's query blocks last-first (v34: the partial tile first in its head);
  rotate    each head's order rotated by its index;
  last      every full tile first, head-major, then the 128 partial tiles;
  balanced  a static assignment that fills the CTAs with 21 full tiles' worth (the lower bound for whole tiles).

Usage: python scripts/d64_partial_tiles.py [--heads 128] [--m-blocks 22] [--ctas 132] [--weights 0.45 0.55 0.7 1.0]
"""

from __future__ import annotations

import argparse


def busiest(order: list[tuple[int, int]], m_blocks: int, ctas: int, w: float) -> float:
    """The largest per-CTA load of the strided static order ``order`` (a list of (head, query block)); the
    partial tile is query block m_blocks - 1 and weighs ``w``."""
    load = [0.0] * ctas
    for p, (_, q) in enumerate(order):
        load[p % ctas] += w if q == m_blocks - 1 else 1.0
    return max(load)


def balanced(heads: int, m_blocks: int, ctas: int, w: float) -> float:
    """Greedy longest-processing-time assignment of all tiles (full first, then partial): the bound any static
    schedule of whole tiles can reach here."""
    load = [0.0] * ctas
    for weight in [1.0] * (heads * (m_blocks - 1)) + [w] * heads:
        i = min(range(ctas), key=load.__getitem__)
        load[i] += weight
    return max(load)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--heads", type=int, default=128, help="B x H (b4_h32: 128)")
    ap.add_argument("--m-blocks", type=int, default=22, help="query tiles a head (ceil(4096 / 192) = 22)")
    ap.add_argument("--ctas", type=int, default=132)
    ap.add_argument("--weights", type=float, nargs="+", default=[0.45, 0.55, 0.7, 1.0])
    a = ap.parse_args()
    h, m, g = a.heads, a.m_blocks, a.ctas
    print(f"{h} heads x {m} query tiles on {g} CTAs; the busiest CTA in tile-times (ideal = total work / CTAs)")
    for w in a.weights:
        cur = [(x, m - 1 - r) for x in range(h) for r in range(m)]
        rot = [(x, (m - 1 - r + x) % m) for x in range(h) for r in range(m)]
        last = [(x, q) for x in range(h) for q in range(m - 1)] + [(x, m - 1) for x in range(h)]
        ideal = (h * (m - 1) + h * w) / g
        lb = balanced(h, m, g, w)
        c = busiest(cur, m, g, w)
        print(f"w = {w:.2f}: ideal {ideal:.2f}  current {c:.2f}  rotate {busiest(rot, m, g, w):.2f}  "
              f"last {busiest(last, m, g, w):.2f}  balanced {lb:.2f}  (balanced: {100 * (1 - lb / c):.1f}% less "
              "than current)")


if __name__ == "__main__":
    main()
