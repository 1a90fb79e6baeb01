"""The HTML report serialises plain figure dicts without plotly's validation (profiler/plots.py says why): here
every figure of the committed ladder's pages goes once through plotly's real validator, and what the page
embeds must be exactly what the validated ``go.Figure`` would have written (same keys, values, number types
and base64 arrays), so a misspelt property or a value plotly would coerce differently fails here, not in a
reader's browser."""

from __future__ import annotations

import json

import pytest

from profiler import html, plots


def _figures_of(render) -> list[dict]:
    """The figure dicts ``render()`` hands to :func:`profiler.html._fig`, in page order."""
    specs: list[dict] = []
    real = html._fig

    def keep(spec):
        specs.append(spec)
        return real(spec)

    html._fig = keep
    try:
        page = render()
    finally:
        html._fig = real
    assert page.count("class=\"plotly-graph-div\"") == len(specs)  # every figure drawn went through _fig
    return specs


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True)  # 1 and 1.0 differ here: number types are compared too


@pytest.fixture(scope="module")
def page_figures():
    from profiler.compare import confounds, diff, load_versions, migrate

    profiled = load_versions()
    m = migrate(profiled=profiled)
    diffs = [diff(a.summary, b.summary, a.label, b.label, warnings=confounds([a, b]))
             for a, b in zip(profiled, profiled[1:])]
    one = load_versions(["v01_naive"])
    import pandas as pd

    from profiler.html_flow import who_waits_flow

    empty = [plots.who_waits_heatmap.spec(pd.DataFrame(columns=["class", "reason", "share"]), title="none"),
             plots.timeline_curves.spec(pd.DataFrame(columns=["version", "x", "series", "value"])),
             plots.phase_bars.spec(m.table.drop(columns=["tail_share"], errors="ignore")),
             plots.role_graph.spec([], title="no edges", note="a note"), who_waits_flow.spec({}, title="no flow")]
    return (_figures_of(lambda: html.render_report(m, profiled, diffs))
            + _figures_of(lambda: html.render_report(migrate(profiled=one), one, [])) + empty)


def test_every_page_figure_is_what_plotly_validation_makes_of_it(page_figures):
    import plotly.io as pio

    kinds = set()
    for spec in page_figures:
        validated = json.loads(pio.to_json(plots.figure(spec), validate=True))  # raises on a bad property
        embedded = json.loads(pio.to_json(plots.page_dict(spec), validate=False))
        title = (spec["layout"].get("title") or {}).get("text")
        assert _canonical(embedded) == _canonical(validated), title
        assert spec["layout"]["template"] == "plotly_white"  # page_dict left the spec as it was
        kinds |= {t["type"] for t in spec["data"]} or {"empty"}
    # the pages hold every kind of figure plots.py draws: bars, heat maps, lines, the Sankey, an empty one
    assert kinds >= {"bar", "heatmap", "scatter", "sankey", "empty"}, kinds
    assert len(page_figures) > 100


def test_the_validator_is_live():
    """The check above can fail: plotly rejects a property it does not know, and a name plotly.js would read
    differently (a colour scale) is expanded by validation, so a spec that kept the name would differ."""
    with pytest.raises(ValueError, match="colour"):
        plots.figure({"data": [{"type": "bar", "x": [1], "colour": "red"}], "layout": {}})
    spec = {"data": [{"type": "heatmap", "z": [[1]], "colorscale": "Reds"}], "layout": {}}
    import plotly.io as pio

    assert (json.loads(pio.to_json(plots.figure(spec)))["data"][0]["colorscale"]
            != json.loads(pio.to_json(plots.page_dict(spec), validate=False))["data"][0]["colorscale"])


def test_notebook_figures_stay_plotly_figures():
    """What a notebook calls (``plots.stall_breakdown(...).show()``) is still a validated ``go.Figure``; ``.spec``
    is the plain dict the page embeds."""
    import pandas as pd
    import plotly.graph_objects as go

    shares = pd.DataFrame({"reason": ["barrier", "wait"], "share": [0.6, 0.4], "lo": [0.5, 0.3], "hi": [0.7, 0.5]})
    fig = plots.stall_breakdown(shares, title="t")
    assert isinstance(fig, go.Figure) and fig.layout.template.layout.paper_bgcolor == "white"
    spec = plots.stall_breakdown.spec(shares, title="t")
    assert isinstance(spec, dict) and spec["layout"]["template"] == "plotly_white"
    assert list(fig.data[0].y) == ["wait", "barrier"]


def test_the_page_holds_the_house_template_once():
    """Every figure of a page names the house template (``WHOWAITS_TEMPLATES["plotly_white"]``, set once in the
    head) instead of carrying its own copy; the copy in the head is plotly's template, and a figure in another
    template keeps that one inline. (tests/test_html_browser.py draws such a page in Chromium.)"""
    import re

    import plotly.io as pio

    from profiler.compare import load_versions, migrate

    one = load_versions(["v01_naive"])
    page = html.render_report(migrate(profiled=one), one, [])
    figures = page.count('class="plotly-graph-div"')
    assert figures >= 10
    assert page.count('template: window.WHOWAITS_TEMPLATES["plotly_white"]') == figures
    (head,) = re.findall(r"window\.WHOWAITS_TEMPLATES = (\{.*?\});</script>", page)
    from plotly.io.json import to_json_plotly

    assert json.loads(head) == {"plotly_white": json.loads(to_json_plotly(pio.templates["plotly_white"].to_plotly_json()))}
    assert page.count('"colorway":[') == 1  # the template's own keys: in the head only (plotly.js names it too)
    other = html._fig({"data": [{"type": "bar", "y": [1]}], "layout": {"template": "ggplot2", "height": 300}})
    assert "WHOWAITS_TEMPLATES" not in other and '"colorway":[' in other and "height:300px" in other
    bare = html._fig({"data": [], "layout": {}})
    assert "WHOWAITS_TEMPLATES" not in bare and "height:100%" in bare
