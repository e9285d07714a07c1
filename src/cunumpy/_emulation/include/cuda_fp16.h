// <cuda_fp16.h> under CPU emulation. See cunumpy_emu/half.h.
#pragma once
#include <cunumpy_emu/half.h>
