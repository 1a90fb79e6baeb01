"""Sweeps: many profiles (and benches, checks) over subjects × shapes, on every GPU of a host or a Ray cluster.

    from profiler import sweep
    m = sweep.load_manifest("sweeps/ladder.toml")
    result = sweep.run_sweep(m)                    # local backend: one worker per visible GPU
    result = sweep.run_sweep(m, backend="ray")     # Ray tasks with num_gpus=1 (pip install 'whowaits[ray]')

:mod:`.manifest` (the TOML model) → :mod:`.jobs` (jobs, batches, resume, the job function) →
:mod:`.driver` (local backend, records, retries) / :mod:`.ray_backend`; :mod:`.gpus` finds and locks GPUs;
:mod:`.kinds` names error kinds and which are transient.
"""

from profiler.sweep.driver import SweepResult, run_local, run_sweep
from profiler.sweep.manifest import Manifest, load as load_manifest

__all__ = ["Manifest", "SweepResult", "load_manifest", "run_local", "run_sweep"]
