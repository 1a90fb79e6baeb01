"""How many clusters of a clustered rung can be resident at once on this GPU (cuOccupancyMaxActiveClusters):
``python3 scripts/device/max_clusters.py VERSION SHAPE``.

Why: kernels.launch.persistent_grid gives a kernel compiled with ``__cluster_dims__`` (v26 on) one CTA per SM in
whole clusters (132 CTAs = 66 clusters of 2 on the H200), capped at the clusters that fit at once
(kernels.launch.resident_clusters, which this script prints): a cluster that could not be resident would start only
when another ends. Prints the SM count, the cluster width read back from the function, the grid and the answer.
"""

from __future__ import annotations

import sys


def main(version: str, key: str) -> None:
    import torch

    from kernels import launch, registry
    from kernels.build import build
    from kernels.config import Shape

    shape = Shape.parse(key)
    ver = registry.get(version)
    config = ver.config_for(shape.head_dim, shape.dtype, shape.causal)
    result = build(ver, config)
    fn = launch.load_function(result, torch.cuda.current_device())
    width = launch.cluster_width(fn)
    clusters = launch.resident_clusters(fn, config.threads, result.smem_dynamic_bytes, width) or 0
    grid = launch.persistent_grid(10**6, torch.cuda.current_device(), width, clusters or None)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{version} {key}: {sms} SMs, cluster width {width}, grid {grid[0]}, "
          f"max active clusters {clusters} ({clusters * width} CTAs)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python3 scripts/device/max_clusters.py VERSION SHAPE")
    main(sys.argv[1], sys.argv[2])
