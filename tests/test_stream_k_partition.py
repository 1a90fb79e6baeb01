"""The partition of v41's StreamKTailScheduler (kernels/common/sm90/stream_k.cuh), transcribed line by line: whole
tiles b + k G for the full rounds, then the last round's key-block units split evenly where that shortens the
busiest CTA. The properties the kernel's correctness rests on, over many (tiles, key blocks, CTAs): every tile is
covered once, by pieces in key order; a CTA has at most one piece that does not end its tile (its one workspace
slot); the CTA holding a tile's last piece names, with merge_from and has_units, exactly the CTAs of its other
pieces, all lower than itself (so no wait can form a cycle). The CUDA itself runs on the GPU (kernels.check, with
shapes split among 2 to 8 CTAs)."""

from __future__ import annotations

import random

import pytest


def schedule(tiles: int, nb: int, g: int) -> dict[int, list[tuple[int, int, int]]]:
    """tile -> [(cta, kv_begin, kv_end)] as StreamKTailScheduler hands them out, and each CTA's load."""
    full, rest = tiles // g, tiles - (tiles // g) * g
    split = rest > 0 and (rest * nb + g - 1) // g < nb
    rounds, base, units = (full if split else -(-tiles // g)), full * g, (rest * nb if split else 0)

    def unit_begin(c: int) -> int:
        return units * c // g

    cover: dict[int, list[tuple[int, int, int]]] = {}
    for b in range(g):
        for k in range(rounds):
            if b + k * g < tiles:
                cover.setdefault(b + k * g, []).append((b, 0, nb))
        u0, u1 = unit_begin(b), unit_begin(b + 1)
        if u1 > u0:
            t_first, t_last = base + u0 // nb, base + (u1 - 1) // nb
            for t in range(t_first, t_last + 1):
                kb = u0 - (t_first - base) * nb if t == t_first else 0
                ke = u1 - (t_last - base) * nb if t == t_last else nb
                cover.setdefault(t, []).append((b, kb, ke))
    for t, pieces in cover.items():
        pieces.sort(key=lambda p: p[1])
        if len(pieces) > 1:
            merging = pieces[-1][0]
            u = (t - base) * nb
            merge_from = ((u + 1) * g - 1) // units
            named = [j for j in range(merge_from, merging) if unit_begin(j + 1) > unit_begin(j)]
            assert named == [p[0] for p in pieces[:-1]], (t, named, pieces)
    return cover


CASES = [(2048, 32, 132), (512, 8, 132), (2048, 128, 132), (640, 32, 132), (544, 32, 132), (288, 16, 132),
         (3, 3, 2), (25, 5, 2), (1, 8, 1), (100, 1, 100)]
random.seed(41)
CASES += [(t, random.randint(1, 64), random.randint(1, t)) for t in (random.randint(1, 3000) for _ in range(300))]


@pytest.mark.parametrize("tiles,nb,g", CASES)
def test_pieces_cover_each_tile_once_and_merge_downwards(tiles, nb, g):
    cover = schedule(tiles, nb, g)
    assert sorted(cover) == list(range(tiles))
    partials: dict[int, int] = {}
    for pieces in cover.values():
        assert pieces[0][1] == 0 and pieces[-1][2] == nb
        assert all(a[2] == c[1] for a, c in zip(pieces, pieces[1:]))
        assert all(p[0] < pieces[-1][0] for p in pieces[:-1])
        for p in pieces[:-1]:
            partials[p[0]] = partials.get(p[0], 0) + 1
    assert all(n == 1 for n in partials.values())


def test_the_split_shortens_the_busiest_cta_at_the_bench_shapes():
    """b4_h16_s4096_d128 and b1_h16_s16384_d128: 2,048 tiles of 32 / 128 key blocks on 132 CTAs, busiest CTA 512 ->
    497 and 2,048 -> 1,986 key blocks; the seed shape (512 tiles of 8) is left whole (8 = a tile either way)."""
    def busiest(tiles, nb, g):
        load = [0] * g
        for pieces in schedule(tiles, nb, g).values():
            for b, kb, ke in pieces:
                load[b] += ke - kb
        return max(load)

    assert busiest(2048, 32, 132) == 497 and busiest(2048, 128, 132) == 1986 and busiest(512, 8, 132) == 32
    assert all(len(p) == 1 for p in schedule(512, 8, 132).values())
