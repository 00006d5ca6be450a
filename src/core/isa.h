/* The instruction-set level (optim/isa.h), and its choice as a pure
 * function for the tests. */
#ifndef OPTIM_CORE_ISA_H
#define OPTIM_CORE_ISA_H

#include "optim/isa.h"

/* The level OPTIM_ISA's value `forced` (NULL or "": none) asks for on a CPU
 * whose highest level is `top`; OPTIM_EINVAL naming the value when it is
 * unknown or above top. */
int optim__isa_choose(const char *forced, optim_isa_level top, optim_isa_level *level,
                      optim_error *err);

/* Kernels outside the optimizer classes (half conversions, clipping, ...)
 * get per-level builds the same way: a file listed in CMakeLists.txt's
 * OPTIM_ISA_SOURCES is compiled once per level and defines its kernels as
 * one table of function pointers,
 *
 *     const optim__clip_kernels OPTIM_ISA_NAME(optim__clip_kernels) = {...};
 *
 * declared for its callers with OPTIM__ISA_DECLARE(optim__clip_kernels,
 * optim__clip_kernels) and reached through OPTIM__ISA_TABLE(that), the
 * level in use's table (one atomic load). */
const void *optim__isa_select(const void *sse2, const void *avx2, const void *avx512);

#ifdef OPTIM_HAVE_ISA_VARIANTS
#define OPTIM__ISA_DECLARE(type, sym) extern const type sym, sym##_avx2, sym##_avx512
#define OPTIM__ISA_TABLE(sym) \
    ((const __typeof__(sym) *)optim__isa_select(&sym, &sym##_avx2, &sym##_avx512))
#else
#define OPTIM__ISA_DECLARE(type, sym) extern const type sym
#define OPTIM__ISA_TABLE(sym) (&sym)
#endif

#endif
