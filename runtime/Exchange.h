//===- Exchange.h - Blocks of global tensors and the moves between them ---===//
//
// A plan's buffers hold boxes of global tensors (plan::Box). A collective's
// Exchange says, per device, which box its input holds and which box its
// output receives; every communicator fills an output the same way: from
// the overlaps of the group members' inputs, summed in rank order for
// partial sums. These helpers move one overlap.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_EXCHANGE_H
#define PAX_RUNTIME_EXCHANGE_H

#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace pax::runtime {

/// The rank of the tensor an exchange moves: that of its first non-empty
/// box (a device that holds or receives nothing may have a buffer of
/// another rank).
size_t tensorRank(const plan::Exchange &x);

/// Every box of \p g's members in \p x has rank \p r (or is empty): what a
/// transport that reads its peers' boxes checks first.
llvm::Error checkPeerBoxes(const plan::Exchange &x, const plan::Group &g,
                           size_t r);

/// Where a box starts (all zeros for a rank-0 or whole tensor).
std::vector<int64_t> boxLo(const plan::Box &b, size_t rank);

/// Elements where \p a and \p b overlap.
int64_t overlapElements(const plan::Box &a, const plan::Box &b, size_t rank);

/// Copies (or, with \p add, adds) the elements where \p src, holding the
/// box of the global tensor that starts at \p srcLo, overlaps \p dst,
/// holding the box that starts at \p dstLo. Returns the elements moved.
int64_t moveOverlap(const Tensor &src, llvm::ArrayRef<int64_t> srcLo,
                    Tensor &dst, llvm::ArrayRef<int64_t> dstLo, bool add);

/// The packed elements of \p src's overlap with the box \p lo + \p size
/// (row-major over the overlap), for a transport that sends bytes.
std::vector<uint8_t> packOverlap(const Tensor &src,
                                 llvm::ArrayRef<int64_t> srcLo,
                                 llvm::ArrayRef<int64_t> lo,
                                 llvm::ArrayRef<int64_t> size);

/// The inverse of packOverlap: copies or adds \p packed (the overlap of the
/// box \p lo + \p size with \p dst's box at \p dstLo) into \p dst.
void unpackOverlap(llvm::ArrayRef<uint8_t> packed, llvm::ArrayRef<int64_t> lo,
                   llvm::ArrayRef<int64_t> size, Tensor &dst,
                   llvm::ArrayRef<int64_t> dstLo, bool add);

/// Bytes one device counts for a collective, by the convention the cost
/// model prices (see plan::Exchange::predicted_bytes).
int64_t countedBytes(const plan::Exchange &x, uint32_t device,
                     const Tensor &in, const Tensor &out);

} // namespace pax::runtime

#endif // PAX_RUNTIME_EXCHANGE_H
