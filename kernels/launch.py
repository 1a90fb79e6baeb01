"""Launch a ladder version on torch tensors through the CUDA driver API (cuda.bindings): no C++ extension.

``forward(q, k, v, causal=False, *, version, config=None, out=None) -> o`` takes (B, H, S, D) CUDA tensors,
builds the version's cubin for that problem (cached, see ``kernels.build``), loads it once per process
(``cuModuleLoad`` + ``cuModuleGetFunction``), raises the dynamic shared-memory limit when the config
needs more than 48 KB, and launches it with ``cuLaunchKernel`` on torch's current stream, grid
``(ceil(S / block_m), H, B)``, block ``config.threads`` (CONTRACT.md). The version's launch ABI says what
the first three arguments are: device pointers (``pointers``) or TMA tensor maps (``tensor_maps``), encoded
here with ``cuTensorMapEncodeTiled`` (see :func:`tensor_map`) and passed by value (``__grid_constant__``).

torch and cuda.bindings are imported lazily: importing this module needs neither.
"""

from __future__ import annotations

import ctypes
import math
import threading

from kernels import registry
from kernels.build import BuildResult, build
from kernels.config import FwdConfig
from profiler.errors import WhowaitsError
from profiler import settings

SMEM_OPTIN_LIMIT = 227 * 1024  # H100/H200 per-block opt-in maximum
_DEFAULT_DYNAMIC_SMEM = 48 * 1024
_lock = threading.Lock()
_functions: dict[tuple[str, int], object] = {}  # (cubin path, device) -> CUfunction, per process
_modules: list[object] = []  # keep modules alive
_built: dict[tuple[str, FwdConfig], BuildResult] = {}  # per process: no source re-hash on every launch
_tmaps: dict[tuple, object] = {}  # per process: encoded tensor maps by (pointer, shape, dtype, box rows)
TMA_BOX_COLS = 64  # 64 16-bit elements = 128 bytes, the widest inner box the 128-byte swizzle allows


def require_cuda_torch():
    """torch with a usable CUDA device, or one clear WhowaitsError (CI and laptops have neither)."""
    try:
        import torch
    except ImportError:
        raise WhowaitsError("this step needs torch and an NVIDIA GPU: pip install 'whowaits[gpu]' on a GPU machine") from None
    if not torch.cuda.is_available():
        raise WhowaitsError("this step needs an NVIDIA GPU (torch.cuda.is_available() is False)")
    return torch


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError:  # cuda-python < 12.6 layout
        try:
            from cuda import cuda as driver  # type: ignore[no-redef]
        except ImportError:
            raise WhowaitsError("cuda.bindings is not installed: pip install 'whowaits[gpu]' on a GPU machine") from None
    return driver


def _call(result, what: str):
    """Unpack a cuda.bindings ``(CUresult, *values)`` tuple; WhowaitsError on failure."""
    driver = _driver()
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        raise WhowaitsError(f"CUDA driver call {what} failed: {name.decode() if isinstance(name, bytes) else name}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def _ensure_context(device_index: int) -> None:
    """Make sure a context is current on this thread (torch's primary context)."""
    driver = _driver()
    _call(driver.cuInit(0), "cuInit")
    ctx = _call(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or int(ctx) == 0:
        dev = _call(driver.cuDeviceGet(device_index), "cuDeviceGet")
        primary = _call(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _call(driver.cuCtxSetCurrent(primary), "cuCtxSetCurrent")


def load_function(result: BuildResult, device_index: int):
    """The CUfunction of a built cubin on one device, loaded once per process."""
    key = (str(result.cubin), device_index)
    with _lock:
        fn = _functions.get(key)
        if fn is not None:
            return fn
        driver = _driver()
        _ensure_context(device_index)
        module = _call(driver.cuModuleLoad(str(result.cubin).encode()), f"cuModuleLoad({result.cubin})")
        fn = _call(driver.cuModuleGetFunction(module, result.entry.encode()), f"cuModuleGetFunction({result.entry})")
        dyn = result.smem_dynamic_bytes
        if result.smem_bytes > SMEM_OPTIN_LIMIT:
            raise WhowaitsError(
                f"{result.version} [{result.config.short_form()}] needs {result.smem_bytes} B shared memory per CTA, "
                f"over the {SMEM_OPTIN_LIMIT} B limit"
            )
        if dyn > _DEFAULT_DYNAMIC_SMEM:
            attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _call(driver.cuFuncSetAttribute(fn, attr, dyn), "cuFuncSetAttribute(max dynamic smem)")
        _modules.append(module)
        _functions[key] = fn
        return fn


_TORCH_DTYPES = {"float16": "fp16", "bfloat16": "bf16"}


def problem_of(q, k, v) -> tuple[int, int, int, int, str]:
    """Validate q, k, v and return (B, H, S, D, dtype key); WhowaitsError naming what is wrong."""
    torch = require_cuda_torch()

    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise WhowaitsError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_cuda:
            raise WhowaitsError(f"{name} must be a CUDA tensor (it is on {t.device})")
        if t.dim() != 4:
            raise WhowaitsError(f"{name} must be 4-D (batch, heads, seqlen, head_dim), got shape {tuple(t.shape)}")
        if not t.is_contiguous():
            raise WhowaitsError(f"{name} must be contiguous in (B, H, S, D) layout; call .contiguous() first")
        if t.data_ptr() % 16:
            raise WhowaitsError(f"{name} must be 16-byte aligned (data_ptr % 16 == {t.data_ptr() % 16})")
    if not (q.shape == k.shape == v.shape):
        raise WhowaitsError(
            f"q, k, v must have one shape (self-attention), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise WhowaitsError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise WhowaitsError("q, k, v must be on one device")
    dtype = _TORCH_DTYPES.get(str(q.dtype).removeprefix("torch."))
    if dtype is None:
        raise WhowaitsError(f"dtype {q.dtype} not supported: use torch.float16 or torch.bfloat16")
    b, h, s, d = (int(x) for x in q.shape)
    if min(b, h, s, d) < 1:
        raise WhowaitsError(f"empty problem: shape {tuple(q.shape)}")
    if h > 65535 or b > 65535:
        raise WhowaitsError(f"heads ({h}) and batch ({b}) must each be <= 65535 (grid y/z limits)")
    return b, h, s, d, dtype


def use_build(version_id: str, config: FwdConfig, result: BuildResult) -> None:
    """From now on in this process, launch ``result`` for (``version_id``, ``config``) instead of the rung's own
    build: a diagnostic build with the same kernel signature, chosen outside :func:`forward` by its caller
    (``kernels.runner`` for ``WHOWAITS_TRACED_BUILD``, with ``kernels.tracebuild.diagnostic_build``)."""
    _built[(version_id, config)] = result


def _build_for_launch(ver, config) -> BuildResult:
    """The rung's own build (what :func:`use_build` put in ``_built`` is found before this is called)."""
    return build(ver, config)


def forward(q, k, v, causal: bool = False, *, version: str, config: FwdConfig | None = None, out=None):
    """o = softmax(q kᵀ / sqrt(D) [+ causal mask]) v computed by ladder version ``version``.

    ``config`` overrides the version's default (its head_dim/dtype/causal must match the problem);
    ``out`` is an optional preallocated output (same shape and dtype, contiguous) that is fully overwritten.
    """
    import torch

    ver = registry.get(version)
    b, h, s, d, dtype = problem_of(q, k, v)
    ver.check_supports(d, dtype, causal)
    if config is None:
        config = ver.config_for(d, dtype, causal)
    elif (config.head_dim, config.dtype, config.causal) != (d, dtype, causal):
        raise WhowaitsError(
            f"config {config.short_form()} does not match the problem (head_dim={d}, dtype={dtype}, causal={causal})"
        )
    if out is None:
        out = torch.empty_like(q)
    elif out.shape != q.shape or out.dtype != q.dtype or not out.is_contiguous() or out.device != q.device:
        raise WhowaitsError("out must be a contiguous tensor of q's shape, dtype and device")

    result = _built.get((ver.id, config))  # build() re-hashes the sources (~0.2 ms host time per call),
    if result is None:  # which a timed call would count when the GPU runs ahead of the host
        result = _built.setdefault((ver.id, config), _build_for_launch(ver, config))
    fn = load_function(result, q.device.index if q.device.index is not None else torch.cuda.current_device())
    grid = (math.ceil(s / config.block_m), h, b)
    if ver.abi in registry.TMA_ABIS:
        num_bh = None
        if ver.abi in registry.PERSISTENT_ABIS:
            # one CTA per SM (at most one per tile); the kernel walks tiles blockIdx.x, + gridDim.x, ... of the
            # ceil(S / block_m) x (B·H) tiles, so it gets B·H as an extra argument
            grid = (min(grid[0] * h * b, persistent_ctas(q.device)), 1, 1)
            num_bh = b * h
        launch_tma(fn, grid, config.threads, result.smem_dynamic_bytes, tensor_maps(ver, config, q, k, v, out), out,
                   s, 1.0 / math.sqrt(d), num_bh)
    else:
        launch_raw(fn, grid, config.threads, result.smem_dynamic_bytes, q, k, v, out, s, 1.0 / math.sqrt(d))
    return out


def tensor_maps(ver, config, q, k, v, out) -> tuple:
    """The tensor maps a TMA ABI passes first: Q, K, V (boxes of block_m, block_n, block_n rows), and for
    ``tensor_maps_persistent_o`` O's too, with boxes of 64 rows: each consumer warpgroup stores its own 64 rows
    (kernels/common/sm90/tma_store.cuh)."""
    maps: tuple = (tensor_map(q, config.block_m), tensor_map(k, config.block_n), tensor_map(v, config.block_n))
    if registry.TENSOR_MAPS[ver.abi] == 4:
        maps += (tensor_map(out, 64),)
    return maps


def tensor_map(t, box_rows: int):
    """The TMA descriptor of a (B, H, S, D) 16-bit tensor, as a 3-D map (D, S, B·H), innermost first.

    Box (64, box_rows, 1) with the 128-byte swizzle: one box is a [box_rows][64] tile, 128 bytes a row,
    16-byte chunks XOR-swizzled by (row & 7) inside each 1024-byte atom, the layout ldmatrix and wgmma
    read (kernels/common/sm90/tma.cuh). A head dimension of 128 takes two boxes per tile. Rows past S
    are outside the map (its S extent is the real seqlen), so TMA fills them with zeros and never reads
    the next head. Cached per (pointer, shape, dtype, box_rows): a benchmark loop encodes once.
    """
    b, h, s, d = (int(x) for x in t.shape)
    key = (t.data_ptr(), b, h, s, d, str(t.dtype), box_rows)
    tm = _tmaps.get(key)
    if tm is not None:
        return tm
    driver = _driver()
    if d % TMA_BOX_COLS:
        raise WhowaitsError(f"tensor-map versions need head_dim a multiple of {TMA_BOX_COLS}, got {d}")
    if box_rows > 256:
        raise WhowaitsError(f"a TMA box has at most 256 rows, got {box_rows}")
    dtypes = driver.CUtensorMapDataType
    dt = dtypes.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 if "bfloat16" in str(t.dtype) else dtypes.CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    u32, u64 = driver.cuuint32_t, driver.cuuint64_t
    esize = t.element_size()
    tm = _call(
        driver.cuTensorMapEncodeTiled(
            dt, u32(3), t.data_ptr(),
            [u64(d), u64(s), u64(b * h)],
            [u64(d * esize), u64(s * d * esize)],
            [u32(TMA_BOX_COLS), u32(box_rows), u32(1)],
            [u32(1), u32(1), u32(1)],
            driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        ),
        "cuTensorMapEncodeTiled",
    )
    if len(_tmaps) > 256:  # a long-lived process with many tensors: drop the oldest
        _tmaps.pop(next(iter(_tmaps)))
    _tmaps[key] = tm
    return tm


def persistent_ctas(device) -> int:
    """CTAs of a persistent grid: the SM count, or ``$WHOWAITS_MAX_CTAS`` when set (a test knob: a small
    problem then still walks several tiles per CTA, e.g. under compute-sanitizer)."""
    cap = settings.text("WHOWAITS_MAX_CTAS") or ""
    if cap:
        if not cap.isdigit() or int(cap) < 1:
            raise WhowaitsError(f"WHOWAITS_MAX_CTAS must be a positive integer, got {cap!r}")
        return int(cap)
    return _sm_count(device)


def _sm_count(device) -> int:
    import torch

    return torch.cuda.get_device_properties(device).multi_processor_count


def launch_tma(fn, grid, threads: int, smem: int, maps, o, seqlen: int, scale: float, num_bh: int | None = None) -> None:
    """cuLaunchKernel with a TMA ABI: (tmap_q, tmap_k, tmap_v[, tmap_o], o, seqlen, scale), the maps
    passed by value (``const __grid_constant__ CUtensorMap``; NCU-NOTES.md records that this works);
    the persistent ABIs append ``int num_bh``."""
    import torch

    driver = _driver()
    scalars = [ctypes.c_void_p(o.data_ptr()), ctypes.c_int(seqlen), ctypes.c_float(scale)]
    if num_bh is not None:
        scalars.append(ctypes.c_int(num_bh))
    addrs = [int(m.getPtr()) for m in maps] + [ctypes.addressof(a) for a in scalars]
    params = (ctypes.c_void_p * len(addrs))(*addrs)
    stream = driver.CUstream(torch.cuda.current_stream(o.device).cuda_stream)
    _call(
        driver.cuLaunchKernel(fn, grid[0], grid[1], grid[2], threads, 1, 1, smem, stream, ctypes.addressof(params), 0),
        "cuLaunchKernel",
    )


def launch_raw(fn, grid, threads: int, smem: int, q, k, v, o, seqlen: int, scale: float) -> None:
    """cuLaunchKernel with the contract's argument list on torch's current stream."""
    import torch

    driver = _driver()
    args = [
        ctypes.c_void_p(q.data_ptr()),
        ctypes.c_void_p(k.data_ptr()),
        ctypes.c_void_p(v.data_ptr()),
        ctypes.c_void_p(o.data_ptr()),
        ctypes.c_int(seqlen),
        ctypes.c_float(scale),
    ]
    params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
    stream = driver.CUstream(torch.cuda.current_stream(q.device).cuda_stream)
    _call(
        driver.cuLaunchKernel(fn, grid[0], grid[1], grid[2], threads, 1, 1, smem, stream, ctypes.addressof(params), 0),
        "cuLaunchKernel",
    )
