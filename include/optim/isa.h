/*
 * optim/isa.h - the instruction-set level the update kernels run at.
 *
 * On x86-64 the library holds each built-in optimizer's kernels three times:
 * compiled for the x86-64 baseline (SSE2), for x86-64-v3 (AVX2) and for
 * x86-64-v4 (AVX-512). The first optimizer created picks the highest level
 * the CPU (and the operating system) supports, once for the process; the
 * environment variable OPTIM_ISA=sse2|avx2|avx512 forces one. Every level
 * gives the same bits: no contraction into FMA, and no reduction whose order
 * depends on the vector width.
 *
 * A plugin gets the same by compiling its class's file once per level with
 * OPTIM_ISA_BUILD set (the CMake helper optim_add_plugin(NAME ... ISA_SOURCES
 * file.c) does it; without CMake: -DOPTIM_ISA_BUILD=1 -march=x86-64-v3 and
 * -DOPTIM_ISA_BUILD=2 -march=x86-64-v4 -mprefer-vector-width=512, as
 * optim-plugin.pc's avx2_cflags and avx512_cflags say) and registering the
 * level in use:
 *
 *     // yogi.c, compiled three times: defines yogi_class, yogi_class_avx2
 *     // and yogi_class_avx512.
 *     const optim_class OPTIM_ISA_NAME(yogi_class) = { ... };
 *
 *     #if OPTIM_ISA_BASELINE   // once: in the baseline build only
 *     OPTIM_ISA_DECLARE_CLASS(yogi_class);
 *     OPTIM_PLUGIN_INIT(optim_error *err)
 *     {
 *         return optim_register_class(OPTIM_ISA_CLASS(yogi_class), err);
 *     }
 *     #endif
 *
 * With GCC and Clang the per-level tables are weak references: a plugin
 * built once (no per-level objects linked in) registers its baseline table.
 */
#ifndef OPTIM_ISA_H
#define OPTIM_ISA_H

#include "optim/optimizer_class.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum optim_isa_level {
    OPTIM_ISA_SSE2 = 0, /* x86-64 baseline */
    OPTIM_ISA_AVX2 = 1, /* x86-64-v3: AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE */
    OPTIM_ISA_AVX512 = 2, /* x86-64-v4: v3 plus AVX-512 F, BW, CD, DQ, VL */
    /* One level fixed when the library was built (OPTIM_NATIVE, or not
     * x86-64): OPTIM_ISA cannot change it. */
    OPTIM_ISA_BUILT_IN = 3
} optim_isa_level;

/* The level in use (chosen on the first call, then fixed for the process).
 * Fails, with the level unchanged, when OPTIM_ISA names an unknown level or
 * one this CPU lacks; optim_create fails the same way then. */
OPTIM_API int optim_isa(optim_isa_level *level, optim_error *err);

/* "sse2", "avx2", "avx512", "built-in" (NULL for anything else). */
OPTIM_API const char *optim_isa_name(optim_isa_level level);

/* 1 when this CPU and library can run the level. */
OPTIM_API int optim_isa_supported(optim_isa_level level);

/* The class compiled for the level in use: avx512 where that is the level
 * and it is not NULL, else avx2 where the level is at least AVX2 and it is
 * not NULL, else sse2. sse2 is returned too when optim_isa fails. */
OPTIM_API const optim_class *optim_isa_pick(const optim_class *sse2, const optim_class *avx2,
                                            const optim_class *avx512);

/* OPTIM_ISA_NAME(sym): sym in the baseline build of a file, sym_avx2 and
 * sym_avx512 in the builds with OPTIM_ISA_BUILD=1 and 2. */
#if !defined(OPTIM_ISA_BUILD) || OPTIM_ISA_BUILD == 0
#define OPTIM_ISA_NAME(sym) sym
#elif OPTIM_ISA_BUILD == 1
#define OPTIM_ISA_NAME(sym) sym##_avx2
#elif OPTIM_ISA_BUILD == 2
#define OPTIM_ISA_NAME(sym) sym##_avx512
#else
#error "OPTIM_ISA_BUILD must be 0 (baseline), 1 (AVX2) or 2 (AVX-512)"
#endif

/* OPTIM_ISA_BASELINE: 1 in the baseline build (OPTIM_ISA_BUILD unset or 0),
 * where a file compiled per level keeps what must exist once. */
#if !defined(OPTIM_ISA_BUILD) || OPTIM_ISA_BUILD == 0
#define OPTIM_ISA_BASELINE 1
#else
#define OPTIM_ISA_BASELINE 0
#endif

/* Declares sym, sym_avx2 and sym_avx512. The two per-level tables are weak
 * and hidden with GCC and Clang: one that is not linked in reads as NULL,
 * and OPTIM_ISA_CLASS then picks a lower level. */
#if defined(__GNUC__)
#define OPTIM__ISA_WEAK __attribute__((weak, visibility("hidden")))
#else
#define OPTIM__ISA_WEAK
#endif
#define OPTIM_ISA_DECLARE_CLASS(sym)                     \
    extern const optim_class sym;                        \
    extern const optim_class sym##_avx2 OPTIM__ISA_WEAK; \
    extern const optim_class sym##_avx512 OPTIM__ISA_WEAK
/* The class table of the level in use (optim_isa_pick). */
#define OPTIM_ISA_CLASS(sym) optim_isa_pick(&sym, &sym##_avx2, &sym##_avx512)

#ifdef __cplusplus
}
#endif
#endif
