"""How many clusters of a clustered rung can be resident at once on this GPU (cuOccupancyMaxActiveClusters):
``python3 scripts/device/max_clusters.py VERSION SHAPE``.

Why: kernels.launch.persistent_grid gives a kernel compiled with ``__cluster_dims__`` (v26 on) one CTA per SM in
whole clusters (132 CTAs = 66 clusters of 2 on the H200). If fewer clusters fit at once (a GPC with an odd number of
free SMs), the last ones would run after the others finish and the persistent schedule would take two rounds; the
kernel stays correct either way (only CTAs of one cluster wait for each other). Prints the SM count, the cluster
width read back from the function and the answer.
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
    driver = launch._driver()
    cfg = driver.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = launch.persistent_grid(10**6, torch.cuda.current_device(), width)
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = config.threads, 1, 1
    cfg.sharedMemBytes = result.smem_dynamic_bytes
    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = width, 1, 1
    cfg.attrs = [attr]
    cfg.numAttrs = 1
    clusters = launch._call(driver.cuOccupancyMaxActiveClusters(fn, cfg), "cuOccupancyMaxActiveClusters")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{version} {key}: {sms} SMs, cluster width {width}, grid {cfg.gridDimX}, "
          f"max active clusters {clusters} ({clusters * width} CTAs)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python3 scripts/device/max_clusters.py VERSION SHAPE")
    main(sys.argv[1], sys.argv[2])
