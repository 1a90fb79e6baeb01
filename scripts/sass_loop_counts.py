"""Static facts of ws-family rungs from their cubins (no GPU): ptxas resources, whole-kernel opcode counts, the
opcode counts of the consumers' steady-state loop (the backward branch whose body holds the loop's wgmma wait
``WARPGROUP.DEPBAR.LE gsb0, 0x1``), and how many MUFU.EX2 lie between each QK^T wait (gsb0, 0x1) and the next
PV wait (gsb0, 0x0), i.e. how much of the softmax can run under the consumer's own PV.

    python scripts/sass_loop_counts.py v14 v15_softmax_under_pv [--shape d128_fp16 | --all-shapes] [--format json]

A version is looked up among the landed rungs, then in kernels/wip/.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels import build, registry, sass
from profiler.errors import WhowaitsError

_BRA = re.compile(r"^(?:@!?U?P\w+\s+)?BRA(?:\.\w+)*\s+(?:`\()?(0x[0-9a-f]+)")
COUNTED = ("HGMMA", "MUFU", "FMUL", "FFMA", "FADD", "FMNMX", "F2FP", "SHFL", "SYNCS", "BAR", "WARPGROUP", "R2UR",
           "USHF")


def find(vid: str) -> registry.Version:
    try:
        return registry.get_landed_or_wip(vid)
    except WhowaitsError as err:
        raise SystemExit(str(err)) from None


def instructions(cubin) -> list[tuple[int, str]]:
    return sass.instructions(sass.sass_text(cubin))


base = sass.base_opcode
mufu_under_pv = sass.mufu_under_pv


def steady_loop(seq: list[tuple[int, str]]) -> tuple[int, int] | None:
    """(first, last offset) of the smallest backward-branch body that holds a ``gsb0, 0x1`` wait."""
    waits = [o for o, ins in seq if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in ins]
    best = None
    for off, ins in seq:
        m = _BRA.match(ins)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target < off and any(target <= w <= off for w in waits):
            if best is None or off - target < best[1] - best[0]:
                best = (target, off)
    return best


def issue_phase(seq: list[tuple[int, str]], loop: tuple[int, int] | None) -> Counter:
    """Opcode counts of the loop's batch issue: from its pingpong ``BAR.SYNC`` (a named barrier on a register
    id) to the next ``BAR.ARV``, i.e. the consumer's turn on the tensor cores up to handing it over."""
    out: Counter[str] = Counter()
    inside = False
    for off, ins in seq:
        if not loop or not loop[0] <= off <= loop[1]:
            continue
        if not inside and ins.startswith("BAR.SYNC") and " R" in ins:
            inside = True
        if inside:
            out[base(ins)] += 1
            if base(ins) == "BAR" and ".ARV" in ins:
                break
    return out


def facts(v: registry.Version, head_dim: int, dtype: str, causal: bool) -> dict:
    cfg = v.config_for(head_dim, dtype, causal)
    r = build.build(v, cfg)
    seq = instructions(r.cubin)
    loop = steady_loop(seq)
    in_loop = Counter(base(ins) for o, ins in seq if loop and loop[0] <= o <= loop[1])
    issue = issue_phase(seq, loop)
    return {
        "version": v.id, "config": cfg.short_form(), "registers": r.registers, "spill_bytes": r.spill_bytes,
        "smem_dynamic_bytes": r.smem_dynamic_bytes, "smem_static_bytes": r.smem_static_bytes,
        "kernel": {k: r.sass_opcodes.get(k, 0) for k in (*COUNTED, "USETMAXREG")},
        "loop_offsets": list(loop) if loop else None, "loop_instructions": sum(in_loop.values()),
        "loop": {k: in_loop.get(k, 0) for k in COUNTED},
        "issue_phase_instructions": sum(issue.values()),
        "issue_phase": dict(issue.most_common()),
        "mufu_ex2_between_qk_wait_and_pv_wait": mufu_under_pv(seq),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("versions", nargs="+")
    ap.add_argument("--shape", default="d128_fp16", help="d{64,128}_{fp16,bf16}[_causal] (default d128_fp16)")
    ap.add_argument("--all-shapes", action="store_true", help="every head dim x dtype x causal the rung supports")
    ap.add_argument("--format", choices=("table", "json"), default="table")
    args = ap.parse_args(argv)
    rows = []
    for vid in args.versions:
        v = find(vid)
        combos = ([(d, t, c) for d in v.head_dims for t in v.dtypes for c in ((False, True) if v.causal else (False,))]
                  if args.all_shapes else [(int(args.shape.split("_")[0][1:]), args.shape.split("_")[1],
                                            args.shape.endswith("_causal"))])
        rows += [facts(v, *c) for c in combos]
    if args.format == "json":
        print(json.dumps(rows, indent=1))
        return 0
    for row in rows:
        print(f"{row['version']} [{row['config']}]: {row['registers']} registers, {row['spill_bytes']} B spills, "
              f"{row['smem_dynamic_bytes']} B dynamic + {row['smem_static_bytes']} B static smem")
        print("  kernel: " + ", ".join(f"{k} {n}" for k, n in row["kernel"].items()))
        print(f"  steady loop {row['loop_offsets']} ({row['loop_instructions']} instructions): "
              + ", ".join(f"{k} {n}" for k, n in row["loop"].items()))
        print(f"  loop's batch issue (BAR.SYNC..BAR.ARV, {row['issue_phase_instructions']} instructions): "
              + ", ".join(f"{k} {n}" for k, n in row["issue_phase"].items()))
        print(f"  MUFU.EX2 between each QK^T wait and the next PV wait: {row['mufu_ex2_between_qk_wait_and_pv_wait']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
