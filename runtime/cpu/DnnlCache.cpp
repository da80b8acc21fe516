//===- DnnlCache.cpp - A CPU device's oneDNN primitives and packed weights ===//
#include "runtime/cpu/DnnlCache.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#ifdef PAX_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/cpu/DnnlType.h"
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif
#endif
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

namespace pax::runtime::cpu {

struct DnnlCache::Entries {
  std::map<std::pair<const void *, int>, std::unique_ptr<Entry>> byKey;
  /// The primitives' scratchpad (theirs, not oneDNN's per-thread one, which
  /// a device thread that ends would leave behind).
  std::unique_ptr<uint8_t, decltype(&std::free)> scratch{nullptr, &std::free};
  size_t scratchBytes = 0;
};

DnnlCache::DnnlCache() : entries(std::make_unique<Entries>()) {}
DnnlCache::~DnnlCache() = default;
void DnnlCache::clear() { entries->byKey.clear(); }

DnnlCache::Entry *DnnlCache::find(const void *key, plan::DType type) const {
  auto it = entries->byKey.find({key, int(type)});
  return it == entries->byKey.end() ? nullptr : it->second.get();
}

void DnnlCache::put(const void *key, plan::DType type,
                    std::unique_ptr<Entry> e) {
  entries->byKey[{key, int(type)}] = std::move(e);
}

bool DnnlCache::compiled(const plan::Compute &c, plan::DType type) const {
  const Entry *e = find(static_cast<const void *>(&c), type);
  return e && e->compiled();
}

void *DnnlCache::scratchpad(size_t bytes) {
  if (bytes > entries->scratchBytes) {
    size_t rounded = (bytes + 63) / 64 * 64;
    entries->scratch.reset(
        static_cast<uint8_t *>(std::aligned_alloc(64, rounded)));
    entries->scratchBytes = entries->scratch ? rounded : 0;
  }
  return entries->scratch.get();
}

bool PackedFrom::current(llvm::ArrayRef<const Tensor *> sources) const {
  if (sources.size() != from.size())
    return false;
  for (size_t i = 0; i < sources.size(); ++i)
    if (!sources[i]->resident || sources[i]->data.data() != from[i])
      return false;
  return true;
}

void PackedFrom::packed(llvm::ArrayRef<const Tensor *> sources) {
  from.clear();
  if (!llvm::all_of(sources, [](const Tensor *t) { return t->resident; }))
    return;
  for (const Tensor *t : sources)
    from.push_back(t->data.data());
}

Scratch::Scratch(DnnlCache *cache, size_t bytes) : own(nullptr, &std::free) {
  if (cache) {
    ptr = cache->scratchpad(bytes);
    return;
  }
  if (bytes)
    own.reset(
        static_cast<uint8_t *>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  ptr = own.get();
}

#ifdef PAX_HAVE_DNNL
dnnl::engine &dnnlEngine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::memory::data_type dnnlType(const Tensor &t) {
  switch (t.dtype) {
  case plan::BF16:
    return dnnl::memory::data_type::bf16;
  case plan::F16:
    return dnnl::memory::data_type::f16;
  default:
    return dnnl::memory::data_type::f32;
  }
}
#endif

void useDeviceThreads() {
#if defined(PAX_HAVE_DNNL) && DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  // A primitive takes the count when it is made.
  omp_set_num_threads(
      int(std::min<size_t>(size_t(tbb::this_task_arena::max_concurrency()),
                           tbb::global_control::active_value(
                               tbb::global_control::max_allowed_parallelism))));
#endif
}

void useOneThread() {
#if defined(PAX_HAVE_DNNL) && DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  omp_set_num_threads(1);
#endif
}

} // namespace pax::runtime::cpu
