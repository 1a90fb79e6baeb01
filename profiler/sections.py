"""The ``whowaits`` section set as data: which ``sections/*.section`` files belong to a set, parsed, and
the metric names they collect.

Section files are ncu's ``ProfilerSection`` messages in protobuf text format. They are parsed against
``sections/section-schema.textproto`` (a ``FileDescriptorProto`` compiled at run time, so no ``protoc``
is needed). Reading them needs no GPU and no ncu; :mod:`profiler.collect` passes the folder to ncu
(``--section-folder``) when it profiles with the set.

- :func:`section_files`: every section file of a set, parsed.
- :func:`section_metrics`: every ``Metric`` message of one parsed section.
- :func:`set_metrics`: the names of every metric a set collects.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from profiler.errors import SectionError
from profiler.paths import sections_dir

__all__ = ["DEFAULT_SET", "SECTIONS_DIR", "SECTION_SCHEMA", "section_files", "section_metrics", "set_metrics"]

SECTIONS_DIR = sections_dir()
SECTION_SCHEMA = SECTIONS_DIR / "section-schema.textproto"
#: the set ``whowaits profile`` collects unless told otherwise
DEFAULT_SET = "whowaits"


@lru_cache(maxsize=1)
def _section_class():
    """The ``ProfilerSection`` message class, built from the schema text (once per process)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

    try:
        fdp = text_format.Parse(SECTION_SCHEMA.read_text(), descriptor_pb2.FileDescriptorProto())
    except (OSError, text_format.ParseError) as err:
        raise SectionError(f"{SECTION_SCHEMA}: cannot read the section schema ({err}); restore it from git") from None
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("whowaits.section.ProfilerSection"))


def section_files(folder: Path = SECTIONS_DIR, set_name: str = DEFAULT_SET) -> dict[Path, object]:
    """Every ``*.section`` in ``folder`` that belongs to ``set_name``, parsed against
    ``sections/section-schema.textproto``, in file-name order. A file that does not parse raises
    :class:`~profiler.errors.SectionError` naming the file and the line."""
    from google.protobuf import text_format

    cls = _section_class()
    out = {}
    for p in sorted(Path(folder).glob("*.section")):
        try:
            msg = text_format.Parse(p.read_text(), cls())
        except text_format.ParseError as err:
            raise SectionError(f"{p}: {err}") from None
        except (OSError, UnicodeDecodeError) as err:
            raise SectionError(f"{p}: cannot read it ({err})") from None
        if any(s.Identifier == set_name for s in msg.Sets):
            out[p] = msg
    return out


def _walk_metrics(msg, found: list) -> None:
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED
        items = value if repeated else [value]
        for item in items:
            if fd.message_type.name == "Metric":
                found.append(item)
            _walk_metrics(item, found)


def section_metrics(msg) -> list:
    """Every ``Metric`` message in a parsed section (header, body, metrics, source metrics)."""
    found: list = []
    _walk_metrics(msg, found)
    return found


def set_metrics(folder: Path = SECTIONS_DIR, set_name: str = DEFAULT_SET) -> set[str]:
    """Names of every metric the set collects, as written in the section files (``group:`` names included)."""
    return {m.Name for msg in section_files(folder, set_name).values() for m in section_metrics(msg) if m.Name}
