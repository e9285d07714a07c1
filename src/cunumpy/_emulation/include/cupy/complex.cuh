// <cupy/complex.cuh> under CPU emulation: CuPy's complex<T> (thrust::complex) in the global
// namespace. See cunumpy_emu/complex.h.
#pragma once
#include <cunumpy_emu/complex.h>

using thrust::complex;
