//===- CudaDnn.cpp - Convolutions on cuDNN --------------------------------===//
#include "runtime/cuda/CudaDnn.h"

#include "runtime/PointKernelsHost.h"

#include <cudnn.h>

#include <climits>
#include <optional>
#include <utility>

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

/// Whether every size of \p s (padded by \p padH, \p padW) and every
/// tensor of \p p fits cuDNN's int32 dims.
bool fitsCudnn(const Prepared &p, const Window2DShape &s, int64_t padH,
               int64_t padW) {
  int64_t cin = s.g * s.ci, cout = s.g * s.co;
  for (int64_t v :
       {s.n, cin, cout, s.rows.size, s.cols.size, s.rows.out, s.cols.out,
        s.rows.kernel, s.cols.kernel, s.rows.stride, s.cols.stride,
        s.rows.dilation, s.cols.dilation, padH, padW, s.g})
    if (!fitsInt(v))
      return false;
  for (const Tensor *t :
       {p.ins[0], p.ins[1], static_cast<const Tensor *>(p.outs[0])})
    if (!fitsInt(t->numel()))
      return false;
  return true;
}

/// The element type of \p p's tensors as cuDNN's forward convolution
/// takes them: x, w, y (and the bias) of one type, f32, bf16 or fp16 (the
/// 16-bit ones accumulated in fp32); none otherwise.
std::optional<cudnnDataType_t> convType(const Prepared &p) {
  plan::DType t = p.ins[0]->dtype;
  for (const Tensor *u : p.ins)
    if (u->dtype != t)
      return std::nullopt;
  if (p.outs[0]->dtype != t)
    return std::nullopt;
  switch (t) {
  case plan::F32:
    return CUDNN_DATA_FLOAT;
  case plan::BF16:
    return CUDNN_DATA_BFLOAT16;
  case plan::F16:
    return CUDNN_DATA_HALF;
  default:
    return std::nullopt;
  }
}

/// How one convolution is described to cuDNN.
struct ConvDescription {
  const Prepared &p;
  const Window2DShape &s;
  int64_t padH, padW;
  cudnnDataType_t type;
  /// Tensor cores: TF32 for f32 (when allowed), the 16-bit types' own.
  bool tensorOps;
};

/// Fills \p d with \p c's descriptors: the activations as stored (NCHW or
/// channels-last; the dims given are still n, c, h, w), the weights,
/// and the convolution (fp32 accumulation, \p c's math).
llvm::Error describe(const ConvDescription &c, Descriptors &d) {
  const Window2DShape &s = c.s;
  auto check = [&](cudnnStatus_t st, const char *what) -> llvm::Error {
    if (st != CUDNN_STATUS_SUCCESS)
      return dnnError(c.p.c, what, st);
    return llvm::Error::success();
  };
  int cin = int(s.g * s.ci), cout = int(s.g * s.co);
  cudnnTensorFormat_t xf = s.xLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                      yf = s.yLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  if (auto err = check(cudnnCreateTensorDescriptor(&d.x), "descriptor"))
    return err;
  if (auto err = check(cudnnCreateTensorDescriptor(&d.y), "descriptor"))
    return err;
  if (auto err = check(cudnnCreateFilterDescriptor(&d.w), "descriptor"))
    return err;
  if (auto err = check(cudnnCreateConvolutionDescriptor(&d.conv), "descriptor"))
    return err;
  if (auto err =
          check(cudnnSetTensor4dDescriptor(d.x, xf, c.type, int(s.n), cin,
                                           int(s.rows.size), int(s.cols.size)),
                "input"))
    return err;
  if (auto err =
          check(cudnnSetTensor4dDescriptor(d.y, yf, c.type, int(s.n), cout,
                                           int(s.rows.out), int(s.cols.out)),
                "output"))
    return err;
  if (auto err = check(cudnnSetFilter4dDescriptor(
                           d.w, c.type, CUDNN_TENSOR_NCHW, cout, int(s.ci),
                           int(s.rows.kernel), int(s.cols.kernel)),
                       "weights"))
    return err;
  if (auto err = check(cudnnSetConvolution2dDescriptor(
                           d.conv, int(c.padH), int(c.padW), int(s.rows.stride),
                           int(s.cols.stride), int(s.rows.dilation),
                           int(s.cols.dilation), CUDNN_CROSS_CORRELATION,
                           CUDNN_DATA_FLOAT),
                       "convolution"))
    return err;
  if (auto err =
          check(cudnnSetConvolutionGroupCount(d.conv, int(s.g)), "groups"))
    return err;
  return check(cudnnSetConvolutionMathType(
                   d.conv, c.tensorOps ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
               "math type");
}

/// cuDNN's heuristics' best algorithm for \p d that runs here, with its
/// workspace bytes; none when no algorithm runs.
llvm::Expected<std::optional<std::pair<int, size_t>>>
chooseAlgorithm(cudnnHandle_t h, const Descriptors &d, const plan::Compute &c) {
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int count = 0;
  if (cudnnStatus_t st = cudnnGetConvolutionForwardAlgorithm_v7(
          h, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count,
          perf);
      st != CUDNN_STATUS_SUCCESS)
    return dnnError(c, "choosing an algorithm", st);
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS)
      continue;
    size_t need = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y,
                                                perf[i].algo,
                                                &need) == CUDNN_STATUS_SUCCESS)
      return std::make_pair(int(perf[i].algo), need);
  }
  return std::nullopt;
}

/// Whether cuDNN's output shape for \p d is \p s's (symmetricPad checked
/// the counts; this is the library's own word).
llvm::Expected<bool> outputAgrees(const Descriptors &d, const Window2DShape &s,
                                  const plan::Compute &c) {
  int on = 0, oc = 0, oh = 0, ow = 0;
  if (cudnnStatus_t st = cudnnGetConvolution2dForwardOutputDim(
          d.conv, d.x, d.w, &on, &oc, &oh, &ow);
      st != CUDNN_STATUS_SUCCESS)
    return dnnError(c, "output shape", st);
  return on == s.n && oc == s.g * s.co && oh == s.rows.out && ow == s.cols.out;
}

/// Adds \p p's bias (one value per output channel) to its output.
llvm::Error addBias(cudnnHandle_t h, const Prepared &p, const Window2DShape &s,
                    cudnnDataType_t type, Descriptors &d) {
  const float one = 1.0f;
  cudnnTensorFormat_t yf = s.yLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  if (cudnnStatus_t st = cudnnCreateTensorDescriptor(&d.bias);
      st != CUDNN_STATUS_SUCCESS)
    return dnnError(p.c, "descriptor", st);
  if (cudnnStatus_t st = cudnnSetTensor4dDescriptor(d.bias, yf, type, 1,
                                                    int(s.g * s.co), 1, 1);
      st != CUDNN_STATUS_SUCCESS)
    return dnnError(p.c, "bias", st);
  if (cudnnStatus_t st = cudnnAddTensor(h, &one, d.bias, p.ins[2]->data.data(),
                                        &one, d.y, p.outs[0]->data.data());
      st != CUDNN_STATUS_SUCCESS)
    return dnnError(p.c, "bias", st);
  return llvm::Error::success();
}

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
  std::optional<cudnnDataType_t> type = convType(p);
  if (padH < 0 || padW < 0 || !type || !fitsCudnn(p, s, padH, padW))
    return false;
  bool tensorOps = *type != CUDNN_DATA_FLOAT || allowTf32;
  auto h = static_cast<cudnnHandle_t>(handle);
  Descriptors d;
  if (auto err = describe({p, s, padH, padW, *type, tensorOps}, d))
    return err;
  auto agrees = outputAgrees(d, s, c);
  if (!agrees || !*agrees)
    return agrees;
  std::vector<int64_t> key = {s.n,
                              s.g * s.ci,
                              s.g * s.co,
                              s.rows.size,
                              s.cols.size,
                              s.rows.kernel,
                              s.cols.kernel,
                              s.rows.stride,
                              s.cols.stride,
                              s.rows.dilation,
                              s.cols.dilation,
                              padH,
                              padW,
                              s.g,
                              tensorOps,
                              s.xLast,
                              s.yLast,
                              int64_t(*type)};
  auto found = algorithms.find(key);
  if (found == algorithms.end()) {
    auto chosen = chooseAlgorithm(h, d, c);
    if (!chosen)
      return chosen.takeError();
    if (!*chosen)
      return false;
    found = algorithms.emplace(key, **chosen).first;
  }
  auto algo = cudnnConvolutionFwdAlgo_t(found->second.first);
  if (auto err = workspace(found->second.second))
    return computeError(c, llvm::toString(std::move(err)));
  // alpha and beta are floats for every data type but double.
  const float one = 1.0f, zero = 0.0f;
  if (cudnnStatus_t st = cudnnConvolutionForward(
          h, &one, d.x, p.ins[0]->data.data(), d.w, p.ins[1]->data.data(),
          d.conv, algo, work, found->second.second, &zero, d.y,
          p.outs[0]->data.data());
      st != CUDNN_STATUS_SUCCESS)
    return dnnError(c, "convolution", st);
  if (p.ins.size() > 2)
    if (auto err = addBias(h, p, s, *type, d))
      return err;
  return true;
}

} // namespace pax::runtime::cuda
