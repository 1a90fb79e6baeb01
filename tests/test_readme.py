"""The README's commands are the ones that run: .ci/run runs exactly its test command, and its set-up installs the
project and runs the main job. (The rest of the front door: tests/test_docs.py.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_ci_runs_the_readme_test_command():
    test_cmd = re.search(r"^Test:\n\n    (.+)$", README, re.M).group(1).strip()
    ci = [ln.strip() for ln in (ROOT / ".ci/run").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert ci[-1] == test_cmd


def test_readme_setup_installs_and_runs_the_main_job():
    setup = re.search(r"^Set-up.*\n\n    (.+)$", README, re.M).group(1)
    assert setup == ("python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && "
                     ".venv/bin/whowaits migration --html whowaits-report.html --force")


def test_the_readmes_cublas_role_graph_is_what_roles_prints():
    """The front door's example (cuBLAS fp16 GEMM, a committed zoo report) is the output of `whowaits roles`:
    every role's warps, setmaxnreg, PCs and samples and every edge's samples, as the command prints them now."""
    import json

    from tests.clirun import whowaits

    block = README.split("<!-- your-kernel-example")[1].split("<!-- /your-kernel-example -->")[0]
    report = "reports/h200/zoo/cublas-gemm-fp16/m8192_n8192_k8192_fp16.ncu-rep"
    assert report in block
    r = whowaits("roles", str(ROOT / report), "--format", "json")
    assert r.returncode == 0, r.stderr
    (launch,) = json.loads(r.stdout)
    roles = {x["name"]: x for x in launch["roles"]}
    for name in ("consumer", "producer", "scheduler"):
        row = re.search(rf"^    {name} +\S.*? (\S+) +(\d+) +(\d+) +([\d,]+) +([\d.]+)%$", block, re.M)
        assert row, name
        warps, maxnreg, pcs, samples, share = row.groups()
        x = roles[name]
        assert (int(maxnreg), int(pcs), int(samples.replace(",", ""))) == (x["setmaxnreg"], x["pcs"], x["samples"])
        assert abs(float(share) - 100 * x["samples"] / launch["total_samples"]) < 0.05
    edges = {(e["waiter"], e["barrier"]): e["samples"] for e in launch["edges"]}
    shown = re.findall(r"^    (consumer|producer|scheduler) +(wgmma operands|wgmma group|bar \d+|mbarrier@\S+) .*? "
                       r"([\d,]+) +[\d.]+%", block, re.M)
    assert len(shown) >= 6
    for waiter, barrier, samples in shown:
        match = [s for (w, b), s in edges.items() if w == waiter and (b == barrier or
                                                                       (barrier.endswith("…") and b.startswith(barrier[:-1])))]
        assert int(samples.replace(",", "")) in match, (waiter, barrier, samples)
    assert launch["unresolved"]["samples"] == 0  # the block says "unresolved: 0 samples"
    assert "unresolved: 0 samples" in block
