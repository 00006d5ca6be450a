/*
 * optim/export.h - OPTIM_API, the mark on every public declaration.
 *
 * The library is built with hidden visibility: only what a public header
 * declares with OPTIM_API is exported from liboptim.so, so the internal
 * optim__ functions stay private and the ABI is exactly the headers.
 */
#ifndef OPTIM_EXPORT_H
#define OPTIM_EXPORT_H

#if defined(_WIN32) || defined(__CYGWIN__)
#define OPTIM_API
#elif defined(__GNUC__) || defined(__clang__)
#define OPTIM_API __attribute__((visibility("default")))
#else
#define OPTIM_API
#endif

#endif
