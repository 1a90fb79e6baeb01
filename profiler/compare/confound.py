"""Confound guard: things that make two reports incomparable whatever their kernels do.

A stall share or a duration moves when the GPU, the ncu version, the clock control, the set of
sections collected (more passes, other replay behaviour) or the problem shape changes. Before a
diff or a migration says "the kernel got faster", :func:`confounds` lists every such difference,
read from the provenance sidecars (``profiler.provenance``) and, where a sidecar is missing, from
what the report itself says (device name and compute capability from the summary, shape from the
file name).
"""

from __future__ import annotations

FIELDS = ("gpu", "ncu_version", "clock_control", "section_set", "shape")
"""What must match across compared reports, in the order warnings are given."""

LABELS = {
    "gpu": "GPU",
    "ncu_version": "ncu version",
    "clock_control": "clock control",
    "section_set": "section set",
    "shape": "shape",
}


def _first(*values):
    for v in values:
        if v not in (None, "", [], {}):
            return v
    return None


def provenance(profiled) -> dict:
    """The comparable facts of one :class:`~profiler.compare.subjects.Profiled`: one value per
    field of :data:`FIELDS` (None where neither the sidecar nor the report says) plus ``source``
    (``sidecar`` or ``report``)."""
    side = profiled.sidecar or {}
    dev = (profiled.summary or {}).get("device") or {}
    gpu = _first(side.get("gpu"), dev.get("name"))
    if isinstance(gpu, dict):
        gpu = _first(gpu.get("name"), str(gpu))
    section_set = _first(side.get("section_set"), side.get("set"))
    shape = _first(side.get("shape"), profiled.subject.shape)
    if isinstance(shape, dict):
        shape = _first(shape.get("key"), ",".join(f"{k}={v}" for k, v in sorted(shape.items())))
    return {
        "gpu": gpu,
        "ncu_version": _first(side.get("ncu_version")),
        "clock_control": _first(side.get("clock_control")),
        "section_set": section_set,
        "shape": shape,
        "source": "sidecar" if profiled.sidecar else "report",
    }


def confounds(profiled: list) -> list[dict]:
    """Differences between compared reports that are not the kernel.

    Returns a list of ``{"field", "values": {label: value}, "message"}``: one entry per field of
    :data:`FIELDS` whose known values differ, then one entry (field ``provenance``) naming the
    reports without a sidecar, whose ncu version, clock control and section set cannot be checked.
    Empty when everything that can be checked matches.
    """
    if len(profiled) < 2:
        return []
    facts = {p.label: provenance(p) for p in profiled}
    out = []
    for f in FIELDS:
        values = {label: fact[f] for label, fact in facts.items()}
        known = {v for v in values.values() if v is not None}
        if len(known) > 1:
            shown = "; ".join(f"{label}: {v if v is not None else 'unknown'}" for label, v in values.items())
            out.append({"field": f, "values": values,
                        "message": f"reports differ in {LABELS[f]} ({shown}): differences below may not be the kernel's"})
    bare = [label for label, fact in facts.items() if fact["source"] != "sidecar"]
    if bare:
        out.append({"field": "provenance", "values": {label: None for label in bare},
                    "message": f"no provenance sidecar for {', '.join(bare)}: ncu version, clock control "
                               "and section set cannot be checked"})
    return out
