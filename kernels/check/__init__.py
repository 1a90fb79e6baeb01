"""``python -m kernels.check``: the former name of :mod:`kernels.correctness` (the correctness checker on the
GPU; ``whowaits check`` is the policy gate), kept so that older device scripts and habits still run."""

from kernels.correctness import DEFAULT_SHAPES, main

__all__ = ["DEFAULT_SHAPES", "main"]
