//===- DnnlCache.h - A CPU device's oneDNN primitives and packed weights -*- C++
//-*-===//
//
// oneDNN's primitives are compiled once per shape and want their weights
// in blocked layouts of their choosing. A CPU device keeps, per compute
// (or per chain, under its last compute), the compiled primitive and the
// weights packed into its layout, for as long as it runs the same program
// with the same resident weights (Device::beginRun). Convolutions
// (cpu/DnnlConv.h) and matrix products (cpu/DnnlMatmul.h) keep their own
// kinds of entries here; the helpers below are what they share.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_DNNLCACHE_H
#define PAX_RUNTIME_CPU_DNNLCACHE_H

#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <memory>

namespace pax::plan {
class Compute;
}
#ifdef PAX_HAVE_DNNL
namespace dnnl {
struct engine;
}
#endif

namespace pax::runtime::cpu {

/// One CPU device's compiled oneDNN primitives and packed weights, by key
/// (a compute, or the last compute of a chain) and the element type it
/// computes in (a 16-bit compute that oneDNN refuses runs again on f32
/// copies: another primitive); dropped when the device starts a run of
/// another program or with other weights.
class DnnlCache {
public:
  /// What one key keeps; each user derives its own.
  struct Entry {
    virtual ~Entry() = default;
    /// Whether it holds a compiled primitive.
    virtual bool compiled() const = 0;
  };

  DnnlCache();
  ~DnnlCache();
  DnnlCache(const DnnlCache &) = delete;
  DnnlCache &operator=(const DnnlCache &) = delete;
  void clear();

  /// The entry of \p key and \p type, made (empty) when absent or of
  /// another kind.
  template <typename E>
  E &entry(const void *key, plan::DType type = plan::F32) {
    if (E *e = dynamic_cast<E *>(find(key, type)))
      return *e;
    auto made = std::make_unique<E>();
    E &e = *made;
    put(key, type, std::move(made));
    return e;
  }
  /// Whether \p c (as a key) ran on a oneDNN primitive it keeps, in
  /// \p type.
  bool compiled(const plan::Compute &c, plan::DType type = plan::F32) const;
  /// At least \p bytes of scratch memory (64-byte aligned) that the
  /// device's primitives share, one running at a time.
  void *scratchpad(size_t bytes);

private:
  Entry *find(const void *key, plan::DType type) const;
  void put(const void *key, plan::DType type, std::unique_ptr<Entry> e);
  struct Entries;
  std::unique_ptr<Entries> entries;
};

/// Where packed weights came from: the resident tensors they were packed
/// from, so that a later call with the same ones packs nothing.
class PackedFrom {
public:
  /// True when \p sources are all resident and are those packed last.
  bool current(llvm::ArrayRef<const Tensor *> sources) const;
  /// Records that \p sources were packed now (kept only when all are
  /// resident; otherwise the next call packs again).
  void packed(llvm::ArrayRef<const Tensor *> sources);
  void clear() { from.clear(); }

private:
  llvm::SmallVector<const void *, 6> from;
};

/// Scratch memory of \p bytes for one primitive call: the device's shared
/// one from \p cache, or one of this call's own where there is no cache.
class Scratch {
public:
  Scratch(DnnlCache *cache, size_t bytes);
  void *get() const { return ptr; }

private:
  std::unique_ptr<uint8_t, void (*)(void *)> own;
  void *ptr = nullptr;
};

#ifdef PAX_HAVE_DNNL
/// The CPU engine every primitive runs on.
dnnl::engine &dnnlEngine();
#endif

/// Makes the oneDNN primitives created and run on this thread use as many
/// threads as this device's kernels have.
void useDeviceThreads();

/// Makes the oneDNN primitives and GEMMs created and run on this thread
/// use this thread alone (its caller's tasks are the parallelism).
void useOneThread();

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_DNNLCACHE_H
