"""``python -m kernels.check``: the former name of :mod:`kernels.correctness` (the correctness checker; ``whowaits
check`` is the policy gate), kept so that older device scripts and habits still run."""

from __future__ import annotations

import sys

from kernels.correctness import main

if __name__ == "__main__":
    sys.exit(main())
