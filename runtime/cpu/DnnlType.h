//===- DnnlType.h - oneDNN's element types of paxc's tensors ----*- C++ -*-===//
//
// For the files that build oneDNN primitives (PAX_HAVE_DNNL only): the
// memory descriptors' element type of a tensor.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_DNNLTYPE_H
#define PAX_RUNTIME_CPU_DNNLTYPE_H

#include "runtime/Tensor.h"

#include <oneapi/dnnl/dnnl.hpp>

namespace pax::runtime::cpu {

/// oneDNN's type of \p t's elements (f32, bf16, f16).
dnnl::memory::data_type dnnlType(const Tensor &t);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_DNNLTYPE_H
