"""What a report cannot show, said once: the views it lacks and the ncu sections that would supply them.

A summary's ``missing`` list names every null field and its section (``stall_samples.lg_throttle ←
WarpStateStats``, ``roofline.bytes.smem ← WhowaitsRoofline`` …): dozens of entries for a report taken
with ncu's default set. Printed one per line they bury the table, so the views group them
by what a reader would miss: :func:`gaps` returns, per summary, the views that are absent or partial
and the sections to add; :func:`gap_line` makes the one line; ``--verbose`` prints the fields too.

Fields that a GPU does not have are not gaps: Hopper's ``warpgroup_arrive`` stall reason, wgmma
(``gmma``/``hgmma``) counters and thread-block clusters on a chip before compute capability 9.0 are
absent from such a report by design, not for want of a section, and are left out here (and the views
leave them out of every sum). Nor are an optional view's fields (:data:`OPTIONAL_PREFIXES`: the L2 read fan-out),
which that view says are not collected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from profiler.names import NO_SECTION

#: view name -> field prefixes (a summary field belongs to the first view whose prefix it starts with).
VIEWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("duration", ("duration_ns",)),
    ("stall sampling", ("stall_samples", "stall_share", "stall_cycles_per_issue", "short_scoreboard")),
    ("who waits on whom", ("who_waits", "waits_on", "opcode_waits", "top_instructions", "tensor_path")),
    ("barrier counts", ("barriers",)),
    ("tensor pipe", ("tensor_pipe_pct", "hmma_inst_pct", "gmma_inst_pct", "tensor_inst", "tensor_roof_pct",
                     "xu_pipe_pct")),
    ("shared-memory level", ("roofline.bytes.smem", "roofline.smem", "roofline.ceilings.bandwidth_smem",
                             "roofline.intensity.smem", "roofline.attainable_tflops.smem")),
    ("roofline", ("roofline",)),
    ("launch shape", ("launch",)),
)

#: the few fields that say a view is gone altogether when they are null (else the view is partial)
KEY_FIELDS = {
    "duration": ("duration_ns",),
    "stall sampling": ("stall_samples",),
    "who waits on whom": ("who_waits",),
    "barrier counts": ("barriers",),
    "tensor pipe": ("tensor_pipe_pct",),
    "shared-memory level": ("roofline.bytes.smem",),
    "roofline": ("roofline.bytes.dram", "roofline.bytes.l2", "roofline.bytes.l1"),
    "launch shape": ("launch.grid", "launch.block"),
}

HOPPER_ONLY_REASONS = ("warpgroup_arrive", "gmma")

#: a null field whose stand-in has a value is no gap: the XU pipe's % derived from the SASS equals ncu's counter
#: on every report that has both (profiler/analyze/xu.py), so a report without the counter shows the same figure
STAND_INS = {"xu_pipe_pct": "xu_pipe_pct_sass"}

#: fields of an optional view that says "not collected" on its own line (``show``'s L2 read fan-out): never a gap,
#: neither in the note nor for the gate's ``no_missing``, so a report taken before their counters joined
#: WhowaitsRoofline (every report committed before them) reads as it did
OPTIONAL_PREFIXES = ("roofline.l2_reads.",)


def optional(field_name: str) -> bool:
    """Whether a null ``field_name`` belongs to an optional view (:data:`OPTIONAL_PREFIXES`): not a gap."""
    return field_name.startswith(OPTIONAL_PREFIXES)


def _cc(summary: dict) -> float | None:
    cc = ((summary or {}).get("device") or {}).get("cc")
    try:
        return float(cc)
    except (TypeError, ValueError):
        return None


def chip_lacks(field_name: str, cc: float | None) -> bool:
    """True when ``field_name`` is null because the GPU (compute capability ``cc``) has no such thing:
    Hopper-only stall reasons, wgmma counters and clusters before 9.0."""
    if cc is None or cc >= 9.0:
        return False
    last = field_name.rsplit(".", 1)[-1]
    if field_name.startswith(("stall_samples.", "stall_cycles_per_issue.", "stall_share.")):
        return last in HOPPER_ONLY_REASONS
    if cc < 8.0 and field_name == "roofline.smem.bytes_by_op.ldgsts":  # cp.async came with sm_80
        return True
    # the section files ask for these only on CC 9.0 (their Filter { MinArch: CC_90 }): wgmma, clusters, stmatrix
    return (field_name == "launch.cluster" or last in ("tensor_hgmma", "gmma_inst_pct", "hgmma")
            or field_name in ("roofline.smem.bytes_by_op.gmma", "roofline.smem.bytes_by_op.stsm"))


def view_of(field_name: str) -> str:
    for view, prefixes in VIEWS:
        if any(field_name == p or field_name.startswith(p + ".") or field_name.startswith(p)
               for p in prefixes):
            return view
    return "other"


def _section(text: str | None) -> str:
    """``"WarpStateStats (not a stall reason …)"`` -> ``"WarpStateStats"``."""
    return (text or "?").split(" (", 1)[0].strip()


@dataclass
class Gaps:
    """What one summary lacks. ``absent``: views with none of their key fields; ``partial``: views with
    some fields null; ``sections``: the ncu sections that would supply them (in order of first need);
    ``fields``: every null field with its section (chip-lacking fields left out)."""

    absent: list = field(default_factory=list)
    partial: list = field(default_factory=list)
    sections: list = field(default_factory=list)
    fields: list = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.fields)


def gaps(summary: dict) -> Gaps:
    """Group ``summary['missing']`` by view (see the module docstring)."""
    cc = _cc(summary)
    out = Gaps()
    seen = set()
    for m in (summary or {}).get("missing") or []:
        if not isinstance(m, dict) or m.get("section") == NO_SECTION:
            continue  # NO_SECTION: the kernel has none of it (no async group); no section is missing
        f, sec = str(m.get("field") or "?"), _section(m.get("section"))
        if chip_lacks(f, cc) or optional(f) or (f, sec) in seen or (f in STAND_INS and not _empty(_get(summary, STAND_INS[f]))):
            continue
        seen.add((f, sec))
        out.fields.append({"field": f, "section": sec, "view": view_of(f)})
        if sec not in out.sections:
            out.sections.append(sec)
    for view, _ in VIEWS + (("other", ()),):
        mine = [x for x in out.fields if x["view"] == view]
        if not mine:
            continue
        keys = KEY_FIELDS.get(view, ())
        gone = bool(keys) and all(_empty(_get(summary, k)) for k in keys)
        (out.absent if gone else out.partial).append(view)
    return out


def _get(summary: dict, dotted: str):
    v = summary
    for part in dotted.split("."):
        if not isinstance(v, dict):
            return None
        v = v.get(part)
    return v


def _empty(v) -> bool:
    """No value at all: None, NaN, an empty list, or a dict whose values are all empty."""
    if v is None or (isinstance(v, float) and v != v):
        return True
    if isinstance(v, dict):
        return all(_empty(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return len(v) == 0
    return False


def _join(words: list[str], conj: str = "or") -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" {conj} " + words[-1]


def gap_line(label: str, summary: dict, verbose: bool = False) -> list[str]:
    """The note for one subject: ``[]`` when nothing is missing, else one line (``verbose``: plus one
    line per null field). A launch ncu recorded as NaN says so instead (its sections were collected)."""
    nan = next((m for m in (summary or {}).get("missing") or []
                if isinstance(m, dict) and m.get("field") == "launch" and m.get("reason")), None)
    if nan is not None:
        return [f"{label}: {nan['reason']}"]
    g = gaps(summary)
    if not g:
        return []
    what = []
    if g.absent:
        what.append("no " + _join(g.absent))
    if g.partial:
        what.append("partial " + _join(g.partial, "and"))
    line = (f"{label}: {'; '.join(what)}: needs ncu section(s) {', '.join(g.sections)}"
            + ("" if verbose else f" ({len(g.fields)} fields; --verbose lists them)"))
    if not verbose:
        return [line]
    return [line] + [f"{label}:   {x['field']} ← {x['section']}" for x in g.fields]


def gap_lines(labelled: list[tuple[str, dict]], verbose: bool = False) -> list[str]:
    """:func:`gap_line` for several (label, summary) pairs, in order; reports that lack the same
    things share one line (``a, b, c: no stall sampling …``) unless ``verbose``."""
    if verbose:
        return [ln for label, s in labelled for ln in gap_line(label, s, verbose)]
    groups: dict[str, list[str]] = {}
    for label, s in labelled:
        for ln in gap_line("\0", s):
            groups.setdefault(ln[len("\0"):], []).append(str(label))
    return [", ".join(labels) + rest for rest, labels in groups.items()]
