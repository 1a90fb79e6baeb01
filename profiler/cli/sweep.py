"""`whowaits sweep`, `whowaits index`, `whowaits query`: thin layers over :mod:`profiler.sweep` and
:mod:`profiler.store`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from profiler.cli._app import FORMAT_OPTION, Format, app
from profiler.errors import WhowaitsError

STORE_OPTION = typer.Option(None, "--store", help="Store folder (default: $WHOWAITS_STORE_DIR, else ./.whowaits-store).")


@app.command("sweep")
def sweep_cmd(
    manifest: Path = typer.Argument(..., help="Sweep manifest (TOML): subjects × shapes × what to run."),
    backend: str = typer.Option("local", "--backend", help="local (one worker per visible GPU) or ray (a Ray cluster)."),
    address: Optional[str] = typer.Option(None, "--address", help="With --backend ray: the cluster (ray.init address; "
                                                                  "default: RAY_ADDRESS, else a local Ray)."),
    accelerator_type: Optional[str] = typer.Option(None, "--accelerator-type",
                                                   help="With --backend ray: only nodes with this accelerator (e.g. H200)."),
    force: bool = typer.Option(False, "--force", help="Run every job, even those whose report has the same build hash."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the jobs and whether each is done; run nothing."),
    out: Optional[Path] = typer.Option(None, "--out", help="Reports root instead of the manifest's out "
                                                          "(<out>/<gpu>/<subject>/<shape>.ncu-rep)."),
    logs: Optional[Path] = typer.Option(None, "--logs", help="Logs folder instead of the manifest's logs."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Run a sweep: profile / bench / check jobs over subjects × shapes, on every GPU, resumable."""
    from profiler.sweep import load_manifest

    m = load_manifest(manifest)
    if out is not None:
        m.out = out.expanduser().resolve()
    if logs is not None:
        m.logs = logs.expanduser().resolve()
    if backend not in ("local", "ray"):
        raise WhowaitsError(f"unknown backend {backend!r}: use local or ray")
    if dry_run:
        _dry_run(m, force, fmt)
        return
    result = _run_with_progress(m, backend, address, accelerator_type, force)
    if fmt == Format.json:
        print(json.dumps(result.as_dict(), indent=2))
    elif fmt == Format.csv:
        import pandas as pd

        pd.DataFrame([o for o in result.as_dict()["jobs"]]).to_csv(sys.stdout, index=False)
    else:
        _summary_table(result)
    if result.failed:
        raise typer.Exit(1)


def _dry_run(m, force: bool, fmt: Format) -> None:
    """Each job and its status on each GPU folder it could land in: the manifest's ``gpu``, else the visible
    GPUs' folders, else the folders already under ``out``."""
    from profiler.provenance import git_state, gpu_slug
    from profiler.sweep import jobs as J
    from profiler.sweep.gpus import visible_gpus

    if m.gpu:
        slugs = [m.gpu]
    else:
        try:
            slugs = sorted({gpu_slug(g.name) for g in visible_gpus()})
        except WhowaitsError:
            slugs = sorted(p.name for p in m.out.iterdir() if p.is_dir()) if m.out.is_dir() else []
    commit = git_state(J.REPO)[0]
    rows = []
    for j in J.plan(m):
        expected = J.expected_build_hash(j)
        st = {s: ("todo" if force else J.status(j, m.out, s, expected, m.logs, commit)) for s in slugs}
        rows.append({"job": j.id, **{f"status_{s}": v for s, v in st.items()}})
    if fmt == Format.json:
        print(json.dumps(rows, indent=2))
    elif fmt == Format.csv:
        import pandas as pd

        pd.DataFrame(rows).to_csv(sys.stdout, index=False)
    else:
        for r in rows:
            print("\t".join(str(v) for v in r.values()))


def _run_with_progress(m, backend, address, accelerator_type, force):
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from profiler.sweep import run_sweep

    console = Console(stderr=True)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("sweep", total=None)
        state = {"done": 0, "gpus": {}}

        def on_event(e: dict) -> None:
            ev = e["event"]
            if ev == "start":
                bar.update(task, total=e["jobs"], completed=len(e["skipped"]))
                state["done"] = len(e["skipped"])
            elif ev == "job":
                state["done"] += 1
                bar.update(task, completed=state["done"])
                if e.get("status") == "failed":
                    bar.console.print(f"[red]failed[/] {e['job']} on {e['gpu']}: "
                                      + escape(f"[{e.get('error_kind')}] {e.get('error')}"), highlight=False)
            elif ev == "retry":
                bar.console.print(f"[yellow]retry[/] {e['job']} ({e.get('error_kind')}, attempt {e['attempt']} failed)",
                                  highlight=False)
            elif ev == "lock":
                state["gpus"][e["gpu"]] = ", ".join(j.split(":", 1)[1] for j in e["jobs"])[:50]
            elif ev == "lock_wait":
                h = e.get("holder") or {}
                state["gpus"][e["gpu"]] = f"waiting for the lock (pid {h.get('pid')} of {h.get('user')})"
            elif ev == "unlock":
                state["gpus"][e["gpu"]] = "idle"
            if state["gpus"]:
                bar.update(task, description=" | ".join(f"{g.split()[0]}: {s}" for g, s in sorted(state["gpus"].items())))

        return run_sweep(m, backend=backend, address=address, accelerator_type=accelerator_type, force=force,
                         on_event=on_event)


def _summary_table(result) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"sweep {result.manifest} ({result.backend}, {len(result.gpus)} GPU(s))", title_justify="left")
    for c in ("job", "status", "gpu", "attempts", "time", "passes", "error"):
        t.add_column(c, justify="right" if c in ("attempts", "time", "passes") else "left")
    style = {"done": "green", "skipped": "dim", "failed": "bold red"}
    for o in result.outcomes:
        t.add_row(o.job, f"[{style[o.status]}]{o.status}[/]", o.gpu or "", str(o.attempts or ""),
                  f"{o.wall_s:.1f} s" if o.wall_s else "", str(o.passes or ""),
                  escape(f"[{o.error_kind}] {o.error}" if o.error else (o.note or "")))
    console = Console(width=200 if not sys.stdout.isatty() else None, highlight=False)
    console.print(t)
    console.print(f"{result.count('done')} done, {result.count('skipped')} skipped, {result.count('failed')} failed "
                  f"in {result.wall_s:.1f} s")


@app.command("index")
def index_cmd(
    roots: Optional[List[Path]] = typer.Argument(None, help="Reports roots holding <gpu>/<subject>/<shape>.ncu-rep "
                                                           "(default: ./reports, else this checkout's reports/)."),
    store: Optional[Path] = STORE_OPTION,
    full: bool = typer.Option(False, "--full", help="Rebuild every part, not only new and changed reports."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Index every report's launches into the store (hive-partitioned parquet + DuckDB); incremental."""
    from profiler import store as st

    r = st.index(list(roots) if roots else None, store, full=full)
    d = r.as_dict()
    if fmt == Format.json:
        print(json.dumps(d, indent=2))
    elif fmt == Format.csv:
        print("store,added,updated,removed,unchanged,failed,rows_written,total_rows,seconds")
        print(f"{d['store']},{len(r.added)},{len(r.updated)},{len(r.removed)},{r.unchanged},{len(r.failed)},"
              f"{r.rows},{r.total_rows},{d['seconds']}")
    else:
        print(f"{r.store}: {len(r.added)} added, {len(r.updated)} updated, {len(r.removed)} removed, "
              f"{r.unchanged} unchanged, {len(r.failed)} failed; {r.total_rows} launches in the table "
              f"({r.seconds:.1f} s)")
    for path, err in r.failed:
        print(f"whowaits: warning: not indexed: {path}: {err}", file=sys.stderr)
    if r.failed:
        raise typer.Exit(1)


def _null(v) -> bool:
    import pandas as pd

    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):  # a list or array cell
        return False


@app.command("query")
def query_cmd(
    sql: Optional[str] = typer.Argument(None, help="SQL over the table `launches` (DuckDB dialect)."),
    store: Optional[Path] = STORE_OPTION,
    schema: bool = typer.Option(False, "--schema", help="List the columns of `launches` with their meaning."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Query the store with SQL: one row per profiled launch in the table `launches`."""
    import pandas as pd

    from profiler import store as st

    if schema:
        df = pd.DataFrame(st.describe())
    elif not sql:
        raise WhowaitsError("give an SQL query (e.g. \"SELECT subject, top_waiter FROM launches\") or --schema")
    else:
        df = st.query(sql, store)
    if fmt == Format.json:
        print(df.to_json(orient="records", indent=2, default_handler=str))
    elif fmt == Format.csv:
        df.to_csv(sys.stdout, index=False)
    else:
        from rich.console import Console
        from rich.table import Table

        t = Table(show_lines=False)
        for c in df.columns:
            t.add_column(str(c), overflow="fold")
        for row in df.itertuples(index=False):
            t.add_row(*["" if _null(v) else str(v) for v in row])
        Console(width=200 if not sys.stdout.isatty() else None, highlight=False).print(t)
