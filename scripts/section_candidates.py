"""Candidate trims of sections/, most complete first, for the replay-pass budget of the whowaits set.

    python scripts/section_candidates.py        # writes .devcarry/candidates/c1 ... c5

Measured on the H200 (2026-11-30, one small kernel, ncu 2025.3.1): the full whowaits set = 20 passes, ncu's
--set full = 38; removing one group of metrics at a time saved: kernel-level stall ratios 6 (they need all
19 smsp__warps_issue_stalled_* counters), tensor counters 4, L1 bank conflicts + shared wavefronts + MIO 3,
opcode counters (sass modifiers, sm__sass_inst_executed_op_*, smsp__inst_executed_op_*) 2, issue/eligible 1,
PC sampling 1; warp-latency ratios, FP counters, roofline bytes, per-PC thread counts and per-opcode counts 0.
Each step below drops more of what no analysis reads (profiler/data/metrics.toml); every candidate still
covers metrics.toml. scripts/h200_final_profile.sh (in git history; scripts/device/h200_profile_dataset.sh now re-profiles
the data set with the committed set) measured them and keeps the first with <= 15 passes
(<= 0.4 x 38). Run on the 20-pass set of commit d0ae0ca it gave c1 14, c2 14, c3-c5 13 passes on the H200;
c1 became sections/ (so running it again now trims the trimmed set).
"""
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from google.protobuf import text_format

from profiler import sections

OUT = Path(".devcarry/candidates")
STEPS = [
  ("c1", [r"sass__inst_executed_per_opcode_with_modifier", r"sm__sass_inst_executed_op_", r"smsp__inst_executed_op_",
          r"l1tex__data_pipe_lsu_wavefronts", r"l1tex__data_bank_conflicts_pipe_lsu_mem_shared\.sum", r"sm__mio",
          r"^sm__ops_path_tensor_src_", r"^sm__pipe_tensor_op_hmma_cycles_active"]),
  ("c2", [r"l1tex__data_bank_conflicts"]),
  ("c3", [r"tf32_dst_fp32"]),
  ("c4", [r"smsp__warps_eligible", r"smsp__issue_active", r"smsp__average_warps_active_per_inst_executed"]),
  ("c5", [r"hmma_src_fp16_dst_fp16"]),
]
def prune(msg, pats):
    for fd, value in list(msg.ListFields()):
        if fd.message_type is None:
            continue
        rep = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED
        if rep:
            keep = [v for v in value if not (fd.message_type.name == "Metric" and any(re.search(p, v.Name) for p in pats))]
            for v in keep:
                prune(v, pats)
            del value[:]
            value.extend(keep)
        else:
            prune(value, pats)
shutil.rmtree(OUT, ignore_errors=True)
pats = []
for name, more in STEPS:
    pats = pats + more
    d = OUT / name
    d.mkdir(parents=True)
    for f, msg in sections.section_files().items():
        m = type(msg)()
        m.CopyFrom(msg)
        prune(m, pats)
        (d / f.name).write_text(text_format.MessageToString(m).replace("ShowInstances: true", "ShowInstances: 1"))
    print(name, len(sections.set_metrics(d)))
