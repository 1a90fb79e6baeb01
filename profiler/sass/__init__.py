"""SASS as data, shared by every view that reads a kernel's instructions (who waits on whom, roles,
regions).

Two pieces, both pure functions of the SASS text of a report (the ``sass`` frame of a
:class:`~profiler.report.Launch`: ``address``, ``sass``, ``base`` …):

* :func:`parse` (``'LDSM.16.M88.4 R8, [R2]'``) -> :class:`Instruction`: opcode, base opcode and
  modifiers, guard predicate, destination and source :class:`Operand` s with the registers each
  spans (``LDSM….4`` writes R8..R11, ``HMMA.16816.F32`` reads A R8..R11, B R12..R13, C R4..R7),
  every register read and written (names and bit masks), the scoreboard it sets (``short`` /
  ``long``; ncu's ``short_scoreboard`` / ``long_scoreboard`` stalls wait on it), its in-order
  group, the scoreboards and barriers it names (:class:`Barrier`: ``DEPBAR.LE SB0, 0x1``,
  ``gsb0``, ``BAR.SYNC 0x0``, ``BSSY B0``, an mbarrier address) and its branch target.
* :func:`build_cfg` (addresses, texts) -> :class:`CFG`: predecessors and successors of every
  instruction, basic blocks (:class:`Block`) with their successors, back-edges and loop heads.

The ISA facts (scoreboards, operand widths, destination counts, in-order groups) are data:
``profiler/data/sass.toml``.
"""

from profiler.sass.cfg import CFG, Block, build_cfg
from profiler.sass.instruction import (
    Barrier,
    Instruction,
    Operand,
    in_order_group,
    late_read_mask,
    parse,
    register_mask,
    scoreboard_of,
)

__all__ = [
    "CFG",
    "Barrier",
    "Block",
    "Instruction",
    "Operand",
    "build_cfg",
    "in_order_group",
    "late_read_mask",
    "parse",
    "register_mask",
    "scoreboard_of",
]
