//===- CudaAttention.cu - The attention op's forward pass, tiled
//-----------===//
//
// AttentionTiles.h's blocks as CUDA thread blocks: a thread per query, the
// key tile in shared memory, a barrier on each side of its load.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"

#include "runtime/AttentionTiles.h"

namespace pax::runtime::cuda {
namespace {

using namespace attention::tiles;
using attention::Problem;

template <int D>
__global__ void __launch_bounds__(kQueries)
    attentionTiles(const Problem *pp, int64_t batches) {
  const Problem &p = *pp;
  __shared__ Tile<D> t;
  int tid = int(threadIdx.x);
  int64_t q0 = int64_t(blockIdx.x) * kQueries, end = keysEnd(p, q0);
  int64_t batch[flat::kMaxDims];
  Row<D> r;
  for (int64_t b = blockIdx.y; b < batches; b += gridDim.y) {
    batchPoint(p, b, batch);
    startRow(p, batch, q0, tid, r);
    for (int64_t j0 = 0; j0 < end; j0 += kKeys) {
      int n = int(end - j0 < kKeys ? end - j0 : kKeys);
      __syncthreads(); // every thread is done with the last tile
      loadKeys(p, batch, j0, n, t, tid, kQueries);
      __syncthreads();
      foldTile(r, tileScores(p, r, j0, n, t, tid), n, t, tid);
    }
    finishRow(p, r);
  }
}

} // namespace

bool attentionTiled(const Problem &p) { return tiled(p); }

cudaError_t launchAttentionTiled(const Problem &p, Problem *scratch,
                                 cudaStream_t stream) {
  if (cudaError_t e = cudaMemcpyAsync(scratch, &p, sizeof p,
                                      cudaMemcpyHostToDevice, stream))
    return e;
  int64_t sq = p.space.extents[p.qDim], batches = batchPoints(p);
  if (sq <= 0 || batches <= 0)
    return cudaSuccess;
  dim3 grid(unsigned((sq + kQueries - 1) / kQueries),
            unsigned(batches < 65535 ? batches : 65535));
  switch (headBucket(p)) {
  case 32:
    attentionTiles<32><<<grid, kQueries, 0, stream>>>(scratch, batches);
    break;
  case 64:
    attentionTiles<64><<<grid, kQueries, 0, stream>>>(scratch, batches);
    break;
  default:
    attentionTiles<128><<<grid, kQueries, 0, stream>>>(scratch, batches);
  }
  return cudaGetLastError();
}

} // namespace pax::runtime::cuda
