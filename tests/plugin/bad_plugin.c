/* Plugins that must be refused, one per build of this file:
 *   BAD_NO_ENTRY    no optim_plugin_init at all
 *   BAD_INIT_FAILS  optim_plugin_init returns an error with a message
 *   BAD_DUPLICATE   registers a class named like a built-in ("adam")
 *   BAD_SILENT      returns an error and leaves err empty */
#include <optim/plugin.h>

#if defined(BAD_NO_ENTRY)
__attribute__((visibility("default"))) int not_the_entry_point(void) { return 0; }
#elif defined(BAD_INIT_FAILS)
OPTIM_PLUGIN_INIT(optim_error *err)
{
    return optim_error_set(err, OPTIM_EINVAL, "bad_plugin: refusing to start (test)");
}
#elif defined(BAD_DUPLICATE)
static void apply_dense(const optim_dense_update *u) { (void)u; }
static const optim_class dup_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "adam",
    .apply_dense = apply_dense,
};
OPTIM_PLUGIN_INIT(optim_error *err) { return optim_register_class(&dup_class, err); }
#elif defined(BAD_SILENT)
OPTIM_PLUGIN_INIT(optim_error *err)
{
    (void)err;
    return OPTIM_ESTATE;
}
#endif
