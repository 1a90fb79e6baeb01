"""Render a :class:`~profiler.check.evaluate.CheckReport`: JSON, JUnit XML, GitHub workflow commands,
or the rows of a table (the CLI draws it with rich). Pure functions returning text."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from profiler.check.evaluate import CheckReport

TABLE_COLUMNS = ("verdict", "rule", "subject", "check", "value", "limit")


def to_json(report: CheckReport) -> str:
    return json.dumps(report.as_dict(), indent=1, default=str)


def table_rows(report: CheckReport) -> list[dict]:
    """One dict per result with :data:`TABLE_COLUMNS` (plus ``message``)."""
    return [{"verdict": r.verdict.upper() if r.verdict != "pass" else "pass", "rule": str(r.rule),
             "subject": r.subject, "check": r.check, "value": r.value_text, "limit": f"{r.op} {r.limit_text}",
             "message": r.message} for r in report.results]


def summary_line(report: CheckReport) -> str:
    c = report.counts
    head = "whowaits check: " + ("passed" if report.exit_code == 0 else "FAILED" if report.exit_code == 1
                                 else "could not judge everything")
    base = f"; baseline {report.baseline}" if report.baseline else ""
    return f"{head} ({c['pass']} passed, {c['fail']} failed, {c['error']} errors; policy {report.policy}{base})"


#: characters XML 1.0 cannot hold at all (not even escaped): C0 controls but tab/newline/return, lone
#: surrogates, U+FFFE/U+FFFF
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(s: object) -> str:
    """``s`` as text an XML document can hold: each character XML forbids written as ``\\xNN`` /
    ``\\uNNNN`` (a version folder named with a control character still gives well-formed XML)."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", str(s))


def _clean(el: ET.Element) -> ET.Element:
    for e in el.iter():
        for k, v in list(e.attrib.items()):
            e.set(k, xml_text(v))
        if e.text is not None:
            e.text = xml_text(e.text)
    return el


def _xml(root: ET.Element) -> str:
    _clean(root)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode")


def junit_error(message: str, policy: str | None = None) -> str:
    """An input error (exit 2: a missing policy, bench file or report …) as JUnit XML: one suite with one
    errored case carrying the message, so a CI system that reads the file shows why nothing was judged."""
    suites = ET.Element("testsuites", name="whowaits check", tests="1", failures="0", errors="1")
    suite = ET.SubElement(suites, "testsuite", name="whowaits check", tests="1", failures="0", errors="1",
                          skipped="0")
    case = ET.SubElement(suite, "testcase", classname="whowaits.check", name="input")
    if policy:
        case.set("file", policy)
    ET.SubElement(case, "error", message=message, type="input error").text = message
    return _xml(suites)


def to_junit(report: CheckReport) -> str:
    """JUnit XML: one ``testsuite``, one ``testcase`` per result (``failure`` / ``error`` children)."""
    c = report.counts
    suites = ET.Element("testsuites", name="whowaits check", tests=str(len(report.results)),
                        failures=str(c["fail"]), errors=str(c["error"]))
    suite = ET.SubElement(suites, "testsuite", name="whowaits check", tests=str(len(report.results)),
                          failures=str(c["fail"]), errors=str(c["error"]), skipped="0")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="policy", value=report.policy)
    if report.baseline:
        ET.SubElement(props, "property", name="baseline", value=report.baseline)
    for r in report.results:
        case = ET.SubElement(suite, "testcase", classname=r.subject.replace(" @ ", "."), name=r.check,
                             file=report.policy)
        if r.line:
            case.set("line", str(r.line))
        if r.verdict == "fail":
            ET.SubElement(case, "failure", message=r.message, type=r.check).text = r.message
        elif r.verdict == "error":
            ET.SubElement(case, "error", message=r.message, type=r.check).text = r.message
        else:
            ET.SubElement(case, "system-out").text = r.message
    return _xml(suites)


def _escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_prop(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def _rel(path: str) -> str:
    try:
        return os.path.relpath(Path(path).resolve(), Path.cwd())
    except ValueError:
        return path


def to_github(report: CheckReport) -> str:
    """GitHub Actions workflow commands: ``::error file=…,line=…,title=…::message`` per failed or
    unjudged result (pointing at the rule in the policy file), then the summary line."""
    out = []
    for r in report.results:
        if r.verdict == "pass":
            continue
        props = f"file={_escape_prop(_rel(report.policy))}"
        if r.line:
            props += f",line={r.line}"
        title = f"whowaits check {r.check}" + (" (could not judge)" if r.verdict == "error" else "")
        props += f",title={_escape_prop(title)}"
        out.append(f"::error {props}::{_escape_data(r.message)}")
    out.append(summary_line(report))
    return "\n".join(out)


def github_error(message: str) -> str:
    """An input error (exit 2) as a workflow command without a file."""
    return f"::error title={_escape_prop('whowaits check: input error')}::{_escape_data(message)}"
