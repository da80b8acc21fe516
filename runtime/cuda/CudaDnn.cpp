//===- CudaDnn.cpp - Convolutions on cuDNN --------------------------------===//
#include "runtime/cuda/CudaDnn.h"

#include "runtime/PointKernelsHost.h"

#include <cudnn.h>

#include <climits>

namespace pax::runtime::cuda {

namespace {

llvm::Error dnnError(const plan::Compute &c, const char *what,
                     cudnnStatus_t s) {
  return computeError(c, llvm::Twine("cuDNN: ") + what + ": " +
                             cudnnGetErrorString(s));
}

/// cuDNN's descriptors of one convolution, destroyed with it.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~Descriptors() {
    if (x)
      cudnnDestroyTensorDescriptor(x);
    if (y)
      cudnnDestroyTensorDescriptor(y);
    if (bias)
      cudnnDestroyTensorDescriptor(bias);
    if (w)
      cudnnDestroyFilterDescriptor(w);
    if (conv)
      cudnnDestroyConvolutionDescriptor(conv);
  }
};

bool fitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

} // namespace

llvm::Expected<std::unique_ptr<CudaDnn>> CudaDnn::create(cudaStream_t stream) {
  std::unique_ptr<CudaDnn> d(new CudaDnn());
  cudnnHandle_t h = nullptr;
  if (cudnnStatus_t s = cudnnCreate(&h); s != CUDNN_STATUS_SUCCESS)
    return llvm::createStringError(llvm::Twine("cuDNN: cannot start (") +
                                   cudnnGetErrorString(s) + ")");
  d->handle = h;
  d->stream = stream;
  if (cudnnStatus_t s = cudnnSetStream(h, stream); s != CUDNN_STATUS_SUCCESS)
    return llvm::createStringError(llvm::Twine("cuDNN: no stream (") +
                                   cudnnGetErrorString(s) + ")");
  return d;
}

CudaDnn::~CudaDnn() {
  if (work) {
    cudaStreamSynchronize(stream);
    cudaFree(work);
  }
  if (handle)
    cudnnDestroy(static_cast<cudnnHandle_t>(handle));
}

llvm::Error CudaDnn::workspace(size_t bytes) {
  if (bytes <= workBytes)
    return llvm::Error::success();
  // The old workspace may still be read by work in flight.
  if (cudaError_t e = cudaStreamSynchronize(stream))
    return llvm::createStringError(llvm::Twine("cuDNN workspace: ") +
                                   cudaGetErrorString(e));
  cudaFree(work);
  work = nullptr;
  workBytes = 0;
  if (cudaError_t e = cudaMalloc(&work, bytes))
    return llvm::createStringError(llvm::Twine("cuDNN workspace of ") +
                                   llvm::Twine(uint64_t(bytes)) +
                                   " bytes: " + cudaGetErrorString(e));
  workBytes = bytes;
  return llvm::Error::success();
}

llvm::Expected<bool> CudaDnn::conv(const Prepared &p, const Window2DShape &s,
                                   bool allowTf32) {
  const plan::Compute &c = p.c;
  int64_t padH = s.rows.symmetricPad(), padW = s.cols.symmetricPad();
  if (padH < 0 || padW < 0)
    return false;
  int64_t cin = s.g * s.ci, cout = s.g * s.co;
  for (int64_t v : {s.n, cin, cout, s.rows.size, s.cols.size, s.rows.out,
                    s.cols.out, s.rows.kernel, s.cols.kernel, s.rows.stride,
                    s.cols.stride, s.rows.dilation, s.cols.dilation, padH,
                    padW, s.g})
    if (!fitsInt(v))
      return false;
  for (const Tensor *t : {p.ins[0], p.ins[1], static_cast<const Tensor *>(
                                                  p.outs[0])})
    if (!fitsInt(t->numel()))
      return false;

  auto h = static_cast<cudnnHandle_t>(handle);
  Descriptors d;
  auto check = [&](cudnnStatus_t st, const char *what) -> llvm::Error {
    if (st != CUDNN_STATUS_SUCCESS)
      return dnnError(c, what, st);
    return llvm::Error::success();
  };
  if (auto err = check(cudnnCreateTensorDescriptor(&d.x), "descriptor"))
    return err;
  if (auto err = check(cudnnCreateTensorDescriptor(&d.y), "descriptor"))
    return err;
  if (auto err = check(cudnnCreateFilterDescriptor(&d.w), "descriptor"))
    return err;
  if (auto err =
          check(cudnnCreateConvolutionDescriptor(&d.conv), "descriptor"))
    return err;
  // The activations as stored: NCHW, or channels-last (the dims given
  // are still n, c, h, w).
  cudnnTensorFormat_t xf = s.xLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                      yf = s.yLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  if (auto err = check(cudnnSetTensor4dDescriptor(
                           d.x, xf, CUDNN_DATA_FLOAT, int(s.n), int(cin),
                           int(s.rows.size), int(s.cols.size)),
                       "input"))
    return err;
  if (auto err = check(cudnnSetTensor4dDescriptor(
                           d.y, yf, CUDNN_DATA_FLOAT, int(s.n), int(cout),
                           int(s.rows.out), int(s.cols.out)),
                       "output"))
    return err;
  if (auto err = check(cudnnSetFilter4dDescriptor(
                           d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(cout),
                           int(s.ci), int(s.rows.kernel), int(s.cols.kernel)),
                       "weights"))
    return err;
  if (auto err = check(cudnnSetConvolution2dDescriptor(
                           d.conv, int(padH), int(padW), int(s.rows.stride),
                           int(s.cols.stride), int(s.rows.dilation),
                           int(s.cols.dilation), CUDNN_CROSS_CORRELATION,
                           CUDNN_DATA_FLOAT),
                       "convolution"))
    return err;
  if (auto err = check(cudnnSetConvolutionGroupCount(d.conv, int(s.g)),
                       "groups"))
    return err;
  // FMA math: no TF32 unless allowed, as cuBLAS.
  if (auto err = check(cudnnSetConvolutionMathType(
                           d.conv, allowTf32 ? CUDNN_TENSOR_OP_MATH
                                             : CUDNN_FMA_MATH),
                       "math type"))
    return err;
  // The library must agree on the output's shape (symmetricPad checked
  // the counts; this is its own word).
  int on = 0, oc = 0, oh = 0, ow = 0;
  if (auto err = check(cudnnGetConvolution2dForwardOutputDim(
                           d.conv, d.x, d.w, &on, &oc, &oh, &ow),
                       "output shape"))
    return err;
  if (on != s.n || oc != cout || oh != s.rows.out || ow != s.cols.out)
    return false;

  std::vector<int64_t> key = {s.n,          cin,           cout,
                              s.rows.size,  s.cols.size,   s.rows.kernel,
                              s.cols.kernel, s.rows.stride, s.cols.stride,
                              s.rows.dilation, s.cols.dilation, padH,
                              padW,         s.g,           allowTf32,
                              s.xLast,      s.yLast};
  auto found = algorithms.find(key);
  if (found == algorithms.end()) {
    // cuDNN's heuristics, best first: the first that runs here.
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    if (auto err = check(cudnnGetConvolutionForwardAlgorithm_v7(
                             h, d.x, d.w, d.conv, d.y,
                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf),
                         "choosing an algorithm"))
      return err;
    int chosen = -1;
    size_t bytes = 0;
    for (int i = 0; i < count && chosen < 0; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS)
        continue;
      size_t need = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y,
                                                  perf[i].algo, &need) !=
          CUDNN_STATUS_SUCCESS)
        continue;
      chosen = int(perf[i].algo);
      bytes = need;
    }
    if (chosen < 0)
      return false;
    found = algorithms.emplace(key, std::make_pair(chosen, bytes)).first;
  }
  auto algo = cudnnConvolutionFwdAlgo_t(found->second.first);
  if (auto err = workspace(found->second.second))
    return computeError(c, llvm::toString(std::move(err)));
  const float one = 1.0f, zero = 0.0f;
  if (auto err = check(cudnnConvolutionForward(
                           h, &one, d.x, p.ins[0]->data.data(), d.w,
                           p.ins[1]->data.data(), d.conv, algo, work,
                           found->second.second, &zero, d.y,
                           p.outs[0]->data.data()),
                       "convolution"))
    return err;
  if (p.ins.size() > 2) {
    if (auto err = check(cudnnCreateTensorDescriptor(&d.bias), "descriptor"))
      return err;
    if (auto err = check(cudnnSetTensor4dDescriptor(d.bias, yf,
                                                    CUDNN_DATA_FLOAT, 1,
                                                    int(cout), 1, 1),
                         "bias"))
      return err;
    if (auto err = check(cudnnAddTensor(h, &one, d.bias,
                                        p.ins[2]->data.data(), &one, d.y,
                                        p.outs[0]->data.data()),
                         "bias"))
      return err;
  }
  return true;
}

} // namespace pax::runtime::cuda
