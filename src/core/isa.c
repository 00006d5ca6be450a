/* The instruction-set level the kernels run at (optim/isa.h): what the CPU
 * and the operating system support (CPUID and XGETBV), or what OPTIM_ISA
 * forces; chosen once for the process. */
#include "core/isa.h"

#include "core/internal.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(OPTIM_HAVE_ISA_VARIANTS)
#include <cpuid.h>

static int bit(unsigned reg, int b) { return (reg >> b) & 1u; }

/* XCR0: the register states the operating system saves. */
static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

/* The highest level of x86-64-v3 (AVX2) and x86-64-v4 (AVX-512) this CPU
 * runs, as the psABI defines them. */
static optim_isa_level detect(void)
{
    unsigned a, b, c1, d, b7 = 0, c7, d7, ce = 0;
    if (!__get_cpuid(1, &a, &b, &c1, &d)) return OPTIM_ISA_SSE2;
    if (__get_cpuid_max(0, NULL) >= 7) __cpuid_count(7, 0, a, b7, c7, d7);
    if (__get_cpuid(0x80000001u, &a, &b, &ce, &d) == 0) ce = 0;
    /* FMA, MOVBE, OSXSAVE, AVX, F16C; BMI1, AVX2, BMI2; LZCNT. */
    const int v3_cpu = bit(c1, 12) && bit(c1, 22) && bit(c1, 27) && bit(c1, 28) && bit(c1, 29) &&
        bit(b7, 3) && bit(b7, 5) && bit(b7, 8) && bit(ce, 5);
    if (!v3_cpu || (xcr0() & 0x6) != 0x6) return OPTIM_ISA_SSE2; /* XMM and YMM state */
    /* AVX512F, DQ, CD, BW, VL; opmask, ZMM_Hi256 and Hi16_ZMM state. */
    const int v4_cpu = bit(b7, 16) && bit(b7, 17) && bit(b7, 28) && bit(b7, 30) && bit(b7, 31);
    if (!v4_cpu || (xcr0() & 0xe0) != 0xe0) return OPTIM_ISA_AVX2;
    return OPTIM_ISA_AVX512;
}
#else
static optim_isa_level detect(void) { return OPTIM_ISA_BUILT_IN; }
#endif

static const char *const names[] = {"sse2", "avx2", "avx512", "built-in"};

const char *optim_isa_name(optim_isa_level level)
{
    return (unsigned)level < sizeof names / sizeof *names ? names[level] : NULL;
}

int optim_isa_supported(optim_isa_level level)
{
    const optim_isa_level top = detect();
    if (top == OPTIM_ISA_BUILT_IN) return level == OPTIM_ISA_BUILT_IN;
    return level <= top;
}

int optim__isa_choose(const char *forced, optim_isa_level top, optim_isa_level *level,
                      optim_error *err)
{
    if (!forced || !*forced) {
        *level = top;
        return OPTIM_OK;
    }
    if (top == OPTIM_ISA_BUILT_IN)
        return optim__err(err, OPTIM_EINVAL,
                          "OPTIM_ISA=%s: this library was built for one instruction set "
                          "(OPTIM_NATIVE, or not x86-64); unset OPTIM_ISA",
                          forced);
    for (int l = OPTIM_ISA_SSE2; l <= OPTIM_ISA_AVX512; l++) {
        if (strcmp(forced, names[l]) != 0) continue;
        if (l > (int)top)
            return optim__err(err, OPTIM_EINVAL,
                              "OPTIM_ISA=%s: this CPU lacks %s; it runs %s at most "
                              "(expected sse2 .. %s)",
                              forced, forced, names[top], names[top]);
        *level = (optim_isa_level)l;
        return OPTIM_OK;
    }
    return optim__err(err, OPTIM_EINVAL, "OPTIM_ISA=%s: expected sse2, avx2 or avx512", forced);
}

/* The level plus one once chosen (0: not yet, or OPTIM_ISA is bad); every
 * thread that races to choose it computes the same. */
static atomic_int chosen;

int optim_isa(optim_isa_level *level, optim_error *err)
{
    int c = atomic_load_explicit(&chosen, memory_order_acquire);
    optim_isa_level l = OPTIM_ISA_SSE2;
    if (c == 0) {
        int rc = optim__isa_choose(getenv("OPTIM_ISA"), detect(), &l, err);
        if (rc) return rc;
        c = (int)l + 1;
        atomic_store_explicit(&chosen, c, memory_order_release);
    }
    if (level) *level = (optim_isa_level)(c - 1);
    optim__err_clear(err);
    return OPTIM_OK;
}

const void *optim__isa_select(const void *sse2, const void *avx2, const void *avx512)
{
    optim_isa_level l;
    if (optim_isa(&l, NULL) || l == OPTIM_ISA_BUILT_IN) return sse2;
    if (l >= OPTIM_ISA_AVX512 && avx512) return avx512;
    if (l >= OPTIM_ISA_AVX2 && avx2) return avx2;
    return sse2;
}

const optim_class *optim_isa_pick(const optim_class *sse2, const optim_class *avx2,
                                  const optim_class *avx512)
{
    return optim__isa_select(sse2, avx2, avx512);
}
