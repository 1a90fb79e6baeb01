"""The job process: ``python -m profiler.sweep.jobproc SPEC.json RESULT.json`` runs one batch
(:func:`profiler.sweep.jobs.execute`) and writes its outcomes; its output is the jobs' log."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from profiler.io import write_json_atomic
    from profiler.sweep.jobs import Spec, execute

    args = sys.argv[1:] if argv is None else argv
    spec = Spec(**json.loads(Path(args[0]).read_text()))
    outs = execute(spec, log=lambda line: print(line, flush=True))
    write_json_atomic(Path(args[1]), [asdict(o) for o in outs])
    return 0


if __name__ == "__main__":
    sys.exit(main())
