"""The CI gate: ``whowaits check`` holds a policy (``whowaits.toml``) against bench results, report
summaries and builds, with noise-aware comparisons against a baseline.

Data flow: :mod:`.policy` (load + validate the rules) → :mod:`.inputs` (locate bench files, reports,
the baseline) → :mod:`.evaluate` (one :class:`Result` per check; :mod:`.fields` reads summary fields by
contract name, :mod:`.timing` judges timings by the run-to-run spread ``bench --repeat`` measured)
→ :mod:`.render` (table rows, JSON, JUnit XML, GitHub annotations). From Python::

    from profiler import check
    report = check.run(policy="whowaits.toml", baseline="main")
    report.exit_code   # 0 all hold, 1 a rule failed, 2 something could not be judged
"""

from __future__ import annotations

from profiler.check.evaluate import CheckReport, Result, evaluate
from profiler.check.policy import Policy, Rule, ShareKey, find_policy, load_policy, parse_share_key


def run(policy=None, baseline: str | None = None, bench=None, reports=None) -> CheckReport:
    """Load ``policy`` (a path; default: :func:`find_policy`) and :func:`evaluate` it."""
    return evaluate(load_policy(policy), baseline=baseline, bench=bench, reports=reports)


__all__ = ["CheckReport", "Policy", "Result", "Rule", "ShareKey", "evaluate", "find_policy", "load_policy",
           "parse_share_key", "run"]
