"""Every ``WHOWAITS_*`` environment variable whowaits reads, declared in one place.

Each :class:`Setting` has a name, a kind (``path``, ``int``, ``flag``, ``text``), the default that applies
when it is unset (as text, for people), what it means, and who sets it (``user``: anyone running the
commands; ``device``: the device scripts and their diagnostics; ``test``: the test suite). Code reads a
setting through :func:`raw`, :func:`text`, :func:`flag`, :func:`integer` or :func:`path`, never through
``os.environ`` directly, so this table stays the whole list (``tests/test_settings.py`` checks the tree
for names it does not declare). ``whowaits env`` prints the table with the current values, and
``docs/settings.md`` is generated from it (:func:`markdown`).

``WHOWAITS_TRACE``, ``WHOWAITS_TRACE_WAITS`` and the other ``WHOWAITS_TRACE_*`` / ``WHOWAITS_NAMESPACE``
names in the kernels are preprocessor macros of the CUDA sources (set by the build), not environment
variables; they are listed in :data:`NOT_ENVIRONMENT`.

Nothing here imports more than the standard library: ``kernels`` and every command may use it at no cost.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SETTINGS", "NOT_ENVIRONMENT", "Setting", "flag", "integer", "markdown", "path", "put", "raw",
           "reader", "rows", "text"]


@dataclass(frozen=True)
class Setting:
    name: str
    kind: str  # path | int | flag | text
    default: str  # what applies when unset, for people
    meaning: str
    scope: str = "user"  # user | device | test


SETTINGS: tuple[Setting, ...] = (
    Setting("WHOWAITS_REPORTS_DIR", "path", "./reports/<gpu> if it exists, else the checkout's reports/<gpu>",
            "The folder of version folders (…/reports/<gpu>) the views read; its parent is the reports root "
            "`whowaits profile` and the store write to and index."),
    Setting("WHOWAITS_CACHE_DIR", "path", "~/.cache/whowaits",
            "Cache folder: parsed reports, summaries, SASS, stored command results."),
    Setting("WHOWAITS_STORE_DIR", "path", "./.whowaits-store",
            "The launch store `whowaits sweep` / `--from-store` read and write."),
    Setting("WHOWAITS_BUILD_DIR", "path", "<checkout>/.cache/whowaits/build (a wheel: <cache>/build)",
            "Where kernel builds (cubins, their SASS and trace builds) are kept."),
    Setting("WHOWAITS_NCU", "path", "ncu on PATH", "The Nsight Compute CLI `whowaits profile` runs."),
    Setting("WHOWAITS_PROCESSES", "int", "the CPUs this process may use",
            "Processes that summarise uncached reports in parallel (1: serial)."),
    Setting("WHOWAITS_LOCK_DIR", "path", "/run/lock/whowaits",
            "Per-GPU lock files of a sweep (a sweep manifest's lock_dir wins)."),
    Setting("WHOWAITS_NO_RESULT_CACHE", "flag", "off",
            "Turn off the replay of stored read-only command results (profiler.fastcli)."),
    Setting("WHOWAITS_DEBUG", "flag", "off", "Show the traceback of an internal error instead of one line."),
    Setting("WHOWAITS_NO_SUPERVISOR", "flag", "off",
            "Run the CLI in this process instead of a forked child that survives a crash of ncu_report."),
    Setting("WHOWAITS_GIT_COMMIT", "text", "git rev-parse HEAD of the checkout",
            "The commit recorded in sidecars and traces (a device copy has no .git of its own).", "device"),
    Setting("WHOWAITS_GIT_DIRTY", "flag", "git status of the checkout",
            "Whether that commit had uncommitted changes (0/false: clean; only read with WHOWAITS_GIT_COMMIT).",
            "device"),
    Setting("WHOWAITS_MAX_CTAS", "int", "the SM count",
            "CTAs of a persistent rung's grid (a small problem then walks several tiles per CTA).", "device"),
    Setting("WHOWAITS_TRACED_BUILD", "text", "unset (the rung's own build)",
            "waits[:CLASS]: the CLI runner launches a warp-specialised rung's wait-log build with no buffer "
            "(same instructions, nothing stored), so ncu can profile the traced binary.", "device"),
    Setting("WHOWAITS_CARRY_DIR", "path", "unset",
            "Folder a device script copies builds into for the trip back (scripts/device/h200_wip.sh).", "device"),
    Setting("WHOWAITS_TEST_FRESH_CACHE", "flag", "off (on in CI)",
            "The test session starts from an empty ingestion cache in a temporary folder instead of the "
            "checkout's .cache/whowaits/tests (kept between runs).", "test"),
    Setting("WHOWAITS_STORE_LOCK_WAIT", "int", "600",
            "Seconds `whowaits index` waits for another writer's lock on the store before it stops in one line."),
    Setting("WHOWAITS_LAUNCH_CACHE", "flag", "on",
            "0: every kernels.launch.forward() call takes the full path (no cached launch plans); read at import.",
            "device"),
    Setting("WHOWAITS_NCU_SESSION", "text", "set by whowaits, never by hand",
            "A fresh value whowaits puts in the environment of the ncu it starts: a stop finds every process of "
            "that session by it (profiler.collect.stop_child), also one outside the tree below ncu.", "device"),
    Setting("WHOWAITS_SASS_WORKER", "flag", "on where the process may use 2 or more CPUs",
            "0: a cold ingest reads the SASS text in its own process instead of in a worker process beside "
            "the metric reads (profiler.sass_worker); 1: the worker also on one CPU."),
    Setting("WHOWAITS_HOST_VERSIONS", "text", "v18_desc_iterator_o v21_causal_pairs",
            "The versions scripts/device/host_us.py times (space-separated).", "device"),
    Setting("WHOWAITS_FUZZ_N", "int", "the fuzz test's own count (~10 s)",
            "How many mutated reports tests/test_fuzz.py feeds the reader.", "test"),
)

_BY_NAME = {s.name: s for s in SETTINGS}

#: ``WHOWAITS_*`` names that are not environment variables (CUDA preprocessor macros, a JS global)
NOT_ENVIRONMENT = frozenset({
    "WHOWAITS_TRACE", "WHOWAITS_TRACE_WAITS", "WHOWAITS_TRACE_WAITS_CLASSES", "WHOWAITS_TRACE_WAITS_PER_WARP",
    "WHOWAITS_TRACE_SLOTS", "WHOWAITS_TRACE_PARK", "WHOWAITS_TRACE_PV_WAIT_AS_COMPILED", "WHOWAITS_NAMESPACE",
    "WHOWAITS_TEMPLATES", "WHOWAITS_EPI_WARP", "WHOWAITS_KV_CLUSTER", "WHOWAITS_Q_SPLIT",
})


def _declared(name: str) -> Setting:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name} is not a declared setting (profiler/settings.py)") from None


def raw(name: str) -> str | None:
    """The variable exactly as set (``None`` when unset)."""
    _declared(name)
    return os.environ.get(name)


def reader(*names: str):
    """A zero-argument function giving the current raw values of declared variables, cheap enough for a hot
    path (``kernels.launch.forward`` reads two on every call): ``os.environ.get`` encodes its key and costs
    ~1-2 µs a call; where ``os.environ`` keeps its bytes-keyed mapping (POSIX CPython) this reads it directly,
    ~0.1 µs, and sees exactly what ``os.environ`` sees (a change through ``os.environ`` included). The values
    are the variables' bytes there (``str`` elsewhere): compare them with each other, not with text."""
    for n in names:
        _declared(n)
    data = getattr(os.environ, "_data", None)
    encode = getattr(os.environ, "encodekey", None)
    if isinstance(data, dict) and encode is not None:
        keys = tuple(encode(n) for n in names)
        get = data.get
        return lambda: tuple(map(get, keys))
    return lambda: tuple(os.environ.get(n) for n in names)


def put(name: str, value: str | None) -> None:
    """Set a declared variable in this process (``None``: unset it): a helper process adopting the value
    its parent reads (profiler.sass_worker)."""
    _declared(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def text(name: str) -> str | None:
    """The variable stripped, or ``None`` when unset or blank."""
    v = raw(name)
    return (v.strip() or None) if v is not None else None


def flag(name: str) -> bool:
    """True when set to anything but blank, ``0``, ``false``, ``no`` or ``off``."""
    v = text(name)
    return v is not None and v.lower() not in ("0", "false", "no", "off")


def integer(name: str) -> int | None:
    """The variable as an integer, ``None`` when unset or blank; ``ValueError`` when it is not one."""
    v = text(name)
    return None if v is None else int(v)


def path(name: str) -> Path | None:
    """The variable as a path, ``None`` when unset or blank."""
    v = text(name)
    return None if v is None else Path(v)


def rows(environ: dict[str, str] | None = None) -> list[dict[str, str | None]]:
    """One dict per setting: name, value (``None`` when unset), default, kind, scope, meaning."""
    env = os.environ if environ is None else environ
    return [{"name": s.name, "value": env.get(s.name), "default": s.default, "kind": s.kind, "scope": s.scope,
             "meaning": s.meaning} for s in SETTINGS]


def markdown() -> str:
    """``docs/settings.md``: the table of every setting (generated; ``tests/test_settings.py`` compares)."""
    lines = [
        "# Settings: the `WHOWAITS_*` environment variables",
        "",
        "Generated from `profiler/settings.py` (`python -m profiler.settings > docs/settings.md`); a test fails",
        "when the two differ. `whowaits env` prints the same table with the values set now",
        "(`--format json` for a program).",
        "",
        "| name | kind | default | who sets it | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in SETTINGS:
        meaning = s.meaning.replace("|", "\\|").replace("<", "&lt;")
        lines.append(f"| `{s.name}` | {s.kind} | `{s.default}` | {s.scope} | {meaning} |")
    lines += ["", "Not environment variables, though named alike: "
              + ", ".join(f"`{n}`" for n in sorted(NOT_ENVIRONMENT))
              + " (preprocessor macros of the CUDA sources, set by the build; a JavaScript global of the HTML view).",
              ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")
