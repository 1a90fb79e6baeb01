// A warp-specialised GEMM tile for Blackwell (sm_100a / sm_103a) on the 5th-generation tensor cores:
// C[M x N] (fp16) = A[M x K] (fp16, K-major) * B[N x K]^T (fp16, K-major), fp32 accumulation in tensor
// memory (TMEM). One CTA computes one 128 x 128 tile; 6 warps, each with one job:
//
//   warp 0        TMA producer: waits for a free stage (empty[s]), loads A and B k-blocks with
//                 cp.async.bulk.tensor into shared memory, completing on full[s] (expect_tx bytes).
//   warp 1        MMA issuer: allocates the TMEM accumulator (tcgen05.alloc), waits full[s], issues
//                 tcgen05.mma (4 per k-block of 64), frees the stage with tcgen05.commit -> empty[s]; after
//                 the last k-block commits to tmem_full; frees TMEM at the end (tcgen05.dealloc).
//   warps 2..5    epilogue: wait tmem_full, read their 32 TMEM lanes (a warp may touch lanes
//                 32 * (warp % 4) .. +31 only) with tcgen05.ld, convert, store C to global memory.
//
// The MMA completes only through the mbarrier its commit arrives on: nothing else tells the epilogue
// that TMEM holds the result. Written for static reading (cuobjdump -sass on a CPU-only machine): the
// tests read the SASS the mbarrier pairs, the role split and the opcode classes from it; it has not run
// on a Blackwell GPU here. Launch: grid (N / 128, M / 128), block 192, dynamic shared memory
// kSmemBytes, M, N multiples of 128, K a multiple of 64; the tensor maps are 2-D fp16 with box
// {64, 128} and 128-byte swizzle.
//
// tmem_roundtrip (below) exercises the other TMEM instructions (tcgen05.st, tcgen05.cp, tcgen05.shift)
// so that the opcode data is tested on every tcgen05 form nvcc emits.

#include <cuda.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace whowaits_sm100 {

constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = 4, kUmmaK = 16;
constexpr int kProducerWarp = 0, kMmaWarp = 1, kFirstEpilogueWarp = 2, kThreads = 192;
constexpr uint32_t kTmemCols = kBN;  // fp32 accumulator: 128 lanes x 128 columns
constexpr uint32_t kStageBytes = (kBM + kBN) * kBK * sizeof(__half);

struct alignas(1024) Smem {
    __half a[kStages][kBM * kBK];  // 1024-byte aligned stages: the 128-byte swizzle atom is 8 rows x 128 B
    __half b[kStages][kBN * kBK];
    uint64_t full[kStages];   // TMA -> MMA: the stage's bytes have landed
    uint64_t empty[kStages];  // MMA -> TMA: the MMAs that read the stage have completed
    uint64_t tmem_full;       // MMA -> epilogue: the accumulator is final
    uint32_t tmem_base;       // written by tcgen05.alloc
};
constexpr int kSmemBytes = sizeof(Smem);
static_assert(kSmemBytes <= 227 * 1024, "one CTA per SM: at most 227 KB of shared memory");

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarriers -------------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "retry:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra retry;\n"
        "}\n" ::"r"(smem_u32(bar)), "r"(parity)
        : "memory");
}

// ---- TMA ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(smem_u32(dst)), "l"(map), "r"(x), "r"(y), "r"(smem_u32(bar))
        : "memory");
}

// ---- tcgen05 -----------------------------------------------------------------------------------------
__device__ __forceinline__ void tmem_alloc(uint32_t* dst, uint32_t cols) {  // whole warp
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(smem_u32(dst)),
                 "r"(cols));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
}
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, uint32_t cols) {  // whole warp
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(cols));
}
__device__ __forceinline__ void tc_fence_before() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void tc_fence_after() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }

// Shared-memory matrix descriptor: start address, leading / stride byte offsets (>> 4), the fixed
// version bits (46..48 = 0b001), swizzle mode 2 = 128-byte swizzle (bits 61..63). K-major operand,
// 8-row x 128-byte swizzle atoms stacked every 1024 bytes (stride byte offset); the leading offset is
// unused for swizzled K-major layouts (1 by convention).
__device__ __forceinline__ uint64_t smem_desc(const void* p) {
    uint64_t d = 0;
    d |= static_cast<uint64_t>((smem_u32(p) & 0x3FFFF) >> 4);
    d |= static_cast<uint64_t>(1) << 16;
    d |= static_cast<uint64_t>(1024 >> 4) << 32;
    d |= static_cast<uint64_t>(1) << 46;
    d |= static_cast<uint64_t>(2) << 61;
    return d;
}

// Instruction descriptor of kind::f16: D fp32 (bits 4..5 = 1), A and B fp16 (0), both K-major, N >> 3 at
// bits 17..22, M >> 4 at bits 24..28.
constexpr uint32_t kIdesc = (1u << 4) | (static_cast<uint32_t>(kBN >> 3) << 17) | (static_cast<uint32_t>(kBM >> 4) << 24);

__device__ __forceinline__ void mma_f16(uint32_t tmem_d, uint64_t adesc, uint64_t bdesc, uint32_t accumulate) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %4, 0;\n"
        "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n"
        "}\n" ::"r"(tmem_d), "l"(adesc), "l"(bdesc), "r"(kIdesc), "r"(accumulate));
}
__device__ __forceinline__ void mma_commit(uint64_t* bar) {  // arrives on bar once every earlier MMA completed
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(smem_u32(bar))
                 : "memory");
}

// 32 lanes x 32 columns of 32 bits: thread t of the warp gets lane (taddr.lane + t), columns c..c+31.
__device__ __forceinline__ void tmem_load_32(uint32_t taddr, uint32_t (&r)[32]) {
    asm volatile(
        "tcgen05.ld.sync.aligned.32x32b.x32.b32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]),
          "=r"(r[8]), "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]), "=r"(r[15]),
          "=r"(r[16]), "=r"(r[17]), "=r"(r[18]), "=r"(r[19]), "=r"(r[20]), "=r"(r[21]), "=r"(r[22]), "=r"(r[23]),
          "=r"(r[24]), "=r"(r[25]), "=r"(r[26]), "=r"(r[27]), "=r"(r[28]), "=r"(r[29]), "=r"(r[30]), "=r"(r[31])
        : "r"(taddr));
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
}

}  // namespace whowaits_sm100

using namespace whowaits_sm100;

extern "C" __global__ void __launch_bounds__(kThreads, 1)
tcgen05_gemm(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
             __half* __restrict__ c, int M, int N, int K) {
    extern __shared__ __align__(1024) uint8_t smem_raw[];  // the dynamic window starts 1024-aligned (no static smem)
    Smem& s = *reinterpret_cast<Smem*>(smem_raw);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const int k_tiles = K / kBK;

    if (threadIdx.x == 0) {
        for (int i = 0; i < kStages; ++i) {
            mbar_init(&s.full[i], 1);   // the producer's expect_tx arrive (+ the TMA bytes)
            mbar_init(&s.empty[i], 1);  // the MMA warp's commit
        }
        mbar_init(&s.tmem_full, 1);     // the MMA warp's last commit
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (warp == kMmaWarp) tmem_alloc(&s.tmem_base, kTmemCols);
    tc_fence_before();
    __syncthreads();
    tc_fence_after();
    const uint32_t tmem_d = s.tmem_base;

    if (warp == kProducerWarp) {
        if (lane == 0) {
            for (int kt = 0; kt < k_tiles; ++kt) {
                const int st = kt % kStages;
                mbar_wait(&s.empty[st], ((kt / kStages) & 1) ^ 1);  // the first pass finds every stage free
                mbar_expect_tx(&s.full[st], kStageBytes);
                tma_load_2d(s.a[st], &tmap_a, kt * kBK, m0, &s.full[st]);
                tma_load_2d(s.b[st], &tmap_b, kt * kBK, n0, &s.full[st]);
            }
        }
    } else if (warp == kMmaWarp) {
        if (lane == 0) {
            for (int kt = 0; kt < k_tiles; ++kt) {
                const int st = kt % kStages;
                mbar_wait(&s.full[st], (kt / kStages) & 1);
                tc_fence_after();
#pragma unroll
                for (int k = 0; k < kBK / kUmmaK; ++k) {  // 16 fp16 = 32 bytes further along K in the swizzle atom
                    mma_f16(tmem_d, smem_desc(&s.a[st][k * kUmmaK]), smem_desc(&s.b[st][k * kUmmaK]),
                            (kt | k) != 0);
                }
                mma_commit(&s.empty[st]);  // frees the stage once these MMAs have read it
            }
            mma_commit(&s.tmem_full);      // the accumulator is final once every MMA has completed
        }
    } else if (warp >= kFirstEpilogueWarp) {
        mbar_wait(&s.tmem_full, 0);
        tc_fence_after();
        const int quarter = warp % 4;                // TMEM lanes this warp may access
        const int row = m0 + quarter * 32 + lane;    // lane i of TMEM = row i of the tile
        const uint32_t lane_base = tmem_d + (static_cast<uint32_t>(quarter * 32) << 16);
#pragma unroll 1
        for (int j = 0; j < kBN / 32; ++j) {
            uint32_t r[32];
            tmem_load_32(lane_base + j * 32, r);
            if (row < M) {
                __half2 h[16];
#pragma unroll
                for (int i = 0; i < 16; ++i) h[i] = __floats2half2_rn(__uint_as_float(r[2 * i]), __uint_as_float(r[2 * i + 1]));
                uint4* dst = reinterpret_cast<uint4*>(c + static_cast<size_t>(row) * N + n0 + j * 32);
                const uint4* src = reinterpret_cast<const uint4*>(h);
#pragma unroll
                for (int i = 0; i < 4; ++i) dst[i] = src[i];
            }
        }
    }
    tc_fence_before();
    __syncthreads();
    if (warp == kMmaWarp) {
        tc_fence_after();
        tmem_dealloc(tmem_d, kTmemCols);
    }
}

// TMEM round trip: registers -> TMEM (tcgen05.st), shared -> TMEM (tcgen05.cp, completion through a
// commit), a lane shift (tcgen05.shift), TMEM -> registers (tcgen05.ld) -> out. One CTA of 4 warps.
extern "C" __global__ void __launch_bounds__(128, 1)
tmem_roundtrip(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ alignas(1024) uint32_t tile[128 * 8];  // 128 rows x 256 bits for tcgen05.cp .128x256b
    __shared__ alignas(8) uint64_t copied;
    __shared__ uint32_t tmem_base;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int i = threadIdx.x; i < 128 * 8; i += blockDim.x) tile[i] = __float_as_uint(in[i]);
    if (threadIdx.x == 0) {
        mbar_init(&copied, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (warp == 0) tmem_alloc(&tmem_base, 32);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the tile is visible to the async proxy
    tc_fence_before();
    __syncthreads();
    tc_fence_after();
    const uint32_t taddr = tmem_base + (static_cast<uint32_t>(warp * 32) << 16);

    uint32_t v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = __float_as_uint(in[128 * 8 + threadIdx.x * 8 + i]);
    asm volatile("tcgen05.st.sync.aligned.32x32b.x8.b32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8};" ::"r"(taddr),
                 "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(v[4]), "r"(v[5]), "r"(v[6]), "r"(v[7]));
    asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
    tc_fence_before();
    __syncthreads();
    tc_fence_after();
    if (threadIdx.x == 0) {
        uint64_t d = 0;  // no swizzle, 128 rows of 32 bytes: core matrices 8 rows apart (256 B)
        d |= static_cast<uint64_t>((smem_u32(tile) & 0x3FFFF) >> 4);
        d |= static_cast<uint64_t>(256 >> 4) << 16;
        d |= static_cast<uint64_t>(256 >> 4) << 32;
        d |= static_cast<uint64_t>(1) << 46;
        asm volatile("tcgen05.cp.cta_group::1.128x256b [%0], %1;" ::"r"(tmem_base + 8), "l"(d));
        asm volatile("tcgen05.shift.cta_group::1.down [%0];" ::"r"(tmem_base + 16));
        mma_commit(&copied);
    }
    mbar_wait(&copied, 0);
    tc_fence_after();
    uint32_t r[32];
    tmem_load_32(taddr, r);
#pragma unroll
    for (int i = 0; i < 16; ++i) out[threadIdx.x * 16 + i] = __uint_as_float(r[i]) + __uint_as_float(r[16 + i]);
    tc_fence_before();
    __syncthreads();
    if (warp == 0) {
        tc_fence_after();
        tmem_dealloc(tmem_base, 32);
    }
    (void)lane;
}

// A CTA pair (cluster of 2) sharing one MMA, for the pair forms of the SASS (.2CTA, MULTICAST): one
// k-block of a 256 x 256 tile. Each CTA loads 128 rows of A and 128 rows of B^T into its own shared
// memory; both loads complete on the leader's (rank 0) barrier `full` (the peer names it through mapa);
// the leader's MMA warp issues tcgen05.mma.cta_group::2 (M = 256: rows 0..127 land in the leader's
// TMEM, 128..255 in the peer's) and commits with a multicast to `done` in both CTAs; every warp then
// reads its TMEM lanes. TMEM is allocated by one warp of each CTA (cta_group::2).
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128, 1)
tcgen05_pair(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
             float* __restrict__ out) {
    __shared__ alignas(1024) __half a[kBM * kBK];
    __shared__ alignas(1024) __half b[kBN * kBK];
    __shared__ alignas(8) uint64_t full;
    __shared__ alignas(8) uint64_t done;
    __shared__ uint32_t tmem_base;
    constexpr uint32_t kPairCols = 2 * kBN;  // N = 256 fp32 columns
    constexpr uint32_t kPairIdesc =
        (1u << 4) | (static_cast<uint32_t>(256 >> 3) << 17) | (static_cast<uint32_t>(256 >> 4) << 24);
    const int warp = threadIdx.x / 32;
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    if (threadIdx.x == 0) {
        mbar_init(&full, 1);
        mbar_init(&done, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (warp == 0) {
        asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(smem_u32(&tmem_base)),
                     "r"(kPairCols));
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;");
    }
    tc_fence_before();
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    tc_fence_after();
    const uint32_t tmem_d = tmem_base;
    uint32_t leader_full;
    asm volatile("mapa.shared::cluster.u32 %0, %1, 0;" : "=r"(leader_full) : "r"(smem_u32(&full)));
    if (threadIdx.x == 0) {
        if (rank == 0) mbar_expect_tx(&full, 2 * kStageBytes);  // both CTAs' A and B halves
        const int row = (blockIdx.x / 2) * 256 + rank * 128;
        asm volatile(
            "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes "
            "[%0], [%1, {%2, %3}], [%4];" ::"r"(smem_u32(a)), "l"(&tmap_a), "r"(0), "r"(row), "r"(leader_full)
            : "memory");
        asm volatile(
            "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes "
            "[%0], [%1, {%2, %3}], [%4];" ::"r"(smem_u32(b)), "l"(&tmap_b), "r"(0), "r"(static_cast<int>(rank) * 128),
            "r"(leader_full)
            : "memory");
    }
    if (rank == 0 && warp == 1) {
        if (threadIdx.x == 32) {
            mbar_wait(&full, 0);
            tc_fence_after();
#pragma unroll
            for (int k = 0; k < kBK / kUmmaK; ++k) {
                const uint32_t acc = k != 0;
                asm volatile(
                    "{\n"
                    ".reg .pred p;\n"
                    "setp.ne.b32 p, %4, 0;\n"
                    "tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, p;\n"
                    "}\n" ::"r"(tmem_d), "l"(smem_desc(&a[k * kUmmaK])), "l"(smem_desc(&b[k * kUmmaK])),
                    "r"(kPairIdesc), "r"(acc));
            }
            asm volatile(
                "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;"
                ::"r"(smem_u32(&done)), "h"(static_cast<uint16_t>(0x3))
                : "memory");
        }
    }
    mbar_wait(&done, 0);
    tc_fence_after();
    uint32_t r[32];
    tmem_load_32(tmem_d + (static_cast<uint32_t>(warp * 32) << 16), r);
    const int row = rank * 128 + warp * 32 + threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < 32; ++i) out[row * 32 + i] = __uint_as_float(r[i]);
    tc_fence_before();
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    if (warp == 0) {
        tc_fence_after();
        asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, %1;" ::"r"(tmem_d), "r"(kPairCols));
    }
}

// One tcgen05.mma of each kind, for the opcode each becomes (not a computation: operands are arguments):
// kind::f8f6f4 and kind::mxf8f6f4.block_scale -> UTCQMMA, kind::i8 -> UTCIMMA (sm_100a only: sm_103a has
// no integer MMA), kind::mxf4.block_scale -> UTCOMMA, .ws (weight stationary) kind::f16 -> UTCHMMA.WS.
extern "C" __global__ void tcgen05_kinds(uint64_t adesc, uint64_t bdesc, uint32_t tmem_d, uint32_t idesc,
                                         uint32_t tmem_sfa, uint32_t tmem_sfb) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;\n}\n"
                 ::"r"(tmem_d), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(1));
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ != 1030
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::i8 [%0], %1, %2, %3, p;\n}\n"
                 ::"r"(tmem_d), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(1));
#endif
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::mxf4.block_scale [%0], %1, %2, %3, [%5], [%6], p;\n}\n"
                 ::"r"(tmem_d), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(1), "r"(tmem_sfa), "r"(tmem_sfb));
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale [%0], %1, %2, %3, [%5], [%6], p;\n}\n"
                 ::"r"(tmem_d), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(1), "r"(tmem_sfa), "r"(tmem_sfb));
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
                 "tcgen05.mma.ws.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}\n"
                 ::"r"(tmem_d), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(1));
}
