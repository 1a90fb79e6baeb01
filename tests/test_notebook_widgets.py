"""The notebooks' pickers (profiler/notebook.py) in plain Python, on the committed reports: their choices are
the reports folder's, the first choice is drawn at once, a new choice draws again, a choice the reports cannot
answer shows one error line; profile_live skips cleanly without a GPU or ncu."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("ipywidgets")

from profiler import notebook
from profiler.compare.subjects import known_versions, reports_dir


def test_pickers_offer_the_reports_folder_and_redraw_on_change():
    vs = known_versions(reports_dir())
    d = notebook.pick_diff(a="v06_softmax_fusion", b="v07_tuned")
    a, b = d.children[0], d.children[1]
    out = d.children[-1]  # the views are the Output's state, never a capture (see profiler/notebook.py)
    assert type(out).__name__ == "Output" and out.msg_id == "" and type(d).__name__ == "VBox"
    assert list(a.options) == vs == list(b.options)
    assert d.result[0].startswith("v07_tuned is ") and "v06_softmax_fusion" in d.result[0]  # drawn at once
    b.value = "v09_wgmma"
    assert d.result[0].startswith("v09_wgmma is ") and "tensor path hmma → gmma" in d.result[0]

    s = notebook.pick_show(report="v09_wgmma")
    assert s.children[0].value.endswith("v09_wgmma/b1_h64_s1024_d128_fp16.ncu-rep")
    assert s.result[0].startswith("v09_wgmma: ") and "flash_fwd" in s.result[0]
    assert [type(v).__name__ for v in s.result[1:3]] == ["Figure", "Figure"]


def test_migration_picker_takes_the_default_set_and_says_errors_in_one_line():
    m = notebook.pick_migration()
    versions, shape = m.children[0], m.children[1]
    assert "v01_naive" in versions.value and "ext-sdpa-flash-fullset" not in versions.value  # as `whowaits migration`
    assert shape.value == "b1_h64_s1024_d128_fp16"
    assert list(m.result[-4]["version"])[:2] == ["v01_naive", "v02_smem_tiling"]
    versions.value = ("v03_tensor_cores", "v04_swizzle_cp_async")
    assert list(m.result[-4]["version"]) == ["v03_tensor_cores", "v04_swizzle_cp_async"]
    assert m.result[-3].startswith("- v04_swizzle_cp_async is ")
    bad = notebook.migration_views  # a shape none of them has: the error line, not a traceback
    assert notebook._render(bad, ["v03_tensor_cores"], "b9_h1_s1_d1_fp16")[0].startswith("whowaits: error: ")


@pytest.mark.skipif(shutil.which("ncu") is not None, reason="ncu is here: the live run is the GPU test's")
def test_profile_live_skips_cleanly_without_ncu(tmp_path):
    live = notebook.profile_live("v07_tuned", out=tmp_path)
    assert live.report is None and live.skipped.startswith("skipped: ") and "ncu" in live.skipped
    assert list(tmp_path.iterdir()) == []
