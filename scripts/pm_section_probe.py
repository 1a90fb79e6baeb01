"""Probe what PM-sampling sections cost (run on the GPU machine; one device call).

    OUT=$OUT python3 scripts/pm_section_probe.py [--version v07_tuned]

1. Copies ncu's own PmSampling / PmSampling_WarpStates section files to $OUT (the text format of a
   Timeline section is not documented; ours is trimmed from them).
2. Writes trimmed variants (only the metrics whowaits' timeline views read; warp states cut to N reasons)
   with a generic protobuf-text tree edit (no schema needed), each in its own folder beside the whowaits
   sections, and profiles the version under each (`--set whowaits`), printing ncu's replay passes.
3. Keeps each variant's report and ncu's raw page (so the metric names that land in a report are known).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_TOKEN = re.compile(r'\s*(?:(#[^\n]*)|("(?:[^"\\]|\\.)*")|([{}:])|([^\s{}:"#]+))', re.S)


def tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ValueError(f"cannot tokenise at {text[pos:pos + 40]!r}")
        pos = m.end()
        if m.group(1):
            continue
        out.append(m.group(2) or m.group(3) or m.group(4))
    return out


def parse(toks: list[str], i: int = 0, depth: int = 0):
    """[(key, value)] where value is a raw scalar token (str, quotes kept) or a nested list."""
    node = []
    while i < len(toks):
        t = toks[i]
        if t == "}":
            return node, i + 1
        key = t
        i += 1
        if toks[i] == ":":
            i += 1
            if toks[i] == "{":
                sub, i = parse(toks, i + 1, depth + 1)
                node.append((key, sub))
            else:
                val = toks[i]
                i += 1
                while i < len(toks) and toks[i].startswith('"') and val.startswith('"'):  # "a" "b" concat
                    val = val[:-1] + toks[i][1:]
                    i += 1
                node.append((key, val))
        elif toks[i] == "{":
            sub, i = parse(toks, i + 1, depth + 1)
            node.append((key, sub))
        else:
            raise ValueError(f"unexpected token {toks[i]!r} after {key!r}")
    return node, i


def dump(node, indent: int = 0) -> str:
    pad = "  " * indent
    lines = []
    for k, v in node:
        if isinstance(v, list):
            lines.append(f"{pad}{k} {{")
            lines.append(dump(v, indent + 1))
            lines.append(f"{pad}}}")
        else:
            lines.append(f"{pad}{k}: {v}")
    return "\n".join(x for x in lines if x != "")


def metric_names(node) -> list[str]:
    out = []
    for k, v in node:
        if isinstance(v, list):
            out += metric_names(v)
        elif k == "Name" and "__" in v:
            out.append(v.strip('"'))
    return out


def trim(node, keep) -> list:
    """Drop every message whose subtree named metrics and names none that ``keep`` accepts any more."""
    out = []
    for k, v in node:
        if isinstance(v, list):
            had = metric_names(v)
            sub = trim(v, keep)
            if had and not metric_names(sub):
                continue
            out.append((k, sub))
        elif k == "Name" and "__" in v and not keep(v.strip('"')):
            return []  # this message is one metric we do not want
        else:
            out.append((k, v))
    return out


def retag(node, ident: str, display: str) -> list:
    out = []
    for k, v in node:
        if k == "Identifier" and not isinstance(v, list):
            out.append((k, f'"{ident}"'))
        elif k == "DisplayName" and not isinstance(v, list):
            out.append((k, f'"{display}"'))
        elif k == "Sets":
            continue
        else:
            out.append((k, v))
    # Sets after Order (or at the end)
    idx = next((i + 1 for i, (k, _) in enumerate(out) if k == "Order"), len(out))
    out.insert(idx, ("Sets", [("Identifier", '"whowaits"')]))
    return out


PM_KEEP = ("sm__pipe_tensor_cycles_active_realtime", "sm__inst_executed_realtime", "dramc__throughput",
           "lts__throughput", "ctas_launched", "sm__cycles_active", "gpu__time_duration", "gpc__cycles_elapsed",
           "profiler__pmsampler")
REASONS8 = ("long_scoreboard", "short_scoreboard", "barrier", "wait", "math_pipe_throttle", "mio_throttle",
            "selected", "not_selected")
REASONS4 = ("long_scoreboard", "short_scoreboard", "barrier", "wait")


def keep_pm(name: str) -> bool:
    return any(s in name for s in PM_KEEP)


def keep_ws(reasons):
    def keep(name: str) -> bool:
        if "issue_stalled" in name or "warps_stalled" in name:
            return any(re.search(rf"stalled_{r}(?![a-z_])", name) for r in reasons)
        return "issue_stalled" not in name and keep_pm(name) or "warps_active" in name or "profiler__" in name \
            or "gpu__time" in name or "gpc__cycles" in name
    return keep


def run(cmd: list[str], log: Path, timeout: int = 120) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    cp = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    text = cp.stdout + cp.stderr
    log.write_text(" ".join(cmd) + "\n" + text)
    return cp.returncode, text, wall


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", default="v07_tuned")
    ap.add_argument("--shape", default="b1_h64_s1024_d128_fp16")
    args = ap.parse_args()
    out = Path(os.environ.get("OUT", "/tmp/pmprobe"))
    work = out / "probe"
    work.mkdir(parents=True, exist_ok=True)
    from profiler import collect

    ncu = collect.find_ncu()
    root = Path(subprocess.run(["bash", "-c", f"dirname $(readlink -f $(which {ncu}))"], capture_output=True,
                               text=True).stdout.strip())
    stock = {}
    for name in ("PmSampling.section", "PmSampling_WarpStates.section"):
        hits = list(root.rglob(name)) or list(Path("/").glob(f"opt/**/{name}")) + list(Path("/usr").rglob(name))
        print(name, [str(h) for h in hits[:3]], flush=True)
        if hits:
            shutil.copy(hits[0], work / name)
            stock[name] = hits[0].read_text()
    trees = {n: parse(tokens(t))[0] for n, t in stock.items()}
    for n, t in trees.items():
        print(n, "metrics:", len(metric_names(t)), sorted(set(metric_names(t)))[:200], flush=True)
    pm = retag(trim(trees["PmSampling.section"], keep_pm), "WhowaitsPmSampling", "Whowaits: PM Sampling")
    variants = {"pm": [("WhowaitsPmSampling.section", pm)]}
    for label, reasons in (("ws4", REASONS4), ("ws8", REASONS8), ("wsall", None)):
        keep = keep_ws(reasons) if reasons else (lambda n: True)
        ws = retag(trim(trees["PmSampling_WarpStates.section"], keep), "WhowaitsPmWarpStates",
                   "Whowaits: PM Sampling Warp States")
        variants["pm+" + label] = [("WhowaitsPmSampling.section", pm), ("WhowaitsPmWarpStates.section", ws)]
        variants[label] = [("WhowaitsPmWarpStates.section", ws)]
    base = collect.plan_version(args.version, args.shape)
    collect._build_versions([base.targets[0].runner_arg], base.shape)
    results = {}
    order = ["base", "pm", "ws4", "pm+ws4", "pm+ws8", "pm+wsall"]
    for label in order:
        folder = work / f"sec_{label.replace('+', '_')}"
        folder.mkdir(exist_ok=True)
        for f in collect.SECTIONS_DIR.glob("*.section"):
            shutil.copy(f, folder / f.name)
        shutil.copy(collect.SECTIONS_DIR / "section-schema.textproto", folder)
        for fname, tree in variants.get(label, []):
            (folder / fname).write_text(dump(tree) + "\n")
        argv = base.ncu_argv(ncu, work / f"rep_{label.replace('+', '_')}")
        argv[argv.index("--section-folder") + 1] = str(folder)
        rc, text, wall = run(argv, work / f"log_{label.replace('+', '_')}.txt")
        outcome = collect.parse_ncu_output(text, rc)
        passes = outcome.profiled[0][1] if outcome.profiled else None
        results[label] = (passes, round(wall, 2), outcome.error)
        print(f"{label:10s} rc {rc} passes {passes} wall {wall:.2f} s err {outcome.error}", flush=True)
        rep = work / f"rep_{label.replace('+', '_')}.ncu-rep"
        if rep.exists():
            run([ncu, "--import", str(rep), "--page", "raw", "--csv"], work / f"raw_{label.replace('+', '_')}.csv")
    print("RESULTS", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
