/* Each built-in optimizer class at the instruction-set level in use
 * (optim/isa.h): optim_create copies the level's table, so every hook of
 * the object runs that level's build of the class's file. */
#include "optimizer/impl.h"
#include "optim/isa.h"
#include "optim/optimizers.h"

#ifdef OPTIM_HAVE_ISA_VARIANTS
/* Strong references, not OPTIM_ISA_DECLARE_CLASS's weak ones: a program
 * linked with liboptim.a must pull every level's objects in. */
#define OPTIM__DECLARE_LEVELS(sym) extern const optim_class sym, sym##_avx2, sym##_avx512;
OPTIM_BUILTIN_OPTIMIZERS(OPTIM__DECLARE_LEVELS)
#undef OPTIM__DECLARE_LEVELS

const optim_class *optim__isa_builtin(const optim_class *cls)
{
#define OPTIM__ISA_MAP(sym) \
    if (cls == &sym) return OPTIM_ISA_CLASS(sym);
    OPTIM_BUILTIN_OPTIMIZERS(OPTIM__ISA_MAP)
#undef OPTIM__ISA_MAP
    return cls;
}
#else
const optim_class *optim__isa_builtin(const optim_class *cls) { return cls; }
#endif
