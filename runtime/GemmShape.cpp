//===- GemmShape.cpp - A contraction as strided batched BLAS calls --------===//
#include "runtime/GemmShape.h"

#include <algorithm>

namespace pax::runtime {

namespace {

/// The dims of one role merged into one run: its extent and the steps of
/// the operands that use it (0 in the others).
struct Run {
  int64_t extent = 1;
  int64_t step[3] = {0, 0, 0}; // A, B, C
};

/// Merges the innermost of \p dims (steps \p steps[d][operand]) into one
/// run over the operands \p x and \p y: from the dim \p x steps through
/// fastest outward, while each dim steps by the product of those inside it
/// in both. The dims left out are appended to \p rest.
void mergeRun(llvm::ArrayRef<unsigned> dims, llvm::ArrayRef<int64_t> extents,
              const std::vector<std::array<int64_t, 3>> &steps, int x, int y,
              Run &run, std::vector<unsigned> &rest) {
  if (dims.empty())
    return;
  std::vector<unsigned> order(dims.begin(), dims.end());
  std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
    return std::abs(steps[a][x]) < std::abs(steps[b][x]);
  });
  unsigned innermost = order.front();
  run.extent = extents[innermost];
  for (int o = 0; o < 3; ++o)
    run.step[o] = steps[innermost][o];
  size_t i = 1;
  for (; i < order.size(); ++i) {
    unsigned d = order[i];
    if (steps[d][x] != run.step[x] * run.extent ||
        steps[d][y] != run.step[y] * run.extent)
      break;
    run.extent *= extents[d];
  }
  rest.insert(rest.end(), order.begin() + long(i), order.end());
}

/// A stored matrix's transpose flag and leading dim for BLAS: it is rows x
/// cols column-major when rows step by 1 (the leading dim is the cols
/// step), or the transpose of a cols x rows one when cols step by 1.
bool storage(int64_t rows, int64_t cols, int64_t rowStep, int64_t colStep,
             bool &trans, int64_t &ld) {
  if (rows == 1 || rowStep == 1) {
    trans = false;
    ld = cols == 1 ? rows : colStep;
    return ld >= std::max<int64_t>(rows, 1);
  }
  if (cols == 1 || colStep == 1) {
    trans = true;
    ld = rows == 1 ? cols : rowStep;
    return ld >= std::max<int64_t>(cols, 1);
  }
  return false;
}

/// The error of a compute that is not a strided batched GEMM, saying why.
llvm::Error notGemm(const Prepared &p, const llvm::Twine &why) {
  return computeError(p.c, "not a strided batched GEMM: " + why);
}

/// The iteration dims of each role: M (A and C), N (B and C), K (A and B,
/// summed over) and batch (C and at least one input).
struct DimRoles {
  std::vector<unsigned> m, n, k, batch;
};

/// Fills \p steps with each dim's steps in A, B and C (\p maps) and puts
/// each dim of more than one point in its role in \p roles, or fails
/// where a dim has none.
llvm::Error assignRoles(const Prepared &p, const AccessIndexer *const maps[3],
                        std::vector<std::array<int64_t, 3>> &steps,
                        DimRoles &roles) {
  const IterationSpace &s = p.space;
  for (size_t d = 0; d < s.extents.size(); ++d) {
    for (int o = 0; o < 3; ++o)
      steps[d][o] = maps[o]->step(unsigned(d));
    if (s.extents[d] <= 1)
      continue;
    bool a = steps[d][0] != 0, b = steps[d][1] != 0, c = steps[d][2] != 0;
    bool inner = llvm::is_contained(s.inner, unsigned(d));
    if (c && inner)
      return notGemm(p, "a reduced dim indexes the output");
    if (c && a && !b)
      roles.m.push_back(unsigned(d));
    else if (c && b && !a)
      roles.n.push_back(unsigned(d));
    else if (c)
      roles.batch.push_back(unsigned(d));
    else if (a && b && inner)
      roles.k.push_back(unsigned(d));
    else
      return notGemm(p, "dim '" + p.c.iters(int(d)).name() +
                            "' is summed over but not by both inputs");
  }
  return llvm::Error::success();
}

/// Sets \p g's sizes, transposes and leading dims from the runs \p m,
/// \p n and \p k, and which inputs are BLAS's A and B: C = A B where the
/// output is column-major, C^T = B^T A^T where it is row-major.
llvm::Error layOutMatrices(const Prepared &p, const Run &m, const Run &n,
                           const Run &k, GemmShape &g) {
  int bA = 0, bB = 1;
  auto rowMajor = [&] { return n.extent == 1 || n.step[2] == 1; };
  if (m.extent > 1 && m.step[2] == 1 && !(n.extent > 1 && n.step[2] == 1)) {
    // C column-major: C = A B.
    g.m = m.extent, g.n = n.extent, g.k = k.extent,
    g.ldc = n.extent == 1 ? m.extent : n.step[2];
    if (!storage(m.extent, k.extent, m.step[0], k.step[0], g.transA, g.lda) ||
        !storage(k.extent, n.extent, k.step[1], n.step[1], g.transB, g.ldb))
      return notGemm(p, "an input has no unit stride");
  } else if (rowMajor()) {
    // C row-major: C^T = B^T A^T, BLAS's A is the compute's B.
    bA = 1, bB = 0;
    g.m = n.extent, g.n = m.extent, g.k = k.extent;
    g.ldc = m.extent == 1 ? n.extent : m.step[2];
    if (!storage(n.extent, k.extent, n.step[1], k.step[1], g.transA, g.lda) ||
        !storage(k.extent, m.extent, k.step[0], m.step[0], g.transB, g.ldb))
      return notGemm(p, "an input has no unit stride");
  } else {
    return notGemm(p, "the output has no unit stride");
  }
  if (g.ldc < std::max<int64_t>(g.m, 1))
    return notGemm(p, "the output's rows overlap");
  g.aInput = bA;
  g.bInput = bB;
  return llvm::Error::success();
}

/// Sets \p g's strided batch and loops from the batch dims \p dimsBatch
/// (with \p extents and \p steps in the compute's A, B and C).
void layOutBatches(const std::vector<unsigned> &dimsBatch,
                   llvm::ArrayRef<int64_t> extents,
                   const std::vector<std::array<int64_t, 3>> &steps,
                   GemmShape &g) {
  int bA = g.aInput, bB = g.bInput;
  // The strided batch: the batch dim with the smallest output step; the
  // others are loops.
  auto last = std::min_element(
      dimsBatch.begin(), dimsBatch.end(), [&](unsigned x, unsigned y) {
        return std::abs(steps[x][2]) < std::abs(steps[y][2]);
      });
  unsigned d = *last;
  g.batch = extents[d];
  g.strideA = steps[d][bA], g.strideB = steps[d][bB], g.strideC = steps[d][2];
  for (unsigned e : dimsBatch)
    if (e != d)
      g.loops.push_back({extents[e], steps[e][bA], steps[e][bB], steps[e][2]});
}

} // namespace

llvm::Expected<GemmShape> matchGemm(const Prepared &p) {
  if (p.ins.size() < 2 || p.outs.size() != 1)
    return notGemm(p, "it needs inputs A and B and one output");
  const AccessIndexer *maps[3] = {&p.inMaps[0], &p.inMaps[1], &p.outMaps[0]};
  for (const AccessIndexer *m : maps)
    if (!m->isLinear())
      return notGemm(p, "a map is not linear");
  const IterationSpace &s = p.space;
  std::vector<std::array<int64_t, 3>> steps(s.extents.size());
  DimRoles dims;
  if (auto err = assignRoles(p, maps, steps, dims))
    return err;
  // The rows and columns are each one run of dims (the others are walked
  // as batches); the reduction must be one run.
  Run m, n, k;
  std::vector<unsigned> unmerged;
  mergeRun(dims.m, s.extents, steps, 0, 2, m, dims.batch);
  mergeRun(dims.n, s.extents, steps, 1, 2, n, dims.batch);
  mergeRun(dims.k, s.extents, steps, 0, 1, k, unmerged);
  if (!unmerged.empty())
    return notGemm(p, "the summed dims are not one run in both inputs");
  GemmShape g;
  int64_t base[3];
  llvm::SmallVector<int64_t, 8> zero(s.extents.size(), 0);
  for (int o = 0; o < 3; ++o)
    base[o] = maps[o]->index(zero);
  if (auto err = layOutMatrices(p, m, n, k, g))
    return err;
  g.offsetA = base[g.aInput], g.offsetB = base[g.bInput], g.offsetC = base[2];
  if (!dims.batch.empty())
    layOutBatches(dims.batch, s.extents, steps, g);
  return g;
}

void referenceGemm(const GemmShape &s, double alpha, const double *a,
                   const double *b, double beta, double *c) {
  size_t loops = s.loops.size();
  std::vector<int64_t> at(loops, 0);
  while (true) {
    int64_t oa = s.offsetA, ob = s.offsetB, oc = s.offsetC;
    for (size_t l = 0; l < loops; ++l) {
      oa += at[l] * s.loops[l].stepA;
      ob += at[l] * s.loops[l].stepB;
      oc += at[l] * s.loops[l].stepC;
    }
    for (int64_t t = 0; t < s.batch; ++t)
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double acc = 0;
          for (int64_t q = 0; q < s.k; ++q) {
            double x = a[oa + t * s.strideA +
                         (s.transA ? q + i * s.lda : i + q * s.lda)];
            double y = b[ob + t * s.strideB +
                         (s.transB ? j + q * s.ldb : q + j * s.ldb)];
            acc += x * y;
          }
          // As BLAS: with beta 0, C is not read (it may hold anything, a
          // NaN or an infinity among it).
          double &out = c[oc + t * s.strideC + i + j * s.ldc];
          out = alpha * acc + (beta == 0 ? 0.0 : beta * out);
        }
    size_t l = loops;
    while (l > 0 && ++at[l - 1] == s.loops[l - 1].extent)
      at[--l] = 0;
    if (l == 0)
      return;
  }
}

llvm::Expected<GemmTypes> gemmTypes(const Prepared &p, const GemmShape &s) {
  GemmTypes t{p.ins[size_t(s.aInput)]->dtype, p.outs[0]->dtype};
  bool sixteen = t.in == plan::BF16 || t.in == plan::F16;
  bool same = p.ins[size_t(s.bInput)]->dtype == t.in;
  if (same && (t.out == t.in || (sixteen && t.out == plan::F32)) &&
      (sixteen || t.in == plan::F32 || t.in == plan::F64))
    return t;
  return computeError(
      p.c, "a matrix product of " +
               plan::DType_Name(p.ins[size_t(s.aInput)]->dtype) + " and " +
               plan::DType_Name(p.ins[size_t(s.bInput)]->dtype) + " into " +
               plan::DType_Name(t.out) +
               " (BLAS takes f32 or f64 alone, bf16 or f16 "
               "into their own type or f32)");
}

} // namespace pax::runtime
