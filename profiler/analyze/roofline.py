"""Roofline of one launch: FLOPs per pipe, bytes per memory level, each pipe's own roof, and the clocks.

Pure functions of a :class:`~profiler.report.Launch`, in data-flow order: :func:`flops` → :func:`memory`
(bytes per level, shared-memory detail, LDSM conflicts) → :func:`l2_reads` (the L2 read fan-out: SMs served
per L2 read) → :func:`ceilings` (each roof with the clock it
uses) → :func:`attainable`, assembled by :func:`roofline` into one long frame. Every ncu metric name comes
from ``data/metrics.toml`` through canonical names.

Honest roofs. Each pipe has its own roof and they are never blended: the tensor path's dense
peak (mma.sync ``HMMA`` or wgmma ``HGMMA``), the FP32 peak, the FP16 (HFMA2) peak. Blending FP32 and
tensor time as if the pipes never overlapped (the old "FLOP-weighted harmonic blend") took ~9% off v07's
roof for ~1% of its FLOPs, which ncu does not do. The *compute pipe* of a launch is the one that carries
most of its FLOPs; ``ceiling_compute`` is that pipe's roof and ``attainable_<level>`` uses that pipe's
FLOPs for the intensity, as ncu's hierarchical tensor roofline does (tensor FLOPs / bytes).
``tensor_roof_pct`` puts every tensor path on one scale: achieved tensor FLOP/s as a % of the GPU's dense
tensor roof (the highest dense path roof: wgmma on Hopper) at the clock of the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from profiler import metrics as M
from profiler.analyze import buildcache
from profiler.analyze._common import dedup as _dedup
from profiler.analyze._common import missing, per_launch, with_missing
from profiler.names import L2_READ_COUNTERS, LEVELS, NCU_LEVELS, SMEM_OPS

PIPES = ("tensor", "fp32", "fp16")
"""Compute pipes with a roof of their own."""

_ROOF_SECTION = "SpeedOfLight_HierarchicalTensorRooflineChart"


@dataclass
class _Frame:
    """Rows of the long frame being built, the ``missing`` entries, and the launch's metric lookups."""

    launch: object
    rows: list = field(default_factory=list)
    gone: list = field(default_factory=list)

    def get(self, canon: str, fld: str) -> tuple[float | None, str]:
        v, name = self.launch.get(canon)
        if v is None:
            self.gone.append(missing(fld, M.metric_spec(canon).section))
            return None, M.metric_spec(canon).names[0]
        return float(v), name

    def add(self, q: str, v, unit: str, source: str) -> None:
        self.rows.append((q, np.nan if v is None else float(v), unit, source))


#: tensor instructions by path: warp-level mma.sync (one warp computes the whole tile) and warpgroup wgmma
#: (ncu's ``inst_executed`` counts each of its 4 warps). Shapes come from the opcode's modifiers.
_SASS_TENSOR = {"hmma": (("HMMA", "IMMA", "BMMA", "DMMA"), 1), "hgmma": (("HGMMA", "QGMMA", "IGMMA", "BGMMA"), 4)}
_MMA_SYNC_SHAPE = {"16816": (16, 8, 16), "16832": (16, 8, 32), "1688": (16, 8, 8), "1684": (16, 8, 4),
                   "884": (8, 8, 4), "8816": (8, 8, 16), "8832": (8, 8, 32), "168256": (16, 8, 256)}


_EIGHT_BIT = ("S8", "U8", "E4M3", "E5M2")


def sass_tensor_flops(launch) -> dict[str, float | None]:
    """Tensor FLOPs (2 per multiply-add; integer MMAs count their ops alike) per path from the SASS: every
    tensor instruction's executions (ncu's per-PC ``inst_executed``) x its tile (``HGMMA.64x64x16``: 64x64x16;
    ``HMMA.16816``: 16x8x16), for each warpgroup (wgmma) or warp (mma.sync). Covers the types the chip has
    and the ops counters do not: fp8 wgmma (``QGMMA``, no ``sm__ops_path`` counter on gh100), int8 ``IMMA``/
    ``IGMMA``. Checked against the counters: cuBLAS 8192³ fp16 (34,078,720 ``HGMMA.64x64x16`` warp
    executions / 4 x 131,072 = 1.117e12, the counter's 1.117e12) and the fp8 GEMM (7,471,104 ``QGMMA.64x144x32``
    / 4 x 589,824 = 1.10e12 for 2 x 8192³ = 1.0995e12). None per path without per-PC executed counts."""
    return {p: v[0] for p, v in _sass_tensor_split(launch).items()}


def _sass_tensor_split(launch) -> dict[str, tuple[float | None, float | None]]:
    """Per path: (tensor FLOPs from the SASS, the part done on 8-bit types: QGMMA, IGMMA, ``.S8``/``.U8``/
    ``.E4M3``/``.E5M2`` MMAs). Computed once per launch (the roofline's FLOPs and ceilings and the tensor
    utilisation all ask)."""
    return per_launch(launch, "sass_tensor_split",
                      lambda: _sass_tensor_split_of(launch.sass, lambda: _tensor_slots(launch)))


def _tensor_slots(launch) -> list:
    """:func:`_tensor_shapes` of the launch's SASS, kept per build (:mod:`.buildcache`)."""
    sass = launch.sass
    n = len(sass)

    def decode(slots: list) -> list:
        out = [(int(i), str(path), (int(a), int(b), int(c)), int(per), bool(eight))
               for i, path, (a, b, c), per, eight in slots]
        if any(not 0 <= s[0] < n or s[1] not in _SASS_TENSOR for s in out):
            raise ValueError("tensor slots out of range")
        return out

    return buildcache.part(launch, "tensor_slots", lambda: [[i, p, list(sh), per, e] for i, p, sh, per, e in
                                                            _tensor_shapes(sass)], decode)


def _tensor_shapes(sass: pd.DataFrame) -> list:
    """(slot, path, tile shape, instructions per MMA, on 8-bit types) of every tensor instruction of the SASS
    whose opcode names its tile, in address order."""
    out: list = []
    for i, (b, text) in enumerate(zip(sass["base"].tolist(), sass["sass"].tolist())):
        path = _PATH_OF.get(b)
        if path is None:
            continue
        mods = M.full_opcode(text).split(".")[1:]
        shape: tuple[int, ...] | None = None
        for m in mods:
            if m in _MMA_SYNC_SHAPE:
                shape = _MMA_SYNC_SHAPE[m]
                break
            if m.count("x") == 2 and all(x.isdigit() for x in m.split("x")):
                shape = tuple(int(x) for x in m.split("x"))
                break
        if shape is not None:
            out.append((i, path, shape, _SASS_TENSOR[path][1],
                        b in ("QGMMA", "IGMMA") or any(m in _EIGHT_BIT for m in mods)))
    return out


_PATH_OF = {b: path for path, (bases, _) in _SASS_TENSOR.items() for b in bases}


def _sass_tensor_split_of(sass: pd.DataFrame, slots=None) -> dict[str, tuple[float | None, float | None]]:
    """The split of :func:`_sass_tensor_split`; ``slots()`` gives :func:`_tensor_shapes` of ``sass`` (default:
    computed here)."""
    if sass.empty or "inst_executed" not in sass.columns or not sass["inst_executed"].notna().any():
        return {p: (None, None) for p in _SASS_TENSOR}
    executed = pd.to_numeric(sass["inst_executed"], errors="coerce").fillna(0).to_numpy(dtype=np.float64)
    acc = {path: [0.0, 0.0] for path in _SASS_TENSOR}
    # one pass over the tensor instructions (in address order, so each path's sums add in the same order)
    for i, path, shape, per, eight in _tensor_shapes(sass) if slots is None else slots():
        n = executed[i]
        if not n:
            continue
        fl = 2.0 * shape[0] * shape[1] * shape[2] * float(n) / per
        a = acc[path]
        a[0] += fl
        if eight:
            a[1] += fl
    return {path: (a[0], a[1]) for path, a in acc.items()}


def _tensor_flops(launch) -> tuple[dict, list]:
    """FLOPs per tensor path: the sum of that path's dense ops counters (2 FLOP per MAC), or the SASS's count
    (:func:`sass_tensor_flops`) where that is larger by more than 0.1% (the path ran types the counters do not
    count, e.g. fp8 wgmma) or where the report has no counters at all."""
    out, gone = {}, []
    sass = sass_tensor_flops(launch)
    for path, (counters, section) in M.tensor_op_counters().items():
        vals = [launch.value(c) for c in counters]
        present = [v for v in vals if v is not None]
        counted = float(sum(present)) if present else None
        from_sass = sass.get(path)
        if from_sass is not None and (counted is None or from_sass > 1.001 * counted):
            counted = from_sass
        if counted is None and path == "hgmma" and not _has_wgmma(launch):
            counted = 0.0  # no wgmma on this chip (before CC 9.0): the path carries nothing, it is not unknown
        out[path] = counted
        if out[path] is None:
            gone.append(missing(f"roofline.flops_by_path.tensor_{path}", section))
    return out, gone


def _has_wgmma(launch) -> bool:
    """Whether the launch's GPU has wgmma (compute capability 9.x); True when the report does not say."""
    major, _ = launch.get("cc_major")
    return major is None or int(major) == 9


def flops(f: _Frame) -> dict:
    """FLOPs by path and pipe (CC 9.0, as ncu's roofline sections count them).

      tensor, per path  = sum of ``sm__ops_path_tensor_op_{hmma,hgmma}_src_*_sparsity_off.sum``
                          (ops counters count 2 FLOP per multiply-add); tensor = hmma + hgmma;
      fp32              = (fadd + fmul + 2*ffma), each
                          ``smsp__sass_thread_inst_executed_op_<op>_pred_on.sum.per_cycle_elapsed``
                          x ``smsp__cycles_elapsed.avg``;
      fp16 (non-tensor) = (2*hadd + 2*hmul + 4*hfma), same counters for h* ops (packed HFMA2);
      total             = tensor + fp32 + fp16.
    Returns {tensor_hmma, tensor_hgmma, tensor, fp32, fp16, total} (None where a counter is missing).
    """
    tf, gone_t = _tensor_flops(f.launch)
    f.gone += gone_t
    for path, v in tf.items():
        f.add(f"flops_tensor_{path}", v, "FLOP", f"sum sm__ops_path_tensor_op_{path}_src_*_sparsity_off.sum")
    cyc, _ = f.get("smsp_cycles_elapsed", "roofline.flops_by_path.fp32")

    def thread_ops(canons: list[tuple[str, float]], fld: str):
        total = 0.0
        for canon, weight in canons:
            v, _ = f.launch.get(canon)
            if v is None or cyc is None:
                f.gone.append(missing(fld, M.metric_spec(canon).section))
                return None
            total += weight * float(v) * cyc
        return total

    fp32 = thread_ops([("fadd_per_cycle", 1), ("fmul_per_cycle", 1), ("ffma_per_cycle", 2)], "roofline.flops_by_path.fp32")
    fp16 = thread_ops([("hadd_per_cycle", 2), ("hmul_per_cycle", 2), ("hfma_per_cycle", 4)], "roofline.flops_by_path.fp16")
    f.add("flops_fp32", fp32, "FLOP", "(fadd+fmul+2*ffma) smsp__sass_thread_inst_executed_op_*_pred_on.sum.per_cycle_elapsed x smsp__cycles_elapsed.avg")
    f.add("flops_fp16", fp16, "FLOP", "(2*hadd+2*hmul+4*hfma) smsp__sass_thread_inst_executed_op_h*_pred_on.sum.per_cycle_elapsed x smsp__cycles_elapsed.avg")
    tensor = None if any(v is None for v in tf.values()) else float(sum(tf.values()))
    f.add("flops_tensor", tensor, "FLOP", "tensor_hmma + tensor_hgmma (what ncu's tensor roofline counts)")
    parts = [tensor, fp32, fp16]
    total = None if any(p is None for p in parts) else float(sum(parts))
    f.add("flops", total, "FLOP", "tensor_hmma + tensor_hgmma + fp32 + fp16")
    return {**{f"tensor_{p}": v for p, v in tf.items()}, "tensor": tensor, "fp32": fp32, "fp16": fp16, "total": total}


def memory(f: _Frame, duration_s: float | None, dur_name: str) -> dict:
    """Bytes per level (rate x ``gpu__time_duration.sum`` for ncu's three), the shared-memory detail and
    LDSM bank conflicts.

      l1   = ``derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.per_second`` (LSU global/local/shared
             writeback; TMA and LDSM traffic are not in it),
      l2   = ``derived__lts__lts2xbar_bytes.sum.per_second`` (L2 -> SM),
      dram = ``dram__bytes.sum.per_second``;
      smem = ``sm__sass_data_bytes_mem_shared.sum`` + ``…_op_gmma.sum`` (counts, not rates: bytes the
             shared-memory SASS instructions move - LDS/STS, LDSM/STSM, LDGSTS, atomics - plus the wgmma
             operand reads; TMA writes are in neither). The total's description names HGMMA, but on gh100
             (ncu 2025.3.1) it leaves them out: the cuDNN (wgmma) report has total = ld + st + stsm to the
             byte and 671 MB ``op_gmma`` besides. So op_gmma is added unless the total already holds it
             (total >= gmma + ld + st + ldsm + stsm + atom). ``bytes_smem_<op>`` = ``…_op_<op>.sum``: they
             do not add up to the total - ``op_ldgsts`` holds a few % of the cp.async bytes the total
             counts (v04: 39 MB vs ~550 MB).
    LDSM: ``ldsm_wavefronts``, ``ldsm_bank_conflicts`` (``sm__sass_l1tex_data_…_op_ldsm``),
    ``ldsm_conflict_ways`` = wavefronts / (wavefronts - conflicts) (1 = conflict-free).
    Returns {level: bytes or None}.
    """
    out = {}
    for level in NCU_LEVELS:
        rate, name = f.get(f"{level}_bytes_per_second", f"roofline.bytes.{level}")
        b = None if rate is None or duration_s is None else rate * duration_s
        out[level] = b
        f.add(f"bytes_{level}", b, "byte", f"{name} x {dur_name}")
    smem, smem_name = f.get("smem_bytes", "roofline.bytes.smem")
    by_op = {op: f.get(f"smem_bytes_{op}", f"roofline.smem.bytes_by_op.{op}") for op in SMEM_OPS}
    gmma, gmma_name = by_op["gmma"]
    if smem is not None and gmma:
        known = gmma + sum(by_op[op][0] or 0.0 for op in ("ld", "st", "ldsm", "stsm", "atom"))
        if smem < known:  # the total left the wgmma operand reads out
            smem, smem_name = smem + gmma, f"{smem_name} + {gmma_name}"
    out["smem"] = smem
    f.add("bytes_smem", smem, "byte", smem_name)
    for op, (v, name) in by_op.items():
        f.add(f"bytes_smem_{op}", v, "byte", name)
    wf, wf_name = f.get("ldsm_wavefronts", "roofline.smem.ldsm.wavefronts")
    bc, bc_name = f.get("ldsm_bank_conflicts", "roofline.smem.ldsm.bank_conflicts")
    f.add("ldsm_wavefronts", wf, "", wf_name)
    f.add("ldsm_bank_conflicts", bc, "", bc_name)
    ways = None if wf is None or bc is None or wf - bc <= 0 else wf / (wf - bc)
    f.add("ldsm_conflict_ways", ways, "", "ldsm_wavefronts / (ldsm_wavefronts - ldsm_bank_conflicts)")
    return out


#: why an L2 read counter is null on a report that did not collect it (taken before the section had it, or without it)
L2_NOT_COLLECTED = ("not collected: whowaits' WhowaitsRoofline section collects the L2 read fan-out's counters "
                    "(since commit fa07923; ncu's full set all but the multicast bytes)")
#: why it is null where the report holds the metric without a value
L2_NO_VALUE = "ncu recorded no value for it in this launch"


def l2_reads(f: _Frame) -> dict:
    """The L2 read fan-out: how many SMs one L2 read for the SMs serves.

      delivered_bytes = ``l1tex__m_xbar2l1tex_read_bytes.sum`` (bytes the SMs' L1TEX received from the
                        crossbar: every load from L2, TMA included),
      multicast_bytes = ``…_mem_global_op_tma_ld_dest_multicast.sum`` (of those, delivered by TMA multicast),
      sectors         = ``lts__t_sectors_srcunit_tex_op_read.sum`` (L2 sectors read for the SMs),
      requests        = ``lts__t_requests_srcunit_tex_op_read.sum``,
      miss_sectors    = ``lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum`` (of those sectors, the misses);
      bytes           = sectors x ``l2_sector_bytes`` (gpus.toml: 32),
      fanout          = delivered_bytes / bytes (2.44 on the H200's v34 at b4_h16_s4096: one L2 read served 2.44
                        SMs; ``bytes_l2``, lts2xbar cycles x 32, counts the deliveries, not the reads),
      miss_share      = miss_sectors / sectors, multicast_share = multicast_bytes / delivered_bytes.
    Rows ``l2_read_<name>``. A counter the report lacks is null and named in ``missing``
    (``roofline.l2_reads.<name>``, section WhowaitsRoofline) with its ``reason``; what is derived from it is
    null. Returns {name: value or None}."""
    out: dict = {}
    for name in L2_READ_COUNTERS:
        canon = f"l2_read_{name}"
        v, ncu_name = f.launch.get(canon)
        spec = M.metric_spec(canon)
        if v is None:
            why = L2_NO_VALUE if any(f.launch.has(n) for n in spec.names) else L2_NOT_COLLECTED
            f.gone.append({**missing(f"roofline.l2_reads.{name}", spec.section), "reason": why})
        out[name] = None if v is None else float(v)
        f.add(canon, out[name], spec.unit, ncu_name or spec.names[0])
    out.update(l2_read_derived(out))
    f.add("l2_read_bytes", out["bytes"], "byte", f"l2_read_sectors x {_l2_sector_bytes():g} (gpus.toml l2_sector_bytes)")
    f.add("l2_read_fanout", out["fanout"], "", "l2_read_delivered_bytes / l2_read_bytes")
    f.add("l2_read_miss_share", out["miss_share"], "", "l2_read_miss_sectors / l2_read_sectors")
    f.add("l2_read_multicast_share", out["multicast_share"], "", "l2_read_multicast_bytes / l2_read_delivered_bytes")
    return out


def _l2_sector_bytes() -> float:
    return float(M.gpus_config().get("l2_sector_bytes", 32))


def l2_read_derived(counters: dict) -> dict:
    """``{bytes, fanout, miss_share, multicast_share}`` of the L2 read counters (``{delivered_bytes,
    multicast_bytes, sectors, requests, miss_sectors}``, None where unknown; see :func:`l2_reads`). One launch's
    or the sums of several (profiler.compare.merge). No fan-out without both sides: none where nothing was read
    from L2, and none where the crossbar counter saw no byte of reads L2 did serve (0 delivered for 128 k sectors
    read on the committed RTX 4070 report, cc 8.9: a fan-out of 0 is no measurement)."""
    sectors, delivered = counters.get("sectors"), counters.get("delivered_bytes")
    miss, multicast = counters.get("miss_sectors"), counters.get("multicast_bytes")
    nbytes = None if sectors is None else float(sectors) * _l2_sector_bytes()
    return {"bytes": nbytes,
            "fanout": None if not delivered or not nbytes else delivered / nbytes,
            "miss_share": None if miss is None or not sectors else miss / sectors,
            "multicast_share": None if multicast is None or not delivered else multicast / delivered}


def _str(v):
    return v if isinstance(v, str) else None


def ceilings(f: _Frame, sm_hz: float | None, sm_hz_name: str) -> dict:
    """Every roof with the clock it uses, preferring the report's own peaks (x the clock the kernel ran at,
    ``<unit>__cycles_elapsed.avg.per_second``), else ``data/gpus.toml`` (per SM per cycle x SM count x clock).

      tensor_<path> = that path's dense counter ``.peak_sustained`` x SM clock (the path-less
                      ``sm__ops_path_tensor_src_*`` peak is the SPARSE one, 2x the dense wgmma roof, and is
                      not used); mma.sync (HMMA) sits at 2/3 of wgmma (HGMMA) on Hopper;
      tensor_dense  = the highest dense path roof: the GPU's dense tensor roof (wgmma on Hopper);
      fp32 = 2 x ffma peak, fp16 = 4 x hfma peak (x SM clock);
      bandwidth_<level> = ``…bytes….peak_sustained`` x that unit's clock; smem = ``smem_bytes_per_cycle_per_sm``
                      (gpus.toml, 128) x SM count x the L1 clock (the SM clock when that is absent).
    Adds ``clock_<sm|l1|l2|dram|smem>_hz`` rows. Returns {name: (value, source, clock_hz)}.
    """
    launch = f.launch
    spec = M.gpu_spec(_str(launch.get("device_name")[0]))
    sm_count, sm_count_name = launch.get("sm_count")
    fallback = spec[1] if spec else {}
    fb_name = f"gpus.toml[{spec[0]}]" if spec else None

    def per_sm_fallback(key):
        if key in fallback and sm_count is not None and sm_hz is not None:
            return fallback[key] * float(sm_count) * sm_hz, f"{fb_name}.{key} x {sm_count_name} x {sm_hz_name}", sm_hz
        return None, None, None

    out: dict[str, tuple] = {}
    split = _sass_tensor_split(launch)
    ratio = float(M.gpus_config().get("tensor_8bit_over_16bit", 2))
    for path, (counters, _section) in M.tensor_op_counters().items():
        vals = [(c, launch.value(c), launch.value(c + ".peak_sustained")) for c in counters]
        used = [(c, p) for c, v, p in vals if v and p]
        avail = [(c, p) for c, _, p in vals if p]
        pick = (used or avail or [None])[0]
        if pick is not None and sm_hz is not None:
            out[f"tensor_{path}"] = (pick[1] * sm_hz, f"{pick[0]}.peak_sustained x {sm_hz_name}", sm_hz)
        else:
            out[f"tensor_{path}"] = per_sm_fallback(f"{path}_fp16_flop_per_cycle_per_sm")
        total, eight = split.get(path, (None, None))
        v, src, hz = out[f"tensor_{path}"]
        if v is not None and total and eight is not None and eight > total / 2:  # the path ran mostly 8-bit types
            out[f"tensor_{path}"] = (v * ratio, f"{src} x {ratio} (8-bit types: gpus.toml tensor_8bit_over_16bit)", hz)
    dense = [(v, k) for k, (v, _, _) in out.items() if v]
    out["tensor_dense"] = ((max(dense)[0], f"max dense path roof ({max(dense)[1]})", sm_hz) if dense
                           else (None, None, None))
    for name, canon, weight, key in (
        ("fp32", "ffma_peak_per_cycle", 2, "fp32_flop_per_cycle_per_sm"),
        ("fp16", "hfma_peak_per_cycle", 4, "fp16_flop_per_cycle_per_sm"),
    ):
        v, n = launch.get(canon)
        out[name] = ((weight * float(v) * sm_hz, f"{weight} x {n} x {sm_hz_name}", sm_hz)
                     if v is not None and sm_hz is not None else per_sm_fallback(key))
    clocks = {"sm": sm_hz}
    for level in NCU_LEVELS:
        peak, pname = launch.get(f"{level}_peak_bytes_per_cycle")
        hz, hname = launch.get(f"{level}_clock_hz")
        clocks[level] = None if hz is None else float(hz)
        if peak is not None and hz is not None:
            out[f"bandwidth_{level}"] = (float(peak) * float(hz), f"{pname} x {hname}", float(hz))
        elif level == "dram" and "dram_bytes_per_second" in fallback:
            out["bandwidth_dram"] = (fallback["dram_bytes_per_second"], fb_name, None)
        elif level == "l2" and "l2_bytes_per_cycle" in fallback and sm_hz is not None:
            out["bandwidth_l2"] = (fallback["l2_bytes_per_cycle"] * sm_hz, f"{fb_name} x {sm_hz_name}", sm_hz)
        elif level == "l1" and "l1_bytes_per_cycle_per_sm" in fallback and sm_count and sm_hz:
            out["bandwidth_l1"] = (fallback["l1_bytes_per_cycle_per_sm"] * float(sm_count) * sm_hz,
                                   f"{fb_name} x {sm_hz_name}", sm_hz)
        else:
            out[f"bandwidth_{level}"] = (None, None, None)
    l1_hz, l1_hz_name = launch.get("l1_clock_hz")
    smem_hz, smem_hz_name = (float(l1_hz), l1_hz_name) if l1_hz is not None else (sm_hz, sm_hz_name)
    clocks["smem"] = smem_hz
    if "smem_bytes_per_cycle_per_sm" in fallback and sm_count and smem_hz:
        out["bandwidth_smem"] = (fallback["smem_bytes_per_cycle_per_sm"] * float(sm_count) * smem_hz,
                                 f"{fb_name}.smem_bytes_per_cycle_per_sm x {sm_count_name} x {smem_hz_name}", smem_hz)
    else:
        out["bandwidth_smem"] = (None, None, None)
    for key, (v, src, _hz) in out.items():
        f.add(f"ceiling_{key}", v, "byte/s" if key.startswith("bandwidth") else "FLOP/s", src or "")
        if v is None:
            f.gone.append(missing(f"roofline.ceilings.{key}",
                                  "WhowaitsRoofline" if key == "bandwidth_smem" else _ROOF_SECTION))
    for unit, hz in clocks.items():
        f.add(f"clock_{unit}_hz", hz, "Hz", {"sm": sm_hz_name, "smem": smem_hz_name}.get(unit, f"{unit} clock"))
    return out


def compute_pipe(fl: dict, tensor_path_roof: str | None) -> tuple[str | None, str | None]:
    """(pipe carrying most FLOPs, the ceiling key of its roof): tensor -> the roof of the path that carries
    most tensor FLOPs (``tensor_hmma``/``tensor_hgmma``), fp32 -> ``fp32``, fp16 -> ``fp16``."""
    work = {p: fl.get(p) for p in PIPES if fl.get(p)}
    if not work:
        return None, None
    pipe = max(work, key=work.get)
    return pipe, (tensor_path_roof if pipe == "tensor" else pipe)


def attainable(f: _Frame, fl: dict, bytes_: dict, ceil: dict, duration_s: float | None, dur_name: str) -> None:
    """Intensities (total, and per pipe: ncu's tensor roofline takes tensor FLOPs), achieved rates, the
    compute pipe's roof, ``attainable_<level>`` = min(compute roof, compute-pipe intensity x bandwidth) and
    ``tensor_roof_pct``."""
    for level, b in bytes_.items():
        for key, name in (("total", ""), ("tensor", "_tensor")):
            v = fl[key]
            f.add(f"intensity{name}_{level}", None if v is None or not b else v / b, "FLOP/byte",
                  f"flops{name} / bytes_{level}")
    for key, name in (("total", ""), ("tensor", "_tensor")):
        v = fl[key]
        f.add(f"achieved{name}_flops_per_second", None if v is None or not duration_s else v / duration_s,
              "FLOP/s", f"flops{name} / {dur_name}")
    tp = {k: fl.get(f"tensor_{k}") or 0.0 for k in ("hmma", "hgmma")}
    path_roof = f"tensor_{max(tp, key=tp.get)}" if any(tp.values()) else None
    pipe, roof_key = compute_pipe(fl, path_roof)
    roof, roof_src = (ceil[roof_key][0], f"ceiling_{roof_key} (the {pipe} pipe carries "
                      f"{100 * fl[pipe] / fl['total']:.1f}% of the FLOPs; pipes are not blended)") \
        if roof_key and fl.get("total") else (None, "")
    f.add("ceiling_compute", roof, "FLOP/s", roof_src)
    f.add("ceiling_tensor", ceil[path_roof][0] if path_roof else None, "FLOP/s",
          f"ceiling_{path_roof} (the path that carries the tensor FLOPs)" if path_roof else "no tensor FLOPs")
    for level in LEVELS:
        pf = fl.get(pipe) if pipe else None
        inten = None if pf is None or not bytes_[level] else pf / bytes_[level]
        bw = ceil[f"bandwidth_{level}"][0]
        att = None if inten is None or bw is None or roof is None else min(roof, inten * bw)
        f.add(f"attainable_{level}", att, "FLOP/s",
              f"min(ceiling_compute, flops_{pipe} / bytes_{level} x ceiling_bandwidth_{level})")
    dense = ceil["tensor_dense"][0]
    pct = (None if fl["tensor"] is None or not duration_s or not dense
           else 100.0 * fl["tensor"] / duration_s / dense)
    f.add("tensor_roof_pct", pct, "%", f"flops_tensor / {dur_name} / ceiling_tensor_dense x 100")


def roofline(launch) -> pd.DataFrame:
    """Roofline quantities of one launch, as a long frame (one row per quantity): :func:`flops`,
    :func:`memory`, :func:`l2_reads`, :func:`ceilings`, :func:`attainable` in turn (their docstrings give every formula).

    Quantities: ``flops``, ``flops_tensor``, ``flops_tensor_{hmma,hgmma}``, ``flops_fp32``, ``flops_fp16``;
    ``bytes_<level>``, ``bytes_smem_<op>``, ``ldsm_wavefronts``, ``ldsm_bank_conflicts``,
    ``ldsm_conflict_ways``; ``l2_read_<counter>``, ``l2_read_bytes``, ``l2_read_fanout``, ``l2_read_miss_share``,
    ``l2_read_multicast_share`` (:func:`l2_reads`); ``ceiling_tensor_{hmma,hgmma,dense}``, ``ceiling_fp32``, ``ceiling_fp16``,
    ``ceiling_bandwidth_<level>``, ``clock_<sm|l1|l2|dram|smem>_hz``; ``intensity_<level>`` (total FLOPs),
    ``intensity_tensor_<level>`` (tensor FLOPs, ncu's definition), ``achieved_flops_per_second``,
    ``achieved_tensor_flops_per_second``, ``ceiling_compute`` (the roof of the pipe carrying most FLOPs),
    ``ceiling_tensor`` (the roof of the tensor path used), ``attainable_<level>``, ``tensor_roof_pct``.

    Columns: ``quantity`` (str), ``value`` (float; NaN when missing), ``unit`` (str),
    ``source`` (str: ncu metric(s) or formula).
    """
    f = _Frame(launch)
    duration_ns, dur_name = f.get("duration_ns", "duration_ns")
    duration_s = None if duration_ns is None else duration_ns * 1e-9
    sm_hz, sm_hz_name = f.get("sm_clock_hz", "roofline.ceilings.clock_hz")
    fl = flops(f)
    bytes_ = memory(f, duration_s, dur_name)
    l2_reads(f)
    ceil = ceilings(f, sm_hz, sm_hz_name)
    attainable(f, fl, bytes_, ceil, duration_s, dur_name)
    df = pd.DataFrame(f.rows, columns=["quantity", "value", "unit", "source"])
    return with_missing(df, _dedup(f.gone))


__all__ = ["PIPES", "attainable", "ceilings", "compute_pipe", "flops", "l2_read_derived", "l2_reads", "memory", "roofline"]
