"""WHOWAITS_TRACED_BUILD is read by the runner, outside forward(): a bad spec or a rung without a wait log is a
one-line WhowaitsError before any GPU work, and a good one resolves to the wait-log record class."""

from __future__ import annotations

import pytest

from kernels import registry
from kernels.runner import implementation
from kernels.tracebuild import check_diagnostic
from profiler.errors import WhowaitsError


def test_spec_is_checked_before_any_gpu_work(monkeypatch):
    ws = registry.get("v12")
    assert check_diagnostic(ws, "waits") == "all"
    assert check_diagnostic(ws, "waits:wgmma") == "wgmma"
    for bad in ("events", "waits:nosuch"):
        with pytest.raises(WhowaitsError, match="WHOWAITS_TRACED_BUILD"):
            check_diagnostic(ws, bad)
    with pytest.raises(WhowaitsError, match="warp-specialised"):
        check_diagnostic(registry.get("v09"), "waits")

    monkeypatch.setenv("WHOWAITS_TRACED_BUILD", "waits:wgmma")
    name, fn = implementation("v12")
    assert name == ws.id and callable(fn)
    monkeypatch.setenv("WHOWAITS_TRACED_BUILD", "waits")
    with pytest.raises(WhowaitsError, match="warp-specialised"):
        implementation("v03")  # refused at once: nothing built, nothing launched
    monkeypatch.delenv("WHOWAITS_TRACED_BUILD")
    assert implementation("v03")[0] == registry.get("v03").id
