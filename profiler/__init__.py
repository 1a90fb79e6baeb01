"""whowaits: read Nsight Compute reports and show who waits on whom, version by version.

Layers import one way: ``cli`` -> ``analyze`` / ``compare`` / ``plots`` / ``collect``
-> ``report`` (the only module that imports ``ncu_report``) -> ``metrics`` (data maps).
"""

__version__ = "0.1.0"
