//===- Exchange.cpp - Moves between boxes of global tensors ---------------===//
#include "runtime/Exchange.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cstring>

namespace pax::runtime {

std::vector<int64_t> boxLo(const plan::Box &b, size_t rank) {
  std::vector<int64_t> lo(rank, 0);
  for (size_t i = 0; i < rank && i < size_t(b.lo_size()); ++i)
    lo[i] = b.lo(int(i));
  return lo;
}

size_t tensorRank(const plan::Exchange &x) {
  for (const plan::Box &b : llvm::concat<const plan::Box>(x.in(), x.out()))
    if (!b.empty())
      return size_t(b.lo_size());
  return 0;
}

llvm::Error checkPeerBoxes(const plan::Exchange &x, const plan::Group &g,
                           size_t r) {
  auto fits = [&](const plan::Box &b) {
    return b.empty() ||
           (size_t(b.lo_size()) == r && size_t(b.size_size()) == r);
  };
  for (uint32_t d : g.devices())
    if (int(d) >= x.in_size() || int(d) >= x.out_size() ||
        !fits(x.in(int(d))) || !fits(x.out(int(d))))
      return llvm::createStringError("a box of device " + llvm::Twine(d) +
                                     " in exchange '" + x.what() +
                                     "' does not have rank " + llvm::Twine(r));
  return llvm::Error::success();
}

int64_t overlapElements(const plan::Box &a, const plan::Box &b, size_t rank) {
  if (a.empty() || b.empty())
    return 0;
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    int64_t lo = std::max(a.lo(int(i)), b.lo(int(i)));
    int64_t hi = std::min(a.lo(int(i)) + a.size(int(i)),
                          b.lo(int(i)) + b.size(int(i)));
    n *= std::max<int64_t>(0, hi - lo);
  }
  return n;
}

namespace {
/// The overlap of two boxes, walked row-major in runs along the last dim.
struct Overlap {
  size_t rank;
  std::vector<int64_t> lo, hi;
  bool empty = false;

  Overlap(llvm::ArrayRef<int64_t> aLo, llvm::ArrayRef<int64_t> aSize,
          llvm::ArrayRef<int64_t> bLo, llvm::ArrayRef<int64_t> bSize)
      : rank(aLo.size()), lo(rank), hi(rank) {
    for (size_t i = 0; i < rank; ++i) {
      lo[i] = std::max(aLo[i], bLo[i]);
      hi[i] = std::min(aLo[i] + aSize[i], bLo[i] + bSize[i]);
      empty |= hi[i] <= lo[i];
    }
  }

  int64_t elements() const {
    if (empty)
      return 0;
    int64_t n = 1;
    for (size_t i = 0; i < rank; ++i)
      n *= hi[i] - lo[i];
    return n;
  }

  /// Calls fn(first element in a, first in b, run length) per run.
  template <typename Fn>
  void forEachRun(llvm::ArrayRef<int64_t> aLo, llvm::ArrayRef<int64_t> aShape,
                  llvm::ArrayRef<int64_t> bLo, llvm::ArrayRef<int64_t> bShape,
                  Fn fn) const {
    if (empty)
      return;
    if (rank == 0) {
      fn(0, 0, 1);
      return;
    }
    std::vector<int64_t> at(lo);
    // One run over the trailing dims both a and b hold whole (a tensor
    // copied as it is: one run of all its elements).
    size_t first = rank - 1;
    int64_t run = hi[first] - lo[first];
    auto whole = [&](size_t i) {
      return lo[i] == aLo[i] && lo[i] == bLo[i] &&
             hi[i] - lo[i] == aShape[i] && hi[i] - lo[i] == bShape[i];
    };
    while (first > 0 && whole(first)) {
      --first;
      run *= hi[first] - lo[first];
    }
    while (true) {
      int64_t ia = 0, ib = 0;
      for (size_t i = 0; i < rank; ++i) {
        ia = ia * aShape[i] + (at[i] - aLo[i]);
        ib = ib * bShape[i] + (at[i] - bLo[i]);
      }
      fn(ia, ib, run);
      size_t i = first;
      while (true) {
        if (i == 0)
          return;
        --i;
        if (++at[i] < hi[i])
          break;
        at[i] = lo[i];
      }
    }
  }
};

void addRun(const Tensor &src, int64_t is, Tensor &dst, int64_t id,
            int64_t run) {
  if (src.dtype == plan::F32 && dst.dtype == plan::F32) {
    const float *s = reinterpret_cast<const float *>(src.data.data()) + is;
    float *d = reinterpret_cast<float *>(dst.data.data()) + id;
    for (int64_t j = 0; j < run; ++j)
      d[j] += s[j];
    return;
  }
  bool real = isFloatDType(dst.dtype);
  for (int64_t j = 0; j < run; ++j)
    real ? dst.setReal(id + j, dst.real(id + j) + src.real(is + j))
         : dst.setInteger(id + j, dst.integer(id + j) + src.integer(is + j));
}

void copyRun(const Tensor &src, int64_t is, Tensor &dst, int64_t id,
             int64_t run) {
  if (src.dtype == dst.dtype) {
    int64_t eb = dtypeBytes(dst.dtype);
    std::memcpy(dst.data.data() + id * eb, src.data.data() + is * eb,
                size_t(run * eb));
    return;
  }
  bool real = isFloatDType(dst.dtype);
  for (int64_t j = 0; j < run; ++j)
    real ? dst.setReal(id + j, src.real(is + j))
         : dst.setInteger(id + j, src.integer(is + j));
}
} // namespace

int64_t moveOverlap(const Tensor &src, llvm::ArrayRef<int64_t> srcLo,
                    Tensor &dst, llvm::ArrayRef<int64_t> dstLo, bool add) {
  Overlap o(srcLo, src.shape, dstLo, dst.shape);
  o.forEachRun(srcLo, src.shape, dstLo, dst.shape,
               [&](int64_t is, int64_t id, int64_t run) {
                 add ? addRun(src, is, dst, id, run)
                     : copyRun(src, is, dst, id, run);
               });
  return o.elements();
}

std::vector<uint8_t> packOverlap(const Tensor &src,
                                 llvm::ArrayRef<int64_t> srcLo,
                                 llvm::ArrayRef<int64_t> lo,
                                 llvm::ArrayRef<int64_t> size) {
  Overlap o(srcLo, src.shape, lo, size);
  int64_t eb = dtypeBytes(src.dtype);
  std::vector<uint8_t> out(size_t(o.elements() * eb));
  int64_t at = 0;
  o.forEachRun(srcLo, src.shape, srcLo, src.shape,
               [&](int64_t is, int64_t, int64_t run) {
                 std::memcpy(out.data() + at * eb, src.data.data() + is * eb,
                             size_t(run * eb));
                 at += run;
               });
  return out;
}

void unpackOverlap(llvm::ArrayRef<uint8_t> packed, llvm::ArrayRef<int64_t> lo,
                   llvm::ArrayRef<int64_t> size, Tensor &dst,
                   llvm::ArrayRef<int64_t> dstLo, bool add) {
  Overlap o(lo, size, dstLo, dst.shape);
  // The packed overlap as a tensor of its own, starting at the overlap.
  Tensor piece;
  piece.dtype = dst.dtype;
  piece.shape.resize(o.rank);
  for (size_t i = 0; i < o.rank; ++i)
    piece.shape[i] = o.empty ? 0 : o.hi[i] - o.lo[i];
  piece.data = Bytes(packed.begin(), packed.end());
  moveOverlap(piece, o.lo, dst, dstLo, add);
}

int64_t countedBytes(const plan::Exchange &x, uint32_t device,
                     const Tensor &in, const Tensor &out) {
  switch (x.kind()) {
  case plan::Collective::ALL_REDUCE:
  case plan::Collective::REDUCE_SCATTER:
  case plan::Collective::ALL_TO_ALL:
    return in.bytes();
  case plan::Collective::ALL_GATHER:
  case plan::Collective::BROADCAST:
  case plan::Collective::SEND_RECV:
    return out.bytes();
  case plan::Collective::HALO_EXCHANGE:
    return out.bytes() -
           overlapElements(x.in(int(device)), x.out(int(device)),
                           out.shape.size()) *
               dtypeBytes(out.dtype);
  default:
    return 0;
  }
}

} // namespace pax::runtime
