// cp.async (LDGSTS): 16-byte global -> shared copies that bypass registers, grouped by commit/wait.
#pragma once
#include <cstdint>

namespace whowaits { namespace common {

// @region inherit
// Copy 16 bytes when `valid`, else write 16 zero bytes (src-size 0: nothing is read from `src`).
__device__ __forceinline__ void cp_async_16_zfill(uint32_t smem_addr, const void* src, bool valid) {
    const int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(src), "r"(src_bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// @region sync
// Wait until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}}  // namespace whowaits::common
