//===- AccessMap.h - Iteration dims and operand access maps ---------------===//
//
// A compute op is a loop nest over named iteration dims. Each operand and
// result says, per tensor dim, which iteration dims index it. Sharding logic
// anywhere in paxc is written over these two things alone.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace pax {

/// How an iteration dim behaves when it is split.
enum class IterKind : uint8_t {
  Parallel,   ///< `par`: independent points, no reduction
  Reduction,  ///< `red`: split leaves partial results that must be combined
  Sequential, ///< `seq`: a recurrence; the points depend on each other
};

llvm::StringRef iterKindName(IterKind k);
std::optional<IterKind> parseIterKind(llvm::StringRef text);

/// One loop of an op's iteration space: `oh: 112 par`.
struct IterDim {
  std::string name;
  int64_t extent = 1;
  IterKind kind = IterKind::Parallel;
};

/// The index of one tensor dim as a function of iteration dims.
struct AccessExpr {
  enum class Kind : uint8_t {
    Broadcast, ///< `_`: a size-1 dim, read at index 0 by every point
    Full,      ///< `*`: every point may read the whole dim
    Affine,    ///< `s*d + t*k + c`: a dim, a strided window, or an offset
    Group,     ///< `(h, d)`: row-major group, index = h * extent(d) + d;
               ///< `(h, *64) + 768`: each h reads 64 whole from 768 + 64*h
    Lookup,    ///< `gather(v)`: a data-dependent index in the range of v
  };

  Kind kind = Kind::Full;
  /// Iteration dims, by index into the op's iteration space. Affine: one
  /// (`d`) or two (`d`, window dim `k`); Group: two or more, or one or more
  /// and a whole trailing dim; Lookup: one.
  llvm::SmallVector<unsigned, 2> dims;
  int64_t stride = 1;   ///< Affine: coefficient of dims[0]
  int64_t dilation = 1; ///< Affine: coefficient of dims[1]
  int64_t offset = 0;   ///< Affine, Group: constant term
  /// Group: the extent of a trailing dim read whole (`*64`), below the
  /// group's dims; 1 when there is none.
  int64_t whole = 1;

  static AccessExpr dim(unsigned d);
  static AccessExpr shifted(unsigned d, int64_t stride, int64_t offset);
  static AccessExpr window(unsigned out, unsigned win, int64_t stride,
                           int64_t dilation, int64_t offset);
  static AccessExpr group(llvm::ArrayRef<unsigned> dims, int64_t whole = 1,
                          int64_t offset = 0);
  static AccessExpr lookup(unsigned d);
  static AccessExpr broadcast();
  static AccessExpr full();

  /// True for a plain `d`: the tensor dim is split exactly like dim d.
  bool isPlainDim() const {
    return kind == Kind::Affine && dims.size() == 1 && stride == 1 &&
           offset == 0;
  }
  /// True for a group that reads a trailing dim whole: `(h, *64)`.
  bool readsWhole() const { return kind == Kind::Group && whole > 1; }
  /// True when iteration dim \p d occurs in this expression.
  bool uses(unsigned d) const;

  friend bool operator==(const AccessExpr &a, const AccessExpr &b) {
    return a.kind == b.kind && a.dims == b.dims && a.stride == b.stride &&
           a.dilation == b.dilation && a.offset == b.offset &&
           a.whole == b.whole;
  }
};

/// One AccessExpr per tensor dim.
using AccessMap = llvm::SmallVector<AccessExpr, 4>;

/// IR text of \p e, naming dims from \p space: `2*oh + kh - 3`.
std::string accessExprStr(const AccessExpr &e, llvm::ArrayRef<IterDim> space);
/// IR text of a whole map: `[n, ci, 2*oh + kh - 3]`.
std::string accessMapStr(const AccessMap &m, llvm::ArrayRef<IterDim> space);

/// True where \p m reads tensor dim i at iteration dim i, for every dim.
bool isIdentityMap(const AccessMap &m);

/// The number of tensor positions the expression can address, when the
/// whole iteration range is walked (ignoring clipping at the tensor edge).
/// Used by the verifier and by shape checks in tests.
int64_t accessSpan(const AccessExpr &e, llvm::ArrayRef<IterDim> space);

/// The lowest and highest index an Affine expression reaches over the whole
/// space (strides and dilations of either sign; clipping ignored).
std::pair<int64_t, int64_t> affineRange(const AccessExpr &e,
                                        llvm::ArrayRef<IterDim> space);

} // namespace pax
