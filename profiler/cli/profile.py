"""`whowaits profile`: one version, every version (one ncu session), or any program, under ncu.

A thin layer over :mod:`profiler.collect`.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import typer

from profiler.cli._app import app
from profiler.errors import WhowaitsError


@app.command("profile")
def profile(
    versions: list[str] = typer.Argument(None, help="Ladder version ids (v03_... or v03); several share one ncu session."),
    shape: str = typer.Option(None, "--shape", help="Shape key b{B}_h{H}_s{S}_d{D}_{dtype}[_causal] (default "
                                                     "b1_h64_s1024_d128_fp16); with --cmd also any plain key of your own "
                                                     "problem (m4096_n4096_k4096), the report's file name (default: the --name)."),
    section_set: str = typer.Option("whowaits", "--set", help="whowaits (our sections/, default) or full (ncu's own)."),
    all_versions: bool = typer.Option(False, "--all", help="Every version in ONE ncu session over ONE runner process."),
    ext: bool = typer.Option(False, "--ext", help="With --all: also the runner's external subjects (torch SDPA flash, cuDNN)."),
    ext_suffix: str = typer.Option("", "--ext-suffix", help="With --ext: append this to their report folders (ext-sdpa-flash<suffix>)."),
    cmd: str = typer.Option(None, "--cmd", help="Profile any program instead (shell-quoted command line; "
                                                 "with --versions, {version} in it is replaced by each)."),
    cmd_versions: str = typer.Option(None, "--versions", help="With --cmd: comma-separated versions of your kernel "
                                                              "(v1,v2,v3); each is run and written to "
                                                              "<gpu>/<name>-<version>/."),
    problem_flops: float = typer.Option(None, "--problem-flops", help="With --cmd: FLOPs of one call of the problem "
                                                                       "(fills the TFLOPS column), kept in the sidecar."),
    problem_bytes: float = typer.Option(None, "--problem-bytes", help="With --cmd: bytes one call must move "
                                                                       "(fills a GB/s column), kept in the sidecar."),
    kernel: str = typer.Option(None, "--kernel", help="With --cmd: regex on the demangled kernel name."),
    name: str = typer.Option(None, "--name", help="With --cmd: subject name, the report folder (e.g. ext-cublas-gemm)."),
    launch_skip: int = typer.Option(0, "--launch-skip", help="With --cmd: matching launches to skip (warm-up)."),
    nvtx: str = typer.Option(None, "--nvtx", help="With --cmd: only launches inside this NVTX push/pop range."),
    warmup: int = typer.Option(3, "--warmup", help="Warm-up launches per version before the measured one."),
    out: Path = typer.Option(None, "--out", help="Reports root (default: $WHOWAITS_REPORTS_DIR's parent, else ./reports, else the checkout's reports/)."),
    gpu: str = typer.Option(None, "--gpu", help="GPU folder under the reports root (default: from nvidia-smi, e.g. h200)."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing reports."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the ncu command and run nothing."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Echo ncu's and the program's output to stderr."),
) -> None:
    """Profile under Nsight Compute: exactly one measured launch per subject, written to
    reports/<gpu>/<subject>/<shape>.ncu-rep with a provenance sidecar <shape>.json (--cmd without --shape:
    <name>/<name>.ncu-rep)."""
    from profiler import collect

    if cmd is None and (cmd_versions or problem_flops is not None or problem_bytes is not None):
        raise WhowaitsError("--versions, --problem-flops and --problem-bytes go with --cmd")
    for opt, v in (("--problem-flops", problem_flops), ("--problem-bytes", problem_bytes)):
        if v is not None and not v > 0:
            raise WhowaitsError(f"{opt} must be a positive number")
    if cmd is None:
        shape = shape or collect.DEFAULT_SHAPE  # the ladder's default problem; never a --cmd report's name
    if cmd is not None:
        if versions or all_versions:
            raise WhowaitsError("--cmd profiles one program: give no version ids and no --all with it")
        if not kernel or not name:
            raise WhowaitsError("--cmd needs --kernel REGEX and --name NAME")
        if cmd_versions is not None:
            return _profile_versions(collect, cmd, cmd_versions, kernel, name, shape, launch_skip, section_set, nvtx,
                                     out, gpu, force, dry_run, verbose, problem_flops, problem_bytes)
        if "{version}" in cmd:
            raise WhowaitsError("--cmd has {version} in it: give --versions v1,v2,… to fill it")
        session = collect.plan_command(cmd, kernel, name, shape or name, launch_skip=launch_skip,
                                       section_set=section_set, nvtx_range=nvtx)
    elif all_versions:
        if versions:
            raise WhowaitsError("give either version ids or --all, not both")
        session = collect.plan_all(shape, ext=ext, section_set=section_set, warmup=warmup, ext_suffix=ext_suffix)
    elif versions:
        if ext:
            raise WhowaitsError("--ext goes with --all")
        session = collect.plan_versions(list(versions), shape, section_set=section_set, warmup=warmup)
    else:
        raise WhowaitsError("nothing to profile: give a version id, --all, or --cmd")

    if dry_run:
        try:
            ncu = collect.find_ncu()
        except WhowaitsError:
            ncu = "ncu"
        typer.echo(shlex.join(session.ncu_argv(ncu, "<tmp>/session")))
        if len(session.targets) > 1:
            for t in session.targets:
                typer.echo(shlex.join(collect.split_command(ncu, Path("<tmp>/session.ncu-rep"), t,
                                                            Path(f"<tmp>/{t.name}.ncu-rep"))))
        return

    result = _run_with_progress(collect, session, out, gpu, force, verbose)
    for r in result.results:
        if r.ok:
            if cmd is not None and (problem_flops or problem_bytes):
                _annotate(r.report, problem_flops=problem_flops, problem_bytes=problem_bytes)
            typer.echo(f"{r.target.name}: {r.report} ({r.passes} passes)")
    typer.echo(f"ncu session: {result.wall_s:.1f} s wall for {len(session.targets)} subject(s)")
    if result.failures:
        typer.echo("failed:", err=True)
        for r in result.failures:
            typer.echo(f"  {r.target.name}: {r.error}", err=True)
        raise typer.Exit(1)


def _annotate(report: Path, keep_none: tuple = (), **fields) -> None:
    """Add ``fields`` (problem_flops, ladder_order …) to the sidecar of ``report`` (atomic rewrite); a None
    value is written only for the keys in ``keep_none``."""
    from profiler import provenance

    side = provenance.read_sidecar(report) or {}
    side.update({k: v for k, v in fields.items() if v is not None or k in keep_none})
    provenance.write_sidecar(report, side)


def _split_versions(text: str) -> list[str]:
    import re

    vs = [v.strip() for v in text.split(",")]
    if not vs or any(not v for v in vs):
        raise WhowaitsError(f"--versions {text!r}: give comma-separated names, e.g. v1,v2,v3")
    bad = [v for v in vs if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", v)]
    if bad:
        raise WhowaitsError(f"--versions: {bad[0]!r} is not a plain name (letters, digits, '.', '_', '-')")
    if len(set(vs)) < len(vs):
        raise WhowaitsError(f"--versions {text!r} names a version twice")
    return vs


def _profile_versions(collect, cmd, cmd_versions, kernel, name, shape, launch_skip, section_set, nvtx, out, gpu,
                      force, dry_run, verbose, problem_flops, problem_bytes) -> None:
    """``--cmd "… {version} …" --versions v1,v2,v3``: one ncu session per version (the command differs),
    each written to ``<gpu>/<name>-<version>/<shape>.ncu-rep`` (``<name>.ncu-rep`` without ``--shape``, one
    stem for all, so that migration lines them up) with its sidecar (problem FLOPs/bytes and
    the version's place in the series added), ready for ``whowaits migration <name>-v1 <name>-v2 …``.
    Every version is planned (and checked) before the first runs; existing reports stop it before
    anything runs unless ``--force``."""
    if "{version}" not in cmd:
        raise WhowaitsError("--versions needs {version} in --cmd (e.g. --cmd \"python k.py --version {version}\")")
    vs = _split_versions(cmd_versions)
    sessions = [(v, collect.plan_command(cmd.replace("{version}", v), kernel, f"{name}-{v}", shape or name,
                                         launch_skip=launch_skip, section_set=section_set, nvtx_range=nvtx))
                for v in vs]
    if dry_run:
        try:
            ncu = collect.find_ncu()
        except WhowaitsError:
            ncu = "ncu"
        for v, s in sessions:
            typer.echo(shlex.join(s.ncu_argv(ncu, f"<tmp>/{name}-{v}")))
        return
    if not force:  # all or nothing: refuse before the first version runs
        from profiler import provenance
        from profiler.paths import report_path, reports_root

        slug = gpu or provenance.gpu_slug(collect.gpu_info()[0])
        for _v, s in sessions:
            for t in s.targets:
                dest = report_path(reports_root(out), slug, t.name, s.shape)
                if dest.exists():
                    raise WhowaitsError(f"report exists: {dest} (use --force to overwrite)")
    done, wall = [], 0.0
    for i, (v, s) in enumerate(sessions):
        result = _run_with_progress(collect, s, out, gpu, force, verbose)
        wall += result.wall_s
        for r in result.results:
            if r.ok:
                # your kernel's FLOPs are what --problem-flops says, never the attention formula of a shape key
                _annotate(r.report, keep_none=("problem_flops",), problem_flops=problem_flops,
                          problem_bytes=problem_bytes, ladder_order=i, title=f"{name} {v}")
                typer.echo(f"{r.target.name}: {r.report} ({r.passes} passes)")
                done.append(r.target.name)
            else:
                typer.echo(f"failed: {r.target.name}: {r.error}", err=True)
                raise typer.Exit(1)
    typer.echo(f"ncu: {wall:.1f} s wall for {len(done)} version(s); next: whowaits migration {' '.join(done)}")


def _bar_name(kernel: str) -> str:
    """What the bar names a profiled launch by: the ladder version in its namespace, else the short kernel name."""
    import re

    from profiler.collect import short_kernel_name

    m = re.search(r"whowaits::(v\d+\w*?)::", kernel)
    return m.group(1) if m else short_kernel_name(kernel)[:40]


def _run_with_progress(collect, session, out, gpu, force, verbose=False):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from profiler.paths import reports_root

    kw = dict(out_root=reports_root(out), gpu=gpu, force=force)
    console = Console(stderr=True)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True,
                  disable=not console.is_terminal) as bar:
        total = len(session.targets)
        task = bar.add_task("profiling", total=total)

        state = {"profiled": 0, "done": 0}

        def show() -> None:  # half a step when ncu has measured a launch, the other half when its file is written
            bar.update(task, completed=(state["profiled"] + state["done"]) / 2)

        def on_line(line: str) -> None:
            if verbose:
                bar.console.print(line, markup=False, highlight=False)
            if line.startswith("==PROF== Profiling") and "pass" in line:
                state["profiled"] += 1
                kernel = line.split('"')[1] if line.count('"') >= 2 else "kernel"
                bar.update(task, description=f"profiled {_bar_name(kernel)}")
                show()

        def on_done(r) -> None:
            state["done"] += 1
            if r.error:  # a failed target never gets its 'measured' half
                state["profiled"] += 1
            show()

        result = collect.run_session(session, on_line=on_line, on_target_done=on_done, **kw)
        bar.update(task, completed=total, description="done")
    return result
