//===- CudaAttention.cu - The attention op's forward pass, tiled
//-----------===//
//
// AttentionTiles.h's blocks as CUDA thread blocks: a thread per row (a
// query; a key for dK and dV), the walked side's tile in shared memory, a
// barrier on each side of its load.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"

#include "runtime/AttentionTiles.h"

namespace pax::runtime::cuda {
namespace {

using namespace attention::tiles;
using attention::Pass;
using attention::Problem;

template <int D, Pass P>
__global__ void __launch_bounds__(kQueries)
    attentionTiles(const Problem *pp, int64_t batches) {
  const Problem &p = *pp;
  __shared__ Tile<D> t;
  int tid = int(threadIdx.x);
  int64_t r0 = int64_t(blockIdx.x) * kQueries, begin, end;
  walkRange(p, r0, begin, end);
  int64_t batch[flat::kMaxDims];
  Row<D, P> r;
  for (int64_t b = blockIdx.y; b < batches; b += gridDim.y) {
    batchPoint(p, b, batch);
    startRow(p, batch, r0, tid, r);
    for (int64_t j0 = begin; j0 < end; j0 += kKeys) {
      int n = int(end - j0 < kKeys ? end - j0 : kKeys);
      __syncthreads(); // every thread is done with the last tile
      loadWalked<D, P>(p, batch, j0, n, t, tid, kQueries);
      __syncthreads();
      walkTile(p, r, j0, n, t, tid);
    }
    finishRow(p, r);
  }
}

/// Launches the kernel of \p p's pass with head dims up to D.
template <int D>
void launchFor(const Problem &p, dim3 grid, const Problem *scratch,
               int64_t batches, cudaStream_t stream) {
  switch (p.pass) {
  case Pass::Forward:
    return attentionTiles<D, Pass::Forward>
        <<<grid, kQueries, 0, stream>>>(scratch, batches);
  case Pass::GradQ:
    return attentionTiles<D, Pass::GradQ>
        <<<grid, kQueries, 0, stream>>>(scratch, batches);
  default:
    return attentionTiles<D, Pass::GradKV>
        <<<grid, kQueries, 0, stream>>>(scratch, batches);
  }
}

} // namespace

bool attentionTiled(const Problem &p) { return tiled(p); }

cudaError_t launchAttentionTiled(const Problem &p, Problem *scratch,
                                 cudaStream_t stream) {
  if (cudaError_t e = cudaMemcpyAsync(scratch, &p, sizeof p,
                                      cudaMemcpyHostToDevice, stream))
    return e;
  int64_t rows = p.space.extents[rowDim(p)], batches = batchPoints(p);
  if (rows <= 0 || batches <= 0)
    return cudaSuccess;
  dim3 grid(unsigned((rows + kQueries - 1) / kQueries),
            unsigned(batches < 65535 ? batches : 65535));
  switch (headBucket(p)) {
  case 32:
    launchFor<32>(p, grid, scratch, batches, stream);
    break;
  case 64:
    launchFor<64>(p, grid, scratch, batches, stream);
    break;
  default:
    launchFor<128>(p, grid, scratch, batches, stream);
  }
  return cudaGetLastError();
}

} // namespace pax::runtime::cuda
