//===- GenerateKernelsInternal.h - The kernel generator's pieces -*- C++
//-*-===//
//
// What GenerateKernels.cpp (point kernels) and GenerateRowKernels.cpp (row
// kernels) share: computes read as the generic kernel reads them, which
// buffers something outside a kernel uses, and whether a kernel's buffers
// lie apart in the arena. Not part of the runtime's interface.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_GENERATEKERNELSINTERNAL_H
#define PAX_RUNTIME_GENERATEKERNELSINTERNAL_H

#include "codegen/plan/Plan.pb.h"
#include "runtime/PointKernels.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace pax::runtime::kernelgen {

/// One compute of a run, as the generic kernel reads it.
struct Member {
  const plan::Compute *c;
  Generic g;
  llvm::SmallVector<uint32_t, 4> ins, outs; // buffers
};

bool isFloatType(int32_t t);

/// \p c as a member of a point run (elementwise with float math, or a
/// one-source float copy, every map linear) or, with \p reductions, also a
/// float reduction (not an arg-reduction) over its whole inner dims, its
/// maps linear.
std::optional<Member> describeMember(const plan::DeviceProgram &prog,
                                     const plan::Compute &c,
                                     bool reductions = false);

/// How many instructions and bindings name each buffer.
std::vector<int> referenceCounts(const plan::DeviceProgram &prog);

/// Whether something other than \p members uses buffer \p b (or it is a
/// weight): a kernel of the members stores it.
bool usedOutside(const plan::DeviceProgram &prog, const std::vector<int> &refs,
                 llvm::ArrayRef<Member> members, uint32_t b);

/// Whether the buffers a kernel of \p members loads or stores lie apart in
/// the arena (or, with \p inPlaceToo, one exactly in place of another).
bool apartInArena(const plan::DeviceProgram &prog, const std::vector<int> &refs,
                  llvm::ArrayRef<Member> members, bool inPlaceToo = true);

/// Statements declaring \p name, a ScalarParams equal to \p q.
void emitParams(const ScalarParams &q, llvm::StringRef name,
                llvm::raw_ostream &os);

/// Statements that divide the coordinates NAME<k> out of \p flat, over
/// \p extents (the last fastest), at \p indent.
void emitCoordinates(llvm::raw_ostream &os, llvm::StringRef indent,
                     llvm::StringRef flat, llvm::ArrayRef<std::string> names,
                     llvm::ArrayRef<int64_t> extents);

/// Sets \p k's params (\p order) and the bytes it moves: each buffer it
/// loads and each it stores once, at most \p elements of it.
void setParamsAndTraffic(plan::GeneratedKernel &k,
                         const plan::DeviceProgram &prog,
                         llvm::ArrayRef<uint32_t> order,
                         llvm::function_ref<bool(uint32_t)> loaded,
                         llvm::function_ref<bool(uint32_t)> stored,
                         int64_t elements);

/// A row kernel for the computes from instruction \p at on, when a run of
/// at least two of them, one a reduction, makes one: appended to \p out;
/// returns how many computes it covers (0: none).
unsigned generateRowKernel(const plan::DeviceProgram &prog,
                           const std::vector<int> &refs, int at,
                           std::vector<plan::GeneratedKernel> &out);

} // namespace pax::runtime::kernelgen

#endif // PAX_RUNTIME_GENERATEKERNELSINTERNAL_H
