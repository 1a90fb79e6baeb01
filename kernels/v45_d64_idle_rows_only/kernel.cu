// v45: v44's idle rows alone (WHOWAITS_IDLE_ROWS at d64), v34's tile order (no WHOWAITS_PARTIAL_SPREAD): separates
// the two changes of v44, which ran 3.2% slower than v34 at b4_h32_s4096_d64 with 3% less MMA work.
#pragma once
#ifndef WHOWAITS_NAMESPACE
#define WHOWAITS_NAMESPACE v45_d64_idle_rows_only
#endif
#define WHOWAITS_IDLE_ROWS 1
#include "v34_q_regs/kernel.cu"
