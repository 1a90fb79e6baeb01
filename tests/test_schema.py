"""One summary schema (profiler/schema.py) for single launches and merged launches, on real reports."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from profiler.analyze import summarize
from profiler.compare.merge import merge_launches
from profiler.schema import SchemaError, Summary, validate_summaries, validate_summary

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports" / "h200"
SHAPE = "b1_h64_s1024_d128_fp16"


@pytest.fixture(scope="module")
def singles():
    return {v: summarize(REPORTS / v / f"{SHAPE}.ncu-rep")[0]
            for v in ("v03_tensor_cores", "v07_tuned", "ext-sdpa-cudnn")}


def _keys(obj):
    """The nested key structure (dicts' keys, list items' keys), values left out."""
    if isinstance(obj, dict):
        return {k: _keys(v) for k, v in sorted(obj.items()) if isinstance(v, (dict, list))} | {
            k: None for k in obj if not isinstance(obj[k], (dict, list))}
    if isinstance(obj, list):
        merged: dict = {}
        for x in obj:
            if isinstance(x, dict):
                merged |= _keys(x)
        return [merged] if merged else []
    return None


def test_single_and_merged_summaries_have_one_schema(singles):
    for name, s in singles.items():
        validate_summary(s)
        json.dumps(s, allow_nan=False)  # plain JSON values
        m = merge_launches([s, copy.deepcopy(s)])
        validate_summary(m)
        assert set(m) == set(s) == set(Summary.__required_keys__), name
        for key in ("short_scoreboard", "barriers", "tensor_inst", "roofline", "device"):
            assert _keys(m[key]) == _keys(s[key]), (name, key)
        for key in ("opcode_waits", "who_waits", "waits_on", "top_instructions", "missing"):
            if s[key]:
                assert _keys(m[key]) == _keys(s[key]), (name, key)
        # what merge used to drop or reshape (single and merged summaries share one schema) is kept, summed
        assert isinstance(m["short_scoreboard"]["by_class"], dict)
        assert m["short_scoreboard"]["by_class"] == {k: 2 * v for k, v in s["short_scoreboard"]["by_class"].items()}
        assert len(m["waits_on"]) == len(s["waits_on"])
        assert sum(r["samples"] for r in m["waits_on"]) == pytest.approx(2 * sum(r["samples"] for r in s["waits_on"]))
        assert m["waits_on_unresolved"] == pytest.approx({k: 2 * v for k, v in s["waits_on_unresolved"].items()})
        assert m["tensor_inst"] == {k: 2 * v for k, v in s["tensor_inst"].items()}
        r, rm = s["roofline"], m["roofline"]
        assert rm["smem"]["ldsm"]["ways"] == pytest.approx(r["smem"]["ldsm"]["ways"]) if r["smem"]["ldsm"]["ways"] else True
        assert rm["smem"]["bytes_by_op"] == pytest.approx({k: 2 * v for k, v in r["smem"]["bytes_by_op"].items()})
        for lv, v in r["attainable_tflops"].items():  # same intensities and roofs -> same attainable
            assert rm["attainable_tflops"][lv] == pytest.approx(v, rel=1e-9)
        # shares stay, and the top waiter's instruction is carried
        top_s, top_m = s["who_waits"][0], m["who_waits"][0]
        assert top_m["share"] == pytest.approx(top_s["share"])
        assert (top_m["top_opcode"], top_m["top_address"]) == (top_s["top_opcode"], top_s["top_address"])
        assert m["launch_indices"] == [0, 0] and m["launch_index"] is None and m["launch"] is None
        # regions add up like the kernel totals (the same code counted once for pcs)
        assert [(r["name"], r["samples"], r["pcs"]) for r in m["regions"]] == [
            (r["name"], 2 * r["samples"], r["pcs"]) for r in s["regions"]]
        assert sum(r["share"] for r in m["regions"]) == pytest.approx(1.0) if s["regions"] else True


def test_waits_on_is_not_truncated(singles):
    # v03's walk finds more than the 20 rows the summary used to keep
    rows = singles["v03_tensor_cores"]["waits_on"]
    from profiler.analyze import waits_on
    from profiler.report import load_report

    frame = waits_on(load_report(REPORTS / "v03_tensor_cores" / f"{SHAPE}.ncu-rep").launches[0])
    assert len(rows) == len(frame)
    assert sum(r["samples"] for r in rows) == pytest.approx(float(frame["samples"].sum()), abs=1e-6 * len(rows))


@pytest.mark.parametrize("path, value, needle", [
    (("roofline", "bytes", "l1"), "x", "roofline.bytes.l1: expected a finite number"),
    (("short_scoreboard", "by_class"), [1, 2], "short_scoreboard.by_class: expected an object"),
    (("stall_samples", "wait"), 1.5, "stall_samples.wait: expected an integer"),
    (("who_waits",), [{}], "who_waits[0].class: missing"),
    (("duration_ns",), float("nan"), "duration_ns: expected a finite number"),
    (("launch_indices",), None, "launch_indices: expected a list"),
])
def test_validate_summary_names_the_bad_path(singles, path, value, needle):
    bad = copy.deepcopy(singles["v03_tensor_cores"])
    node = bad
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    with pytest.raises(SchemaError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        validate_summary(bad)
    with pytest.raises(SchemaError, match="launch 1"):
        validate_summaries([singles["v03_tensor_cores"], bad])
    with pytest.raises(SchemaError):
        validate_summaries({"not": "a list"})
    del bad[path[0]]
    with pytest.raises(SchemaError, match=f"{path[0]}: missing"):
        validate_summary(bad)


def test_extra_keys_are_allowed(singles):
    s = copy.deepcopy(singles["v07_tuned"]) | {"regions": []}  # a view added later
    assert validate_summary(s) is s
