//===- KernelCache.h - Compiled kernels kept on disk -----------*- C++ -*-===//
//
// Where the backends keep what they compiled a plan's generated kernels to
// (a shared library for the cuda-emulated backend, a cubin for CUDA), so a
// plan compiles once per machine: $PAX_KERNEL_CACHE, else
// $XDG_CACHE_HOME/paxc/kernels, else ~/.cache/paxc/kernels (without a home
// folder, paxc-kernels in the temporary folder). An entry is
// named by a SHA-256 of everything that went into it (the sources, the
// headers, the compiler and its flags) and comes with a second file holding
// the SHA-256 of its bytes: an entry whose bytes do not match (truncated,
// corrupted, written by something else) is rebuilt, never used. Entries
// are written to a temporary file and renamed, so processes sharing the
// cache (MPI ranks) never see half an entry.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_KERNELCACHE_H
#define PAX_RUNTIME_KERNELCACHE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace pax::runtime {

/// The cache's folder (created when missing).
llvm::Expected<std::string> kernelCacheDir();

/// The hex SHA-256 of \p parts, each length-prefixed.
std::string cacheKey(llvm::ArrayRef<llvm::StringRef> parts);

/// The path of the entry \p key + \p ext, built by \p build when the cache
/// has no intact one. \p build writes the entry's bytes to the path it is
/// given (a temporary file) or fails.
llvm::Expected<std::string>
cachedEntry(llvm::StringRef key, llvm::StringRef ext,
            llvm::function_ref<llvm::Error(llvm::StringRef path)> build);

/// Writes \p text to \p path through a temporary file and a rename.
llvm::Error writeAtomically(llvm::StringRef path, llvm::StringRef text);

} // namespace pax::runtime

#endif // PAX_RUNTIME_KERNELCACHE_H
