"""Python's cyclic garbage collector held off while a block allocates many short-lived containers.

Ingesting a report and summarising a launch each build hundreds of thousands of lists, tuples and
dicts that live until the block ends (per-PC columns, frame rows, analysis tables). Every 700 new
containers the collector walks the youngest generation, and now and then every object the process
holds (pandas' and numpy's modules, earlier reports' frames): work that frees nothing here, since
these objects hold no reference cycles. :func:`paused` turns the collector off for the block and back
on after it (only if it was on: nested blocks and a caller that turned it off keep their state);
reference counting frees memory as before, and the cycles a block leaves are collected at the next
collection after it.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager

__all__ = ["paused"]


@contextmanager
def paused():
    """Hold off the cyclic garbage collector inside the block (re-enabled after it if it was on)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
