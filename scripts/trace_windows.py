"""What the measured trace (``-DWHOWAITS_TRACE``, docs/trace.md) puts inside each wgmma commit -> wait window, read
from the SASS (no GPU): for every HGMMA group of a ws rung (its last ``HGMMA ... gsb0``) the
``WARPGROUP.DEPBAR.LE gsb0, N`` that retires it (address order, groups retire in order: ``DEPBAR.LE N`` retires
all but the N most recent), the instructions strictly between them in the traced build, the same window in the
untraced build (the rung's own ``kernels.build``), and the difference: the trace's instructions in the window
(``trace_ops``: that difference less the kernel's own FP / predicate / uniform work the schedule moves), by opcode (CS2R = a clock read, STS/LDS/STG = the stamp's stores and loads, BSSY/BSYNC/BRA = the leader-only
branch). Also the traced build's registers and spills.

    python scripts/trace_windows.py v10 v11 v12 v13 v14 [--format json] [--list] [--waits]

``--waits``: the wait-log build (``-DWHOWAITS_TRACE_WAITS``, ``whowaits trace --waits``) instead of the event trace.

``--list`` prints each window's traced instructions. tests/test_trace.py holds the bound (the trace adds at
most ``MAX_EXTRA`` instructions, no LDS/LDG/STG, to any window of a traced ws rung).
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

_DEPBAR = re.compile(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*(0x[0-9a-f]+)")
VERSIONS = ("v10", "v11", "v12", "v13", "v14")
MEMORY = ("LDS", "LDG", "STG", "LD", "ST", "ATOMS", "ATOMG", "RED")  # what a nearly free stamp must not hold
# not counted as the trace's: the kernel's own floating-point, predicate-logic and uniform-datapath work (the
# softmax and its masks, the next group's descriptors), which the traced schedule moves into or out of a window
KERNEL_OWN = ("FADD", "FFMA", "FMUL", "FMNMX", "FSEL", "FSETP", "MUFU", "SHFL", "F2FP", "HADD2", "HMUL2", "PLOP3")


def trace_ops(extra: dict) -> int:
    """The trace's instructions in a window: the traced build's extra opcodes less KERNEL_OWN and U*."""
    return sum(v for k, v in extra.items() if k not in KERNEL_OWN and not k.startswith("U"))


instructions = sass.instructions
opcode = sass.base_opcode


def windows(seq: list[tuple[int, str]]) -> list[dict]:
    """Every HGMMA group (its last ``HGMMA ... gsb0``) with the wait that retires it, in address order."""
    out, pending = [], []
    for i, (off, ins) in enumerate(seq):
        if opcode(ins) == "HGMMA" and "gsb0" in ins:
            pending.append(i)
            continue
        m = _DEPBAR.search(ins)
        if m:
            keep = int(m.group(1), 16)
            retire, pending = (pending[:-keep], pending[-keep:]) if keep else (pending, [])
            for c in retire:
                body = [s for _, s in seq[c + 1:i]]
                out.append({"commit": seq[c][0], "wait": off, "wait_n": keep, "body": body,
                            "ops": Counter(opcode(s) for s in body)})
    return out


def flushes(seq: list[tuple[int, str]]) -> list[dict]:
    """The stamp at each ``WARPGROUP.DEPBAR.LE gsb0, 0x0`` (a wait_group 0's end, the ordinary stamp that copies
    the parked events out): from the DEPBAR to the cursor's write-back (``STS.64``), in address order (the
    copy loop counted once)."""
    out = []
    for i, (off, ins) in enumerate(seq):
        m = _DEPBAR.search(ins)
        if not m or int(m.group(1), 16) != 0:
            continue
        for j in range(i + 1, min(i + 200, len(seq))):
            tok = seq[j][1].split()
            if opcode(seq[j][1]) == "STS" and ".64" in tok[1 if tok[0].startswith("@") else 0]:
                body = [s for _, s in seq[i + 1:j + 1]]
                out.append({"wait": f"{off:#06x}", "instructions": len(body),
                            "ops": dict(sorted(Counter(opcode(s) for s in body).items())),
                            "clock_at": next(k for k, s in enumerate(body) if "SR_CLOCKLO" in s) + 1})
                break
    return out


def _sass(cubin) -> list[tuple[int, str]]:
    return instructions(sass.sass_text(cubin))


def analyse(vid: str, mode: str = "events", classes: str = "all") -> dict:
    """The windows of ``vid``'s traced build (``mode`` "waits": the wait-log build, ``--waits``, logging the
    record ``classes``, ``--class``)."""
    from kernels import tracebuild as T

    ver = registry.get_landed_or_wip(vid)
    cfg = ver.config_for(128, "fp16", False)
    plain = build.build(ver, cfg)
    traced = T.build_traced(ver, cfg, mode, classes)
    st = _sass(traced.cubin)
    wp, wt = windows(_sass(plain.cubin)), windows(st)
    if len(wp) != len(wt):
        raise SystemExit(f"{ver.id}: {len(wp)} windows untraced, {len(wt)} traced")
    rows = []
    for p, t in zip(wp, wt):
        extra = t["ops"] - p["ops"]
        rows.append({"commit": f"{t['commit']:#06x}", "wait": f"{t['wait']:#06x}", "wait_n": t["wait_n"],
                     "untraced": len(p["body"]), "traced": len(t["body"]),
                     "extra": len(t["body"]) - len(p["body"]), "extra_ops": dict(sorted(extra.items())),
                     "trace_ops": trace_ops(extra),
                     "clock_reads": sum(1 for s in t["body"] if opcode(s) == "CS2R" and "SR_CLOCKLO" in s),
                     "memory_ops": {k: v for k, v in t["ops"].items() if k in MEMORY},
                     "body": t["body"]})
    return {"version": ver.id, "mode": mode, "config": cfg.short_form(), "registers_traced": traced.registers,
            "spill_stores_traced": traced.spill_store_bytes, "spill_loads_traced": traced.spill_load_bytes,
            "registers_untraced": plain.registers, "windows": rows, "flushes": flushes(st)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("versions", nargs="*", default=list(VERSIONS))
    ap.add_argument("--format", choices=("text", "json"), default="text")
    ap.add_argument("--list", action="store_true", help="print each window's traced instructions")
    ap.add_argument("--waits", action="store_true", help="the wait-log build (-DWHOWAITS_TRACE_WAITS) instead")
    ap.add_argument("--class", dest="classes", default="all", help="the wait log's record class (kernels.tracebuild.WAIT_CLASSES)")
    a = ap.parse_args(argv)
    res = [analyse(v, "waits" if a.waits else "events", a.classes) for v in a.versions]
    if a.format == "json":
        for r in res:
            for w in r["windows"]:
                w.pop("body")
        json.dump(res, sys.stdout, indent=1)
        print()
        return 0
    for r in res:
        print(f"{r['version']} {r['config']}: traced {r['registers_traced']} registers "
              f"(untraced {r['registers_untraced']}), spills {r['spill_stores_traced']}/{r['spill_loads_traced']} B")
        for w in r["windows"]:
            ex = " ".join(f"{k}:{v}" for k, v in w["extra_ops"].items())
            mem = " ".join(f"{k}:{v}" for k, v in w["memory_ops"].items()) or "-"
            print(f"  HGMMA gsb0 {w['commit']} -> DEPBAR.LE {w['wait_n']} {w['wait']}: {w['untraced']:4d} untraced, "
                  f"{w['traced']:4d} traced; trace: {w['trace_ops']:3d} instructions, {w['clock_reads']} clock reads, "
                  f"memory ops {mem} [extra opcodes {ex}]")
            if a.list:
                for s in w["body"]:
                    print(f"      {s}")
        for f in r["flushes"]:
            ops = " ".join(f"{k}:{v}" for k, v in f["ops"].items())
            print(f"  wait_group 0 end {f['wait']}: clock read {f['clock_at']} instruction(s) after the DEPBAR; "
                  f"stamp + copy-out {f['instructions']} instructions to the cursor write-back [{ops}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
