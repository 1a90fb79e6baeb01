// v07: the auto-tuner's pick. Exactly v06's kernel (kernels/v06_softmax_fusion/kernel.cu, compiled here in
// the namespace whowaits::v07_tuned so reports name it v07); only the default config in version.toml
// differs: the winner of `whowaits tune v06` at b1_h64_s1024_d128_fp16 and b4_h16_s4096_d128_fp16.
#pragma once
#define WHOWAITS_V06_NAMESPACE v07_tuned
#include "v06_softmax_fusion/kernel.cu"
