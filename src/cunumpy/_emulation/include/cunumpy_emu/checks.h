// cunumpy_emu/checks.h: the memory checks of an emulated kernel library (included by
// prelude.h, never on its own). The library is compiled with GCC's sanitizer instrumentation
// but without a sanitizer runtime: this file defines the functions the instrumented code calls
// and forwards them to the emulator's runtime (emu_abi.h says what each checks mode is):
//   CUNUMPY_EMU_CHECKS 1   -fsanitize=kernel-address, inline shadow checks; a failed check
//                          calls __asan_report_*_noabort -> api->bad_access (never returns)
//   CUNUMPY_EMU_CHECKS 2   the same, outlined: __asan_{load,store}*_noabort -> api->access
//   CUNUMPY_EMU_CHECKS 3   -fsanitize=thread: __tsan_read*/write*/atomic* -> api->access, which
//                          checks the address and records the access for racecheck/initcheck;
//                          the atomics are performed here.
// The hooks themselves must not be instrumented (they would call themselves).
#ifndef CUNUMPY_EMU_CHECKS_H
#define CUNUMPY_EMU_CHECKS_H

#ifndef CUNUMPY_EMU_PRELUDE_H
#error "cunumpy_emu/checks.h is part of cunumpy_emu/prelude.h"
#endif

#ifndef CUNUMPY_EMU_CHECKS
#define CUNUMPY_EMU_CHECKS 0
#endif

extern "C" __attribute__((visibility("default"), used)) CUNUMPY_EMU_NOINSTR inline int cunumpy_emu_checks(void)
{
    return CUNUMPY_EMU_CHECKS;
}

#if CUNUMPY_EMU_CHECKS != 0

#define CUNUMPY_EMU_HOOK extern "C" __attribute__((visibility("hidden"), noinline, used)) CUNUMPY_EMU_NOINSTR
// The access's own instruction, not the one after the call (line tables map it to the source).
#define CUNUMPY_EMU_PC ((const void *)((const char *)__builtin_return_address(0) - 1))

namespace cunumpy_emu {
CUNUMPY_EMU_NOINSTR static inline void note_access(const volatile void *addr, std::size_t size, int kind,
                                                   const void *pc)
{
#if CUNUMPY_EMU_CHECKS == 3
    cunumpy_emu_worker *w = ::cunumpy_emu_only_worker;
#else
    cunumpy_emu_worker *w = ::cunumpy_emu_tls_worker;
#endif
    if (w != nullptr) // code run outside a launch (a library constructor) is not checked
        w->api->access(w, const_cast<const void *>(addr), size, kind, pc);
}
} // namespace cunumpy_emu

#endif

#if CUNUMPY_EMU_CHECKS != 0
// -fsanitize=integer-divide-by-zero: a division by zero fails the launch naming the thread,
// before the processor's trap (which would give SIGFPE, caught too, but whose thread a loop
// of CUDA threads cannot always tell).
extern "C" __attribute__((noinline, used)) CUNUMPY_EMU_NOINSTR void __ubsan_handle_divrem_overflow(void *, void *,
                                                                                                      void *)
{
    cunumpy_emu_worker *w = ::cunumpy_emu_tls_worker;
    w->api->trap(w, "integer division by zero; a GPU does not trap there but gives an undefined result, so this is "
                    "a bug of the kernel");
}
extern "C" __attribute__((noinline, used)) CUNUMPY_EMU_NOINSTR void __ubsan_handle_divrem_overflow_abort(void *a,
                                                                                                            void *b,
                                                                                                            void *c)
{
    __ubsan_handle_divrem_overflow(a, b, c);
}
#endif

#if CUNUMPY_EMU_CHECKS == 1 || CUNUMPY_EMU_CHECKS == 2
// Calls the instrumentation makes for its own bookkeeping (stack and globals are not
// instrumented: nothing to do).
CUNUMPY_EMU_HOOK void __asan_handle_no_return(void) {}
CUNUMPY_EMU_HOOK void __asan_before_dynamic_init(const char *) {}
CUNUMPY_EMU_HOOK void __asan_after_dynamic_init(void) {}
CUNUMPY_EMU_HOOK void __asan_register_globals(void *, std::size_t) {}
CUNUMPY_EMU_HOOK void __asan_unregister_globals(void *, std::size_t) {}
CUNUMPY_EMU_HOOK void __asan_alloca_poison(std::uintptr_t, std::size_t) {}
CUNUMPY_EMU_HOOK void __asan_allocas_unpoison(std::uintptr_t, std::uintptr_t) {}
#endif

#if CUNUMPY_EMU_CHECKS == 1
namespace cunumpy_emu {
[[noreturn]] CUNUMPY_EMU_NOINSTR static inline void bad_access(std::uintptr_t addr, std::size_t size, int kind,
                                                               const void *pc)
{
    cunumpy_emu_worker *w = ::cunumpy_emu_tls_worker;
    w->api->bad_access(w, reinterpret_cast<const void *>(addr), size, kind, pc);
    __builtin_unreachable();
}
} // namespace cunumpy_emu
#define CUNUMPY_EMU_REPORT(n)                                                                                          \
    CUNUMPY_EMU_HOOK void __asan_report_load##n##_noabort(std::uintptr_t a)                                          \
    {                                                                                                                  \
        cunumpy_emu::bad_access(a, n, 0, CUNUMPY_EMU_PC);                                                              \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK void __asan_report_store##n##_noabort(std::uintptr_t a)                                         \
    {                                                                                                                  \
        cunumpy_emu::bad_access(a, n, CUNUMPY_EMU_ACCESS_WRITE, CUNUMPY_EMU_PC);                                       \
    }
CUNUMPY_EMU_REPORT(1)
CUNUMPY_EMU_REPORT(2)
CUNUMPY_EMU_REPORT(4)
CUNUMPY_EMU_REPORT(8)
CUNUMPY_EMU_REPORT(16)
#undef CUNUMPY_EMU_REPORT
CUNUMPY_EMU_HOOK void __asan_report_load_n_noabort(std::uintptr_t a, std::size_t n)
{
    cunumpy_emu::bad_access(a, n, 0, CUNUMPY_EMU_PC);
}
CUNUMPY_EMU_HOOK void __asan_report_store_n_noabort(std::uintptr_t a, std::size_t n)
{
    cunumpy_emu::bad_access(a, n, CUNUMPY_EMU_ACCESS_WRITE, CUNUMPY_EMU_PC);
}
#endif

#if CUNUMPY_EMU_CHECKS == 2
#define CUNUMPY_EMU_CHECK(n)                                                                                           \
    CUNUMPY_EMU_HOOK void __asan_load##n##_noabort(std::uintptr_t a)                                                 \
    {                                                                                                                  \
        cunumpy_emu::note_access(reinterpret_cast<const void *>(a), n, 0, CUNUMPY_EMU_PC);                             \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK void __asan_store##n##_noabort(std::uintptr_t a)                                                \
    {                                                                                                                  \
        cunumpy_emu::note_access(reinterpret_cast<const void *>(a), n, CUNUMPY_EMU_ACCESS_WRITE, CUNUMPY_EMU_PC);       \
    }
CUNUMPY_EMU_CHECK(1)
CUNUMPY_EMU_CHECK(2)
CUNUMPY_EMU_CHECK(4)
CUNUMPY_EMU_CHECK(8)
CUNUMPY_EMU_CHECK(16)
#undef CUNUMPY_EMU_CHECK
CUNUMPY_EMU_HOOK void __asan_loadN_noabort(std::uintptr_t a, std::size_t n)
{
    cunumpy_emu::note_access(reinterpret_cast<const void *>(a), n, 0, CUNUMPY_EMU_PC);
}
CUNUMPY_EMU_HOOK void __asan_storeN_noabort(std::uintptr_t a, std::size_t n)
{
    cunumpy_emu::note_access(reinterpret_cast<const void *>(a), n, CUNUMPY_EMU_ACCESS_WRITE, CUNUMPY_EMU_PC);
}
#endif

#if CUNUMPY_EMU_CHECKS == 3
CUNUMPY_EMU_HOOK void __tsan_init(void) {}
CUNUMPY_EMU_HOOK void __tsan_func_entry(void *) {}
CUNUMPY_EMU_HOOK void __tsan_func_exit(void) {}
CUNUMPY_EMU_HOOK void __tsan_vptr_update(void **, void *) {}
CUNUMPY_EMU_HOOK void __tsan_vptr_read(void **) {}
CUNUMPY_EMU_HOOK void __tsan_read_range(void *a, unsigned long n)
{
    cunumpy_emu::note_access(a, n, 0, CUNUMPY_EMU_PC);
}
CUNUMPY_EMU_HOOK void __tsan_write_range(void *a, unsigned long n)
{
    cunumpy_emu::note_access(a, n, CUNUMPY_EMU_ACCESS_WRITE, CUNUMPY_EMU_PC);
}
#define CUNUMPY_EMU_TSAN_RW(n)                                                                                         \
    CUNUMPY_EMU_HOOK void __tsan_read##n(void *a) { cunumpy_emu::note_access(a, n, 0, CUNUMPY_EMU_PC); }              \
    CUNUMPY_EMU_HOOK void __tsan_write##n(void *a)                                                                    \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, n, CUNUMPY_EMU_ACCESS_WRITE, CUNUMPY_EMU_PC);                                      \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK void __tsan_unaligned_read##n(void *a) { cunumpy_emu::note_access(a, n, 0, CUNUMPY_EMU_PC); }    \
    CUNUMPY_EMU_HOOK void __tsan_unaligned_write##n(void *a)                                                          \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, n, CUNUMPY_EMU_ACCESS_WRITE, CUNUMPY_EMU_PC);                                      \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK void __tsan_volatile_read##n(void *a) { cunumpy_emu::note_access(a, n, 0, CUNUMPY_EMU_PC); }     \
    CUNUMPY_EMU_HOOK void __tsan_volatile_write##n(void *a)                                                           \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, n, CUNUMPY_EMU_ACCESS_WRITE, CUNUMPY_EMU_PC);                                      \
    }
CUNUMPY_EMU_TSAN_RW(1)
CUNUMPY_EMU_TSAN_RW(2)
CUNUMPY_EMU_TSAN_RW(4)
CUNUMPY_EMU_TSAN_RW(8)
CUNUMPY_EMU_TSAN_RW(16)
#undef CUNUMPY_EMU_TSAN_RW

// Atomics: recorded as atomic accesses, then performed (sequentially consistent: stronger than
// any order asked for, which is allowed).
#define CUNUMPY_EMU_ATOMIC_RMW_KIND (CUNUMPY_EMU_ACCESS_ATOMIC | CUNUMPY_EMU_ACCESS_WRITE)
#define CUNUMPY_EMU_TSAN_ATOMIC(bits, T)                                                                               \
    CUNUMPY_EMU_HOOK T __tsan_atomic##bits##_load(const volatile T *a, int)                                          \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, sizeof(T), CUNUMPY_EMU_ACCESS_ATOMIC, CUNUMPY_EMU_PC);                             \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                                   \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK void __tsan_atomic##bits##_store(volatile T *a, T v, int)                                       \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, sizeof(T), CUNUMPY_EMU_ATOMIC_RMW_KIND, CUNUMPY_EMU_PC);                           \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                                      \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK T __tsan_atomic##bits##_exchange(volatile T *a, T v, int)                                       \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, sizeof(T), CUNUMPY_EMU_ATOMIC_RMW_KIND, CUNUMPY_EMU_PC);                           \
        return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                            \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK T __tsan_atomic##bits##_fetch_add(volatile T *a, T v, int)                                      \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, sizeof(T), CUNUMPY_EMU_ATOMIC_RMW_KIND, CUNUMPY_EMU_PC);                           \
        return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                             \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK T __tsan_atomic##bits##_fetch_sub(volatile T *a, T v, int)                                      \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, sizeof(T), CUNUMPY_EMU_ATOMIC_RMW_KIND, CUNUMPY_EMU_PC);                           \
        return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                             \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK T __tsan_atomic##bits##_fetch_and(volatile T *a, T v, int)                                      \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, sizeof(T), CUNUMPY_EMU_ATOMIC_RMW_KIND, CUNUMPY_EMU_PC);                           \
        return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                             \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK T __tsan_atomic##bits##_fetch_or(volatile T *a, T v, int)                                       \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, sizeof(T), CUNUMPY_EMU_ATOMIC_RMW_KIND, CUNUMPY_EMU_PC);                           \
        return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                              \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK T __tsan_atomic##bits##_fetch_xor(volatile T *a, T v, int)                                      \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, sizeof(T), CUNUMPY_EMU_ATOMIC_RMW_KIND, CUNUMPY_EMU_PC);                           \
        return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                             \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK T __tsan_atomic##bits##_fetch_nand(volatile T *a, T v, int)                                     \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, sizeof(T), CUNUMPY_EMU_ATOMIC_RMW_KIND, CUNUMPY_EMU_PC);                           \
        return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                            \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK int __tsan_atomic##bits##_compare_exchange_strong(volatile T *a, T *c, T v, int, int)           \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, sizeof(T), CUNUMPY_EMU_ATOMIC_RMW_KIND, CUNUMPY_EMU_PC);                           \
        return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                        \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK int __tsan_atomic##bits##_compare_exchange_weak(volatile T *a, T *c, T v, int, int)             \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, sizeof(T), CUNUMPY_EMU_ATOMIC_RMW_KIND, CUNUMPY_EMU_PC);                           \
        return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                         \
    }                                                                                                                  \
    CUNUMPY_EMU_HOOK T __tsan_atomic##bits##_compare_exchange_val(volatile T *a, T c, T v, int, int)                 \
    {                                                                                                                  \
        cunumpy_emu::note_access(a, sizeof(T), CUNUMPY_EMU_ATOMIC_RMW_KIND, CUNUMPY_EMU_PC);                           \
        __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                              \
        return c;                                                                                                      \
    }
CUNUMPY_EMU_TSAN_ATOMIC(8, char)
CUNUMPY_EMU_TSAN_ATOMIC(16, short)
CUNUMPY_EMU_TSAN_ATOMIC(32, int)
CUNUMPY_EMU_TSAN_ATOMIC(64, long long)
#undef CUNUMPY_EMU_TSAN_ATOMIC
CUNUMPY_EMU_HOOK void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
CUNUMPY_EMU_HOOK void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
#endif

// Performance analysis (checks mode 3 built with CUNUMPY_EMU_ANALYSIS and GCC's or Clang's
// -fsanitize-coverage=trace-pc,trace-cmp): the start of every basic block, every comparison and
// every block-wide barrier is an event for the runtime's analysis (emu_analysis.h), at the code address that made it.
#if CUNUMPY_EMU_CHECKS == 3 && defined(CUNUMPY_EMU_ANALYSIS)
CUNUMPY_EMU_HOOK void __sanitizer_cov_trace_pc(void)
{
    cunumpy_emu::note_access(nullptr, 0, CUNUMPY_EMU_ACCESS_BLOCK, CUNUMPY_EMU_PC);
}
// -fsanitize-coverage=trace-cmp: the comparison that decides a branch (its line is the branch's)
#define CUNUMPY_EMU_NOTE_CMP(name, T)                                                                                  \
    CUNUMPY_EMU_HOOK void name(T, T) { cunumpy_emu::note_access(nullptr, 0, CUNUMPY_EMU_ACCESS_COMPARE, CUNUMPY_EMU_PC); }
CUNUMPY_EMU_NOTE_CMP(__sanitizer_cov_trace_cmp1, unsigned char)
CUNUMPY_EMU_NOTE_CMP(__sanitizer_cov_trace_cmp2, unsigned short)
CUNUMPY_EMU_NOTE_CMP(__sanitizer_cov_trace_cmp4, unsigned int)
CUNUMPY_EMU_NOTE_CMP(__sanitizer_cov_trace_cmp8, unsigned long long)
CUNUMPY_EMU_NOTE_CMP(__sanitizer_cov_trace_const_cmp1, unsigned char)
CUNUMPY_EMU_NOTE_CMP(__sanitizer_cov_trace_const_cmp2, unsigned short)
CUNUMPY_EMU_NOTE_CMP(__sanitizer_cov_trace_const_cmp4, unsigned int)
CUNUMPY_EMU_NOTE_CMP(__sanitizer_cov_trace_const_cmp8, unsigned long long)
CUNUMPY_EMU_NOTE_CMP(__sanitizer_cov_trace_cmpf, float)
CUNUMPY_EMU_NOTE_CMP(__sanitizer_cov_trace_cmpd, double)
#undef CUNUMPY_EMU_NOTE_CMP
CUNUMPY_EMU_HOOK void __sanitizer_cov_trace_switch(unsigned long long, unsigned long long *)
{
    cunumpy_emu::note_access(nullptr, 0, CUNUMPY_EMU_ACCESS_COMPARE, CUNUMPY_EMU_PC);
}
CUNUMPY_EMU_HOOK void cunumpy_emu_note_barrier(void)
{
    cunumpy_emu::note_access(nullptr, 0, CUNUMPY_EMU_ACCESS_BARRIER, CUNUMPY_EMU_PC);
}
#define CUNUMPY_EMU_NOTE_BARRIER() cunumpy_emu_note_barrier()
#else
#define CUNUMPY_EMU_NOTE_BARRIER() ((void)0)
#endif

#endif // CUNUMPY_EMU_CHECKS_H
