// The kernels of test_emu.c, for test_emu_ucontext.c.
#include "test_emu_kernels.cpp"
