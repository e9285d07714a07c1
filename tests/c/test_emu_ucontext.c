/* The emulator runtime's tests again with the ucontext fallback switch (what architectures
 * without a hand-written switch use), so that path is exercised on every machine. */
#define CUNUMPY_EMU_FORCE_UCONTEXT 1
#include "test_emu.c"
