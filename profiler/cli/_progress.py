"""A rich progress bar for the long steps (``bench``, ``tune``, ``kernels build --all``; ``profile`` has
its own over ncu's messages), on stderr and only when stderr is a terminal: piped or captured output is
exactly what it was without one. The step's own log lines still print, above the bar."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator


class Steps:
    """What a long step reports: :meth:`log` a line (printed above the bar), :meth:`advance` the bar,
    :meth:`set_total` once the count is known (the bar pulses until then)."""

    def __init__(self, bar, task, echo: Callable[[str], None] | None):
        self._bar, self._task, self._echo = bar, task, echo

    def log(self, line: str) -> None:
        if self._echo is None:
            return
        if self._bar is not None and not self._bar.disable:
            self._bar.console.print(line, markup=False, highlight=False)
        else:
            self._echo(line)

    def advance(self, what: str | None = None, n: float = 1) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=n, **({"description": what} if what else {}))

    def set_total(self, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, total=total)


@contextmanager
def steps(description: str, total: int | None = None, echo: Callable[[str], None] | None = None) -> Iterator[Steps]:
    """A progress bar for ``description`` (``total`` steps, or unknown); ``echo`` prints log lines (None:
    quiet, e.g. for ``--format json``)."""
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: PLC0415

    console = Console(stderr=True)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task(description, total=total)
        yield Steps(bar, task, echo)
