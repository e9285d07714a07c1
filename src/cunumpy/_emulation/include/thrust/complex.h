// <thrust/complex.h> under CPU emulation. See cunumpy_emu/complex.h.
#pragma once
#include <cunumpy_emu/complex.h>
