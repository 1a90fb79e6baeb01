"""docs/contract.md is the generated one, names every field of the launch summary's schema with a meaning, and
declares every field the JSON-printing commands really print on committed reports."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pytest

from profiler import contract
from profiler.schema import Summary

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "contract.md"
B1 = "b1_h64_s1024_d128_fp16"


def test_committed_contract_is_the_generated_one():
    assert DOC.read_text() == contract.render(), "docs/contract.md is stale: run python -m profiler.contract"
    assert contract.main(["--check"]) == 0


def _schema_paths(td, prefix="") -> list[str]:
    """Every field path of a TypedDict, walked independently of profiler.contract's own walker."""
    out = []
    for key, tp in typing.get_type_hints(td).items():
        path = f"{prefix}.{key}" if prefix else key
        out.append(path)
        union = typing.get_origin(tp) is typing.Union
        arms = [a for a in typing.get_args(tp) if a is not type(None)] if union else [tp]
        for arm in arms:
            if isinstance(arm, type) and hasattr(arm, "__required_keys__"):
                out += _schema_paths(arm, path)
            elif typing.get_origin(arm) is list:
                (item,) = typing.get_args(arm)
                if isinstance(item, type) and hasattr(item, "__required_keys__"):
                    out += _schema_paths(item, path + "[]")
    return out


def test_every_schema_field_is_in_the_contract_with_a_meaning():
    rows = {f"`{p}`": line for line in DOC.read_text().splitlines() if line.startswith("| `")
            for p in [line.split("`")[1]]}
    paths = _schema_paths(Summary)
    assert len(paths) > 150  # the walk reached the nested records (roofline.ceilings.clock_hz.sm …)
    for p in paths:
        assert f"`{p}`" in rows, f"{p} is not in docs/contract.md"
        meaning = rows[f"`{p}`"].rstrip(" |").rsplit("|", 1)[1].strip()
        assert meaning, f"{p} has no meaning: add it to profiler.contract.SUMMARY_MEANINGS or beside it in schema.py"


def _real_paths(obj, prefix: str, maps: set[str]) -> set[str]:
    """Key paths of a JSON value: ``a.b``, ``a[].b``; the keys of a map path (declared ``path.*``) become ``*``."""
    out: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = "*" if prefix in maps else k
            path = f"{prefix}.{key}" if prefix else key
            out.add(path)
            out |= _real_paths(v, path, maps)
    elif isinstance(obj, list):
        for v in obj:
            out |= _real_paths(v, prefix + "[]" if prefix else "", maps)
    return out


def _declared(fields) -> tuple[set[str], set[str]]:
    """(every declared path and its parents, the map paths)."""
    paths, maps = set(), set()
    for p in fields:
        if p.endswith(".*"):
            maps.add(p[:-2])
        parts = p.split(".")
        for i in range(1, len(parts) + 1):
            paths.add(".".join(parts[:i]))
            paths.add(re.sub(r"\[\]$", "", ".".join(parts[:i])))
    return paths, maps


def _undeclared(printed, output: contract.Output) -> list[str]:
    paths, maps = _declared(output.fields)
    real = _real_paths(printed[0] if isinstance(printed, list) else printed, "", maps)
    # a field declared as a whole (curve, series …) covers what it holds
    return sorted(p for p in real if p not in paths and not any(p.startswith(d + ".") or p.startswith(d + "[]")
                                                                  for d in output.fields))


@pytest.fixture(scope="module")
def cli():
    from clirun import whowaits

    def run(*args):
        cp = whowaits(*args)
        assert cp.returncode == 0, cp.stderr
        return json.loads(cp.stdout)
    return run


OUT = {o.command.split()[1]: o for o in contract.OUTPUTS}


@pytest.mark.slow  # three reports ingested cold: ~5 s
def test_show_prints_only_documented_fields(cli):
    """Every key `show --format json` prints on a wgmma report and a cp.async one is in the contract (the schema's
    maps, e.g. stall reasons and opcode classes, are maps)."""
    maps = {"stall_samples", "stall_share", "stall_cycles_per_issue", "short_scoreboard.by_class",
            "barriers.static", "barriers.executed", "waits_on_unresolved", "regions[].stall_samples",
            "overlap[].overlap_static", "overlap[].overlap_executed", "overlap[].between_static",
            "overlap[].between_executed", "timeline.curve"}
    documented = {line.split("`")[1] for line in DOC.read_text().splitlines() if line.startswith("| `")}
    for version in ("v12_intra_wg_overlap", "v07_tuned", "v08_tma_mbarrier"):
        (summary, *_) = cli("show", f"reports/h200/{version}/{B1}.ncu-rep", "--format", "json")
        real = _real_paths(summary, "", maps)
        missing = sorted(p for p in real if p not in documented and not p.startswith("timeline.curve.")
                         and not p.endswith(".*"))
        assert not missing, f"{version}: printed but not in docs/contract.md: {missing}"


@pytest.mark.parametrize("command, args", [
    ("timeline", ["reports/h200/v07_tuned/" + B1 + ".ncu-rep"]),
    ("roles", ["reports/h200/v12_intra_wg_overlap/" + B1 + ".ncu-rep"]),
    ("diff", ["v06_softmax_fusion", "v07_tuned"]),
    pytest.param("migration", ["v08_tma_mbarrier", "v09_wgmma", "ext-sdpa-cudnn"], marks=pytest.mark.slow),
])
def test_commands_print_only_documented_fields(cli, command, args):
    printed = cli(command, *args, "--format", "json")
    missing = _undeclared(printed, OUT[command])
    assert not missing, f"whowaits {command} prints fields docs/contract.md does not declare: {missing}"


def test_check_prints_only_documented_fields(cli, tmp_path):
    """A policy whose rules read reports only (no nvcc, no bench): its JSON's fields are all declared."""
    pol = tmp_path / "whowaits.toml"
    pol.write_text(f'[check]\nreports = "{ROOT}/reports/h200"\n[check.defaults]\nno_spills = false\nsass = false\n'
                   f'[[check.rule]]\nversion = "v07_tuned"\nshape = "{B1}"\nmax_share = {{ "wait" = 0.5 }}\n'
                   'max_bank_conflict_ways = 1\n')
    printed = cli("check", "--policy", str(pol), "--format", "json")
    assert printed["results"], printed
    missing = _undeclared(printed, OUT["check"])
    assert not missing, f"whowaits check prints fields docs/contract.md does not declare: {missing}"


def test_a_declared_field_that_is_not_printed_is_caught():
    """The guard fails on a printed key nobody declared (not a test that cannot fail)."""
    fake = contract.Output("x", "whowaits x", "one object", {"a": "…", "b[].c": "…"})
    assert _undeclared({"a": 1, "b": [{"c": 1, "d": 2}], "e": 3}, fake) == ["b[].d", "e"]
