"""Launch a ladder version on torch tensors through the CUDA driver API (cuda.bindings): no C++ extension.

``forward(q, k, v, causal=False, *, version, config=None, out=None) -> o`` takes (B, H, S, D) CUDA tensors,
builds the version's cubin for that problem (cached, see ``kernels.build``), loads it once per process
(``cuModuleLoad`` + ``cuModuleGetFunction``), raises the dynamic shared-memory limit when the config
needs more than 48 KB, and launches it with ``cuLaunchKernel`` on torch's current stream, grid
``(ceil(S / block_m), H, B)``, block ``config.threads`` (CONTRACT.md). The version's launch ABI says what
the first three arguments are: device pointers (``pointers``) or TMA tensor maps (``tensor_maps``), encoded
here with ``cuTensorMapEncodeTiled`` (see :func:`tensor_map`) and passed by value (``__grid_constant__``).

Launch plans (host cost): a call whose problem was seen before skips the validation, the registry, the build
lookup and the argument packing. ``_plans`` maps a problem key (:func:`problem_key`: version, config, causal and
each of q, k, v, out's shape, strides, dtype and device, plus the two environment knobs that change a launch) to
a :class:`LaunchPlan` (CUfunction, grid, block, shared memory, scalars); each plan keeps the packed
``kernelParams`` of the last few pointer sets (q, k, v, o data pointers: :func:`pointer_key`), with the tensor
maps they point into, so a new pointer set builds new maps and arguments and a seen one reuses them (a plan's first
map of a box size is encoded, later ones copy it with the address replaced: :meth:`LaunchPlan.tensor_map`). A first
call of a problem takes the full path below (which raises every WhowaitsError) and records the plan. A planned
launch goes through libcuda's ``cuLaunchKernelEx`` with ctypes, every argument a ctypes object made once (the
plan's :class:`CUlaunchConfig` per stream, the CUfunction, the kernelParams array per pointer set), so a call
converts nothing; the two environment knobs are read through :func:`profiler.settings.reader`. Where libcuda
cannot be opened no plan is kept and every call takes the full path (cuda.bindings). ``WHOWAITS_LAUNCH_CACHE=0`` (read at import) or
``LAUNCH_CACHE = False`` turns plans off: every call then takes the full path, the launcher as it was before plans.

torch and cuda.bindings are imported lazily: importing this module needs neither.
"""

from __future__ import annotations

import ctypes
import math
import threading
from functools import lru_cache

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
TMAPS_MAX = 4096  # tensor maps kept per process (~0.5 KB each): a model's layers' pointer sets, step after step
_cluster_widths: dict[int, int] = {}  # per process: CUfunction handle -> CTAs per cluster (cluster_width)
_resident: dict[tuple, int] = {}  # per process: (handle, threads, smem, width) -> clusters resident at once
TMA_BOX_COLS = 64  # 64 16-bit elements = 128 bytes, the widest inner box the 128-byte swizzle allows
LAUNCH_CACHE = (settings.text("WHOWAITS_LAUNCH_CACHE") or "1") != "0"  # module docstring
PLANS_MAX = 64  # problems kept per process (oldest dropped first)
POINTER_SETS_MAX = 256  # pointer sets kept per problem (each holds up to four encoded tensor maps): in a model's
# eager loop every layer's q, k, v, out are a pointer set of one problem, and torch's caching allocator hands each
# layer the same addresses step after step, so a step finds them all
STREAMS_MAX = 16  # launch configurations (one per stream) kept per problem
ENV_KNOBS = ("WHOWAITS_MAX_CTAS", "WHOWAITS_TRACED_BUILD")  # environment that changes what a launch does
_env_knobs = settings.reader(*ENV_KNOBS)  # their current values, ~0.1 µs (settings.raw: ~1.5 µs each)


class CUlaunchConfig(ctypes.Structure):
    """cuda.h's ``CUlaunchConfig`` (CUDA 12.0 on), the first argument of ``cuLaunchKernelEx``: one struct per
    plan and stream, built once, so a launch passes 4 arguments instead of cuLaunchKernel's 11 (ctypes converts
    each argument on every call: ~0.2 µs apiece on the CPU machine). tests/test_launch_plans.py compares the
    layout with cuda.h's through the C compiler."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


class LaunchPlan:
    """What a launch of one problem needs besides the data pointers (module docstring)."""

    __slots__ = ("fn", "handle", "device", "grid", "threads", "smem", "box_rows", "args", "launch",
                 "fn_arg", "configs", "shape", "element_size", "bf16", "maps", "templates", "scalars", "workspace")

    def __init__(self, fn, device, grid, threads, smem, seqlen, scale, num_bh, box_rows,
                 shape=(1, 1, 1, 64), element_size=2, bf16=False, workspace=None):
        self.fn = fn
        self.handle = _handle(fn)
        self.fn_arg = ctypes.c_void_p(self.handle)  # the CUfunction as cuLaunchKernelEx takes it, converted once
        self.launch = _libcuda("cuLaunchKernelEx")
        self.device = device  # CUDA device index (part of the problem key)
        self.grid, self.threads, self.smem = grid, threads, smem
        self.box_rows = box_rows  # rows of the q, k, v[, o] map boxes; () for the pointer ABI
        # pointer_key -> (the kernelParams array's address as a c_void_p, the array, what it points into)
        self.args: dict[tuple[int, ...], tuple] = {}  # (q, k, v, out[, workspace]) pointers
        # raw stream handle -> (the config's address as a c_void_p, the CUlaunchConfig): never written after it
        # is made, so two threads launching one plan on two streams cannot see each other's stream
        self.configs: dict[int, tuple] = {}
        # what a new pointer set's maps need: q's (B, H, S, D) (k, v and out have it: the key holds their shapes),
        # the element size and type; the maps by (pointer, box rows); the scalars every pointer set shares
        self.shape, self.element_size, self.bf16 = tuple(shape), element_size, bf16
        self.maps: dict[tuple[int, int], TensorMap] = {}
        self.templates: dict[int, TensorMap] = {}  # box rows -> the plan's first map of them (TensorMap.rebased)
        self.scalars = [ctypes.c_int(seqlen), ctypes.c_float(scale)] + ([] if num_bh is None else [ctypes.c_int(num_bh)])
        # a workspace ABI's (registry.WORKSPACE_ABIS): () -> a new workspace tensor on the current stream, else None
        self.workspace = workspace

    def tensor_map(self, ptr: int, box_rows: int):
        """The tensor map of one of this problem's tensors at ``ptr``, kept per plan: the plan's first map of these box
        rows is encoded and becomes the template; a later one is the template with its global address replaced
        (:meth:`TensorMap.rebased`), where libcuda has cuTensorMapReplaceAddress."""
        m = self.maps.get((ptr, box_rows))
        if m is None:
            template = self.templates.get(box_rows)
            if template is not None and _libcuda("cuTensorMapReplaceAddress") is not None:
                m = TensorMap.rebased(template, ptr)
            else:
                m = self.templates[box_rows] = TensorMap.encode(ptr, self.shape, self.element_size, self.bf16,
                                                                box_rows)
            remember(self.maps, (ptr, box_rows), m, 4 * POINTER_SETS_MAX)
        return m

    def config(self, stream: int) -> tuple:
        """The launch configuration of this plan on ``stream`` (made on its first use there)."""
        g = self.grid
        cfg = CUlaunchConfig(g[0], g[1], g[2], self.threads, 1, 1, self.smem, stream, None, 0)
        return remember(self.configs, stream, (ctypes.c_void_p(ctypes.addressof(cfg)), cfg), STREAMS_MAX)


_plans: dict[tuple, LaunchPlan] = {}


def problem_key(q, k, v, out, causal, version, config) -> tuple:
    """Everything a launch plan depends on except the data pointers: two calls with equal keys pass the same
    validation and launch the same function on the same grid. ``out`` is None (forward allocates it like q) or
    the caller's tensor. Raises AttributeError/TypeError on something that is not a tensor (forward then
    takes the full path, which names the problem)."""
    return (version, config, bool(causal),
            q.shape, q.stride(), q.dtype, q.get_device(),
            k.shape, k.stride(), k.dtype, k.get_device(),
            v.shape, v.stride(), v.dtype, v.get_device(),
            None if out is None else (out.shape, out.stride(), out.dtype, out.get_device()),
            _env_knobs())


def pointer_key(q, k, v, out) -> tuple[int, int, int, int]:
    """The data pointers a plan's packed arguments were built for."""
    return (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr())


def remember(table: dict, key, value, limit: int):
    """table[key] = value, dropping the oldest entries beyond ``limit`` (insertion order)."""
    while len(table) >= limit:
        table.pop(next(iter(table)))
    table[key] = value
    return value


def _handle(fn) -> int:
    """The raw CUfunction pointer of a cuda.bindings CUfunction (what libcuda's cuLaunchKernel takes)."""
    try:
        return int(fn)
    except TypeError:
        return 0


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
    if LAUNCH_CACHE:
        pkey: tuple | None
        plan: LaunchPlan | None
        try:
            pkey = problem_key(q, k, v, out, causal, version, config)
            plan = _plans.get(pkey)
        except (AttributeError, TypeError):
            pkey = plan = None
        if plan is not None:
            if out is None:
                out = _empty_like[0](q)  # q is contiguous (the key holds its strides, seen valid once)
            ptrs: tuple[int, ...] = pointer_key(q, k, v, out)
            if plan.workspace is not None:  # a new one each call from torch's caching allocator: ordered on the
                ws = plan.workspace()       # stream, so concurrent streams never share one (stream_k.cuh)
                ptrs += (ws.data_ptr(),)
            args = plan.args.get(ptrs)
            if args is None:
                args = _pack(plan, ptrs)
            _launch_packed(plan, args[0])
            return out
    else:
        pkey = None
    return _forward_full(q, k, v, causal, version, config, out, pkey)


def _forward_full(q, k, v, causal, version, config, out, pkey):
    """forward's full path: validate, build or look up the cubin, launch; record a plan under ``pkey``."""
    ver = registry.get(version)
    b, h, s, d, dtype = problem_of(q, k, v)  # WhowaitsError without torch or a GPU, before importing torch
    import torch

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
    num_bh = None
    cluster = 1
    ws = None
    if ver.abi in registry.TMA_ABIS:
        if ver.abi in registry.PERSISTENT_ABIS:
            # one CTA per SM (at most one per tile); the kernel walks tiles blockIdx.x, + gridDim.x, ... of the
            # ceil(S / block_m) x (B·H) tiles, so it gets B·H as an extra argument
            cluster = cluster_width(fn)
            resident = resident_clusters(fn, config.threads, result.smem_dynamic_bytes, cluster)
            grid = persistent_grid(grid[0] * h * b, q.device, cluster, resident, policy=ver.grid, m_blocks=grid[0],
                                   causal=causal)
            num_bh = b * h
        if ver.abi in registry.WORKSPACE_ABIS:
            ws = workspace(grid[0], config, q.device)
        launch_tma(fn, grid, config.threads, result.smem_dynamic_bytes,
                   tensor_maps(ver, config, q, k, v, out, cluster), out, s, 1.0 / math.sqrt(d), num_bh, ws)
    else:
        launch_raw(fn, grid, config.threads, result.smem_dynamic_bytes, q, k, v, out, s, 1.0 / math.sqrt(d))
    if pkey is not None and _launcher() is not None and _handle(fn):
        if not _empty_like:
            _empty_like.append(torch.empty_like)
        box_rows = map_box_rows(ver, config, cluster) if ver.abi in registry.TMA_ABIS else ()
        device = q.device.index if q.device.index is not None else torch.cuda.current_device()
        new_ws = None
        if ws is not None:
            import functools

            new_ws = functools.partial(torch.empty, ws.numel(), dtype=torch.uint8, device=q.device)
        remember(_plans, pkey, LaunchPlan(fn, device, grid, config.threads, result.smem_dynamic_bytes, s,
                                          1.0 / math.sqrt(d), num_bh, box_rows, (b, h, s, d), q.element_size(),
                                          dtype == "bf16", new_ws), PLANS_MAX)
    return out


def _pack(plan: LaunchPlan, ptrs: tuple[int, ...]) -> tuple:
    """Build (and keep, under the pointer set) the kernelParams array of a plan for new data pointers ``ptrs`` (q, k,
    v, out: :func:`pointer_key`[, the workspace]): the tensor maps (the plan's, by pointer) or the raw pointers, then
    o, the plan's own seqlen, scale[, num_bh], and the workspace pointer of a workspace ABI."""
    if (ptrs[0] | ptrs[1] | ptrs[2] | ptrs[3]) % 16:
        raise WhowaitsError("q, k, v and out must be 16-byte aligned")
    if plan.box_rows:
        keep: list = [plan.tensor_map(p, rows) for p, rows in zip(ptrs, plan.box_rows)]
        addrs = [int(m.getPtr()) for m in keep]
    else:
        keep = [ctypes.c_void_p(p) for p in ptrs[:3]]
        addrs = [ctypes.addressof(a) for a in keep]
    o_arg = ctypes.c_void_p(ptrs[3])
    keep.append(o_arg)
    addrs += [ctypes.addressof(o_arg)] + [ctypes.addressof(a) for a in plan.scalars]
    if len(ptrs) > 4:
        ws_arg = ctypes.c_void_p(ptrs[4])
        keep.append(ws_arg)
        addrs.append(ctypes.addressof(ws_arg))
    params = (ctypes.c_void_p * len(addrs))(*addrs)
    return remember(plan.args, ptrs, (ctypes.c_void_p(ctypes.addressof(params)), params, keep), POINTER_SETS_MAX)


_empty_like: list = []  # [torch.empty_like], set by the first full call that records a plan


@lru_cache(maxsize=None)
def _libcuda(name: str):
    """libcuda's function ``name`` through ctypes, returning a CUresult (int), or None where libcuda or the symbol is
    missing. No argtypes: the callers pass ctypes objects made once (pointers as c_void_p, arrays as they are) and
    32-bit enums as Python ints (ctypes' default, C int), so a call converts next to nothing."""
    try:
        fn = getattr(ctypes.CDLL("libcuda.so.1"), name)
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    return fn


def _launcher():
    """libcuda's cuLaunchKernelEx, or None (then no plans are kept)."""
    return _libcuda("cuLaunchKernelEx")


_stream_of: list = []  # [fn(device index) -> raw handle of torch's current stream there], resolved once


def _current_stream(device_index: int) -> int:
    """The raw handle of torch's current stream on a device."""
    if not _stream_of:
        import torch

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _stream_of.append(raw if raw is not None else (lambda i: torch.cuda.current_stream(i).cuda_stream))
    return _stream_of[0](device_index)


def _launch_packed(plan: LaunchPlan, params) -> None:
    """cuLaunchKernelEx of a plan with a packed kernelParams array (its address, a c_void_p) on torch's current
    stream."""
    stream = _current_stream(plan.device)
    cfg = plan.configs.get(stream) or plan.config(stream)
    rc = plan.launch(cfg[0], plan.fn_arg, params, None)
    if rc:
        _call(_driver().CUresult(rc), "cuLaunchKernelEx")


def tensor_maps(ver, config, q, k, v, out, cluster: int = 1) -> tuple:
    """The tensor maps a TMA ABI passes first: Q, K, V (boxes of block_m (or ``q_box_rows``), block_n, block_n rows), and for
    ``tensor_maps_persistent_o`` O's too, with boxes of 64 rows: each consumer warpgroup stores its own 64 rows
    (kernels/common/sm90/tma_store.cuh); ``tensor_maps_persistent_o16`` boxes of 16 rows: each consumer warp stores its
    own 16 (kernels/common/sm90/epilogue_warp.cuh). A kernel launched in clusters of ``cluster`` CTAs (:func:`cluster_width`)
    loads each K/V tile as ``cluster`` slices, one per CTA, multicast to all (kernels/common/sm90/cluster.cuh): its
    K and V boxes are block_n / cluster rows."""
    return tuple(tensor_map(t, rows) for t, rows in zip((q, k, v, out), map_box_rows(ver, config, cluster)))


def map_box_rows(ver, config, cluster: int = 1) -> tuple[int, ...]:
    """Rows of the boxes of the maps a TMA ABI passes, in argument order: Q (block_m, or the version's
    ``q_box_rows``: v47 loads Q as one 64-row box per consumer), K and V (block_n / cluster), and O's where the ABI
    has one (``kernels.registry.O_BOX_ROWS``)."""
    kv_rows = config.block_n // cluster
    rows: tuple[int, ...] = (ver.q_box_rows or config.block_m, kv_rows, kv_rows)
    if ver.abi in registry.O_BOX_ROWS:
        rows += (registry.O_BOX_ROWS[ver.abi],)
    return rows


def tensor_map(t, box_rows: int):
    """The TMA descriptor of a (B, H, S, D) 16-bit tensor, as a 3-D map (D, S, B·H), innermost first.

    Box (64, box_rows, 1) with the 128-byte swizzle: one box is a [box_rows][64] tile, 128 bytes a row,
    16-byte chunks XOR-swizzled by (row & 7) inside each 1024-byte atom, the layout ldmatrix and wgmma
    read (kernels/common/sm90/tma.cuh). A head dimension of 128 takes two boxes per tile. Rows past S
    are outside the map (its S extent is the real seqlen), so TMA fills them with zeros and never reads
    the next head. Cached per (pointer, shape, dtype, box_rows): a benchmark loop encodes once. Encoded by
    libcuda's ``cuTensorMapEncodeTiled`` through ctypes (:class:`TensorMap`, ~5x cheaper than cuda.bindings'
    wrapper: a new pointer set costs one call per map) where libcuda opens, else through cuda.bindings;
    scripts/device/host_us.py checks on the GPU that the two give the same 128 bytes.
    """
    b, h, s, d = (int(x) for x in t.shape)
    key = (t.data_ptr(), b, h, s, d, str(t.dtype), box_rows)
    tm = _tmaps.get(key)
    if tm is not None:
        return tm
    if d % TMA_BOX_COLS:
        raise WhowaitsError(f"tensor-map versions need head_dim a multiple of {TMA_BOX_COLS}, got {d}")
    if box_rows > 256:
        raise WhowaitsError(f"a TMA box has at most 256 rows, got {box_rows}")
    bf16 = "bfloat16" in str(t.dtype)
    tm = (TensorMap.encode(t.data_ptr(), (b, h, s, d), t.element_size(), bf16, box_rows) if _libcuda("cuTensorMapEncodeTiled") is not None
          else tensor_map_bindings(t, box_rows))
    remember(_tmaps, key, tm, TMAPS_MAX)
    return tm


def tensor_map_bindings(t, box_rows: int):
    """:func:`tensor_map`'s map encoded through cuda.bindings (uncached): the path where libcuda cannot be opened
    through ctypes, and the reference the ctypes encoder is checked against."""
    driver = _driver()
    b, h, s, d = (int(x) for x in t.shape)
    dtypes = driver.CUtensorMapDataType
    dt = dtypes.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 if "bfloat16" in str(t.dtype) else dtypes.CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    u32, u64 = driver.cuuint32_t, driver.cuuint64_t
    esize = t.element_size()
    return _call(
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


# cuda.h's enum values for the maps above (CUtensorMapDataType, ...Interleave, ...Swizzle, ...L2promotion,
# ...FloatOOBfill); tests/test_launch_plans.py reads them back from cuda.h through the C compiler
TMAP_FLOAT16, TMAP_BFLOAT16 = 6, 9
TMAP_INTERLEAVE_NONE, TMAP_SWIZZLE_128B, TMAP_L2_PROMOTION_256B, TMAP_OOB_FILL_NONE = 0, 3, 3, 0
TMAP_BYTES, TMAP_ALIGN = 128, 128  # sizeof(CUtensorMap), alignas(128)
_map_shapes: dict[tuple, tuple] = {}  # (dims, element size, box rows) -> the ctypes arrays an encode reads


class TensorMap:
    """A CUtensorMap encoded by libcuda into a 128-byte-aligned ctypes buffer; ``getPtr()`` gives its address, as
    cuda.bindings' CUtensorMap does, so the rest of this module takes either."""

    __slots__ = ("buf", "addr")

    def __init__(self) -> None:
        self.buf = ctypes.create_string_buffer(TMAP_BYTES + TMAP_ALIGN)
        self.addr = (ctypes.addressof(self.buf) + TMAP_ALIGN - 1) & ~(TMAP_ALIGN - 1)

    def getPtr(self) -> int:  # cuda.bindings' name for it
        return self.addr

    def raw(self) -> bytes:
        return ctypes.string_at(self.addr, TMAP_BYTES)

    @classmethod
    def encode(cls, ptr: int, shape: tuple[int, int, int, int], esize: int, bf16: bool, box_rows: int) -> TensorMap:
        b, h, s, d = shape
        arrays = _map_shapes.get((shape, esize, box_rows))
        if arrays is None:
            arrays = ((ctypes.c_uint64 * 3)(d, s, b * h), (ctypes.c_uint64 * 2)(d * esize, s * d * esize),
                      (ctypes.c_uint32 * 3)(TMA_BOX_COLS, box_rows, 1), (ctypes.c_uint32 * 3)(1, 1, 1))
            remember(_map_shapes, (shape, esize, box_rows), arrays, 256)
        encode = _libcuda("cuTensorMapEncodeTiled")
        if encode is None:
            raise WhowaitsError("libcuda.so.1 cannot be opened: tensor maps need the NVIDIA driver")
        m = cls()
        rc = encode(ctypes.c_void_p(m.addr), TMAP_BFLOAT16 if bf16 else TMAP_FLOAT16, 3, ctypes.c_void_p(ptr), *arrays,
                    TMAP_INTERLEAVE_NONE, TMAP_SWIZZLE_128B, TMAP_L2_PROMOTION_256B, TMAP_OOB_FILL_NONE)
        if rc:
            _call(_driver().CUresult(rc), "cuTensorMapEncodeTiled")
        return m

    @classmethod
    def rebased(cls, template: TensorMap, ptr: int) -> TensorMap:
        """A copy of ``template`` whose global address is ``ptr`` (16-byte aligned): cuTensorMapReplaceAddress changes
        that field alone, where an encode checks and lays out every field. scripts/device/host_us.py checks on the GPU
        that the copy equals a fresh encode byte for byte."""
        replace = _libcuda("cuTensorMapReplaceAddress")
        if replace is None:
            raise WhowaitsError("libcuda.so.1 has no cuTensorMapReplaceAddress: the NVIDIA driver is older than CUDA 12")
        m = cls()
        ctypes.memmove(m.addr, template.addr, TMAP_BYTES)
        rc = replace(ctypes.c_void_p(m.addr), ctypes.c_void_p(ptr))
        if rc:
            _call(_driver().CUresult(rc), "cuTensorMapReplaceAddress")
        return m


def cluster_width(fn) -> int:
    """CTAs per cluster a kernel was compiled for (``__cluster_dims__``, v26 on; 1 for a kernel without one). A
    plain cuLaunchKernel of such a kernel launches whole clusters, so its grid must be a multiple of the width."""
    key = _handle(fn) or id(fn)
    width = _cluster_widths.get(key)
    if width is None:
        driver = _driver()
        attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH
        width = max(1, int(_call(driver.cuFuncGetAttribute(attr, fn), "cuFuncGetAttribute(required cluster width)")))
        _cluster_widths[key] = width
    return width


def persistent_grid(tiles: int, device, cluster: int = 1, resident: int | None = None, *, policy: str = "sms",
                    m_blocks: int = 0, causal: bool = False) -> tuple[int, int, int]:
    """The grid of a persistent kernel: one CTA per SM (:func:`persistent_ctas`), at most one per tile, in whole
    clusters of ``cluster`` CTAs (rounded down, at least one cluster: a cluster's CTAs take their tiles together,
    kernels/common/sm90/tile_scheduler_cluster.cuh, so a cluster may hold a CTA with no tile of its own), and at
    most ``resident`` clusters (:func:`resident_clusters`): a cluster that cannot be resident with the others would
    start only when one of them ends, and a persistent schedule would take twice as long. ``policy``
    "whole_heads" (a version's ``grid``, registry.GRID_POLICIES; clusters of one CTA) then narrows the grid with
    :func:`whole_head_ctas` (``m_blocks`` query tiles a head; ``causal``: the paired order takes 2 tiles a round)."""
    if policy not in registry.GRID_POLICIES:
        raise WhowaitsError(f"unknown persistent grid policy {policy!r}")
    ctas = min(tiles, persistent_ctas(device))
    clusters = ctas // cluster if resident is None else min(ctas // cluster, resident)
    ctas = max(cluster, clusters * cluster)
    if policy == "whole_heads" and cluster == 1 and m_blocks > 0:
        ctas = whole_head_ctas(tiles, m_blocks, ctas, 2 if causal and tiles >= 2 * ctas else 1)
    return (ctas, 1, 1)


def whole_head_ctas(tiles: int, m_blocks: int, ctas: int, per_round: int = 1) -> int:
    """The CTAs of a persistent grid whose rounds hold whole heads (v42). The static schedulers hand CTA b the tiles
    b, b + G, ... of a head-major order (tile_scheduler.cuh; the causal pairs, 2 a round: tile_scheduler_pairs.cuh),
    so a round is ``per_round`` x G consecutive tiles. With ``m_blocks`` tiles a head, a round holds whole heads when
    per_round x G is a multiple of m_blocks (or a head whole rounds, when m_blocks is a multiple of it); then the CTAs
    of a head start its tiles together. Of the grids that finish the ``tiles`` in as few rounds as ``ctas`` CTAs do,
    the largest such one; ``ctas`` where none is (the order is then v34's). At b4_h16_s4096_d128 (2,048 tiles, 32 a
    head) and the seed shape (512, 8 a head) on 132 SMs: 128 CTAs, the same 16 / 4 rounds, none of them partial."""
    if tiles < 1 or m_blocks < 1 or ctas < 1 or per_round < 1:
        raise WhowaitsError(f"whole_head_ctas: tiles, m_blocks, ctas and per_round must be >= 1, got "
                            f"{tiles}, {m_blocks}, {ctas}, {per_round}")
    rounds = math.ceil(tiles / (per_round * ctas))
    fewest = math.ceil(tiles / (per_round * rounds))
    for g in range(ctas, fewest - 1, -1):
        span = per_round * g
        if span % m_blocks == 0 or m_blocks % span == 0:
            return g
    return ctas


def resident_clusters(fn, threads: int, smem: int, width: int) -> int | None:
    """How many clusters of ``width`` CTAs of ``fn`` (``threads`` a CTA, ``smem`` dynamic bytes) the GPU can hold at
    once (cuOccupancyMaxActiveClusters; a cluster lives on one GPC, so a GPC with SMs left over that no whole cluster
    fills gives fewer than SMs / width: on the H200 66 clusters of 2 fit, and clusters of 4 leave SMs idle). None
    for a kernel without clusters (``width`` 1) and where the driver cannot say; cached per function."""
    if width <= 1:
        return None
    key = (_handle(fn) or id(fn), threads, smem, width)
    if key not in _resident:
        driver = _driver()
        cfg = driver.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = width, 1, 1
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = threads, 1, 1
        cfg.sharedMemBytes = smem
        attr = driver.CUlaunchAttribute()
        attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = width, 1, 1
        cfg.attrs = [attr]
        cfg.numAttrs = 1
        n = int(_call(driver.cuOccupancyMaxActiveClusters(fn, cfg), "cuOccupancyMaxActiveClusters"))
        if n < 1:
            raise WhowaitsError(
                f"no cluster of {width} CTAs ({threads} threads, {smem} B of shared memory each) fits on this GPU: "
                "build the kernel with a smaller cluster (WHOWAITS_KV_CLUSTER) or less shared memory"
            )
        _resident[key] = n
    return _resident[key]


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


def workspace(grid_x: int, config: FwdConfig, device):
    """A stream-K workspace for a launch of ``grid_x`` CTAs (registry.workspace_bytes), from torch's caching allocator
    on the current stream: uninitialised (the kernel's flags hold the launch's %gridid, so no zeroing), and freed for
    reuse only after the launch, in stream order."""
    import torch

    n = registry.workspace_bytes(grid_x, getattr(config, "consumers", 2), config.head_dim)
    return torch.empty(n, dtype=torch.uint8, device=device)


def launch_tma(fn, grid, threads: int, smem: int, maps, o, seqlen: int, scale: float, num_bh: int | None = None,
               ws=None) -> None:
    """cuLaunchKernel with a TMA ABI: (tmap_q, tmap_k, tmap_v[, tmap_o], o, seqlen, scale), the maps
    passed by value (``const __grid_constant__ CUtensorMap``; NCU-NOTES.md records that this works);
    the persistent ABIs append ``int num_bh``, a workspace ABI the workspace's pointer (``ws``)."""
    import torch

    driver = _driver()
    scalars = [ctypes.c_void_p(o.data_ptr()), ctypes.c_int(seqlen), ctypes.c_float(scale)]
    if num_bh is not None:
        scalars.append(ctypes.c_int(num_bh))
    if ws is not None:  # a workspace ABI's last argument (registry.WORKSPACE_ABIS)
        scalars.append(ctypes.c_void_p(ws.data_ptr()))
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
