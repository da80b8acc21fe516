//===- DnnlConv.cpp - 2-D convolutions on oneDNN's primitives -------------===//
#include "runtime/cpu/DnnlConv.h"
#include "runtime/cpu/Widen.h"

#include <cstdlib>
#include <memory>
#include <unordered_map>

#ifdef PAX_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/cpu/DnnlType.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>
#endif

namespace pax::runtime::cpu {

#ifdef PAX_HAVE_DNNL
namespace {
using dnnl::memory;

/// A convolution's compiled primitive and packed weights.
struct ConvEntry final : DnnlCache::Entry {
  bool compiled() const override { return primitive.has_value(); }
  std::optional<dnnl::convolution_forward> primitive;
  memory::desc userWeights, src, dst, bias;
  /// The weights in the primitive's layout.
  memory packed;
  /// The resident tensors \p packed (and \p bias) derive from.
  PackedFrom packedFrom;
  /// The bias with a batch norm folded in, else empty (the input's).
  std::vector<float> foldedBias;
  /// Elements from the input tensor's start to the window's first point.
  int64_t srcOffset = 0;
  /// The activations in the primitive's layouts, where they differ from
  /// the tensors' (reordered in and out), else empty.
  memory srcInner, dstInner;
  /// The primitive's scratchpad (given at each run).
  memory::desc scratchpad;
  /// oneDNN has no primitive for it: not asked again.
  bool refused = false;
  /// The residual is added by oneDNN's sum post-op: copied into the
  /// primitive's output before it runs (unless it is that output), so that
  /// the 1x1 and direct kernels take it (a binary add sends them to slower
  /// ones).
  bool sumResidual = false;
};

/// One spatial dim as oneDNN takes it: the input's rows from `shift`,
/// `size` of them, padded by `padL` before and `padR` after.
struct DnnlDim {
  int64_t shift = 0, size = 0, padL = 0, padR = 0;
};

/// \p w's window as oneDNN's padding: rows before the input are padding,
/// rows the window never reads (a block of a larger input) are cut off.
std::optional<DnnlDim> dnnlDim(const WindowDim &w) {
  if (w.stride < 1 || w.dilation < 1)
    return std::nullopt;
  DnnlDim d;
  d.padL = std::max<int64_t>(0, -w.offset);
  d.shift = std::max<int64_t>(0, w.offset);
  d.size = w.size - d.shift;
  int64_t span = (w.out - 1) * w.stride + (w.kernel - 1) * w.dilation + 1;
  d.padR = span - d.padL - d.size;
  // Rows past the window's reach: fewer than a stride are what oneDNN's
  // output count drops anyway; more are cut off the view.
  if (d.padR < 0 && -d.padR >= w.stride)
    d.size += d.padR;
  d.padR = std::max<int64_t>(0, d.padR);
  if (d.size < 1)
    return std::nullopt;
  return d;
}

/// An activation of \p c channels of \p type viewed as [n, c, h, w] over a
/// tensor of \p fullH x \p fullW positions stored NCHW, or channels-last
/// when \p last.
memory::desc activation(int64_t n, int64_t c, int64_t h, int64_t w,
                        int64_t fullH, int64_t fullW, bool last,
                        memory::data_type type) {
  memory::dims strides =
      last ? memory::dims{fullH * fullW * c, 1, fullW * c, c}
           : memory::dims{c * fullH * fullW, fullH * fullW, fullW, 1};
  return memory::desc({n, c, h, w}, type, strides);
}

/// A convolution's sizes as oneDNN takes them.
struct ConvParams {
  memory::dims strides, dilates, padL, padR;
};

/// The primitive descriptor of a convolution by \p algo from \p src and
/// \p weights (and \p bias, unless its dims are empty) to \p dst.
dnnl::convolution_forward::primitive_desc
describe(dnnl::algorithm algo, const memory::desc &src,
         const memory::desc &weights, const memory::desc &bias,
         const memory::desc &dst, const ConvParams &k,
         const dnnl::primitive_attr &attr) {
  auto kind = dnnl::prop_kind::forward_inference;
  bool biased = !bias.dims().empty();
#if DNNL_VERSION_MAJOR >= 3
  if (biased)
    return {dnnlEngine(), kind,      algo,      src,    weights, bias,
            dst,          k.strides, k.dilates, k.padL, k.padR,  attr};
  return {dnnlEngine(), kind,      algo,   src,    weights, dst,
          k.strides,    k.dilates, k.padL, k.padR, attr};
#else
  auto desc = biased
                  ? dnnl::convolution_forward::desc(kind, algo, src, weights,
                                                    bias, dst, k.strides,
                                                    k.dilates, k.padL, k.padR)
                  : dnnl::convolution_forward::desc(kind, algo, src, weights,
                                                    dst, k.strides, k.dilates,
                                                    k.padL, k.padR);
  return {desc, attr, dnnlEngine()};
#endif
}

/// The element type of \p d.
memory::data_type typeOf(const memory::desc &d) {
#if DNNL_VERSION_MAJOR >= 3
  return d.get_data_type();
#else
  return d.data_type();
#endif
}

/// True when oneDNN would run \p pd on its reference kernel (a scalar
/// loop, far slower than paxc's own paths).
bool reference(const dnnl::convolution_forward::primitive_desc &pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}

/// True when \p pd is worth running on activations in their own layouts:
/// not the reference kernel, and for 16-bit activations not the im2col
/// GEMM one (which is slower than reordering them into a blocked layout
/// for the direct kernels and back).
bool goodInPlace(const dnnl::convolution_forward::primitive_desc &pd,
                 bool sixteenBit) {
  std::string impl = pd.impl_info_str();
  return impl.rfind("ref", 0) != 0 &&
         !(sixteenBit && impl.find("gemm") != std::string::npos);
}

/// True for a 3x3 stride-1 convolution without groups or dilation, which
/// oneDNN's Winograd kernels compute with about half the multiplies.
bool winogradShape(const Window2DShape &s) {
  auto fits = [](const WindowDim &d) {
    return d.kernel == 3 && d.stride == 1 && d.dilation == 1;
  };
  return s.g == 1 && fits(s.rows) && fits(s.cols);
}

/// The primitive for \p e's activations: Winograd's where it applies,
/// else the direct one in the activations' layouts, else (when those have
/// only the reference kernel) the direct one in layouts oneDNN chooses.
/// Where the chosen layouts differ from the activations', \p e gets inner
/// memories the activations are reordered through.
dnnl::convolution_forward::primitive_desc
choose(const Window2DShape &s, ConvEntry &e, const memory::desc &weights,
       const ConvParams &k, const dnnl::primitive_attr &attr) {
  auto any = [](const memory::desc &d) {
    return memory::desc(d.dims(), typeOf(d), memory::format_tag::any);
  };
  auto inner = [&](const dnnl::convolution_forward::primitive_desc &pd) {
    if (pd.src_desc() != e.src)
      e.srcInner = memory(pd.src_desc(), dnnlEngine());
    if (pd.dst_desc() != e.dst)
      e.dstInner = memory(pd.dst_desc(), dnnlEngine());
    return pd;
  };
  if (winogradShape(s)) {
    try {
      return inner(describe(dnnl::algorithm::convolution_winograd, any(e.src),
                            weights, e.bias, any(e.dst), k, attr));
    } catch (const dnnl::error &) {
      // No Winograd kernel on this processor: the direct one.
    }
  }
  auto direct = dnnl::algorithm::convolution_direct;
  auto pd = describe(direct, e.src, weights, e.bias, e.dst, k, attr);
  if (goodInPlace(pd, typeOf(e.src) != memory::data_type::f32))
    return pd;
  pd = describe(direct, any(e.src), weights, e.bias, any(e.dst), k, attr);
  if (reference(pd))
    throw dnnl::error(dnnl_unimplemented, "only the reference kernel");
  return inner(pd);
}

/// \p epi's relus and residual add (of a tensor laid out as \p residual;
/// a sum into the output where \p sum) as oneDNN post-ops (the batch norm
/// is folded into the weights).
dnnl::primitive_attr postOps(const ConvEpilogue &epi,
                             const memory::desc &residual, bool sum) {
  dnnl::post_ops ops;
  auto relu = [&] {
#if DNNL_VERSION_MAJOR >= 3
    ops.append_eltwise(dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
#else
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
#endif
  };
  if (epi.relu)
    relu();
  if (epi.residual && sum) // in the output before the primitive runs
    ops.append_sum(1.0f);
  else if (epi.residual) // read where it lies, in the result's layout
    ops.append_binary(dnnl::algorithm::binary_add, residual);
  if (epi.reluAfter)
    relu();
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

/// Compiles the primitive of \p p into \p e (the input viewed through
/// \p rows and \p cols), as choose() says.
void build(const Prepared &p, const Window2DShape &s, const ConvEpilogue &epi,
           const DnnlDim &rows, const DnnlDim &cols, ConvEntry &e) {
  using tag = memory::format_tag;
  const WindowDim &r = s.rows, &c = s.cols;
  int64_t cin = s.g * s.ci, cout = s.g * s.co;
  e.src = activation(s.n, cin, rows.size, cols.size, r.size, c.size, s.xLast,
                     dnnlType(*p.ins[0]));
  e.srcOffset = s.xLast ? (rows.shift * c.size + cols.shift) * cin
                        : rows.shift * c.size + cols.shift;
  e.dst = activation(s.n, cout, r.out, c.out, r.out, c.out, s.yLast,
                     dnnlType(*p.outs[0]));
  memory::dims wdims = s.g > 1
                           ? memory::dims{s.g, s.co, s.ci, r.kernel, c.kernel}
                           : memory::dims{s.co, s.ci, r.kernel, c.kernel};
  // A batch norm is folded into the weights in f32; the primitive's
  // weights are of the activations' type, its bias f32 or the bias's.
  memory::data_type wt = dnnlType(*p.ins[1]);
  e.userWeights = memory::desc(wdims, epi.norm[0] ? memory::data_type::f32 : wt,
                               s.g > 1 ? tag::goihw : tag::oihw);
  memory::desc anyWeights(wdims, wt, tag::any);
  if (p.ins.size() > 2 || epi.norm[0])
    e.bias =
        memory::desc({cout},
                     epi.norm[0] || p.ins.size() < 3 ? memory::data_type::f32
                                                     : dnnlType(*p.ins[2]),
                     tag::x);
  ConvParams k{{r.stride, c.stride},
               {r.dilation - 1, c.dilation - 1},
               {rows.padL, cols.padL},
               {rows.padR, cols.padR}};
  // Winograd's kernels keep the binary add.
  e.sumResidual = epi.residual && !winogradShape(s);
  auto pd = choose(s, e, anyWeights, k, postOps(epi, e.dst, e.sumResidual));
  e.packed = memory(pd.weights_desc(), dnnlEngine());
  e.packedFrom.clear();
  e.scratchpad = pd.scratchpad_desc();
  e.primitive.emplace(pd);
}

/// The tensors \p e's packed weights and bias derive from.
llvm::SmallVector<const Tensor *, 6> packSources(const Prepared &p,
                                                 const ConvEpilogue &epi) {
  llvm::SmallVector<const Tensor *, 6> from{p.ins[1]};
  if (p.ins.size() > 2)
    from.push_back(p.ins[2]);
  if (epi.norm[0])
    from.append(std::begin(epi.norm), std::end(epi.norm));
  return from;
}

/// \p p's weights times the batch norm's per-channel factor (scale /
/// sqrt(var + epsilon), in double as the batch norm kernel computes it),
/// and the bias as the batch norm maps it, into \p e.foldedBias; 16-bit
/// weights and bias are read through f32 copies.
std::vector<float> foldNorm(const Prepared &p, const ConvEpilogue &epi,
                            ConvEntry &e) {
  Tensor wide[2];
  auto f32 = [&](const Tensor *t, int k) {
    if (t->dtype != plan::F32) {
      wide[k] = widenToF32(*t);
      t = &wide[k];
    }
    return reinterpret_cast<const float *>(t->data.data());
  };
  const float *w = f32(p.ins[1], 0),
              *cb = p.ins.size() > 2 ? f32(p.ins[2], 1) : nullptr;
  auto norm = [&](int k) {
    return reinterpret_cast<const float *>(epi.norm[k]->data.data());
  };
  const float *scale = norm(0), *shift = norm(1), *mean = norm(2),
              *var = norm(3);
  int64_t channels = epi.norm[0]->numel(), per = p.ins[1]->numel() / channels;
  std::vector<float> folded(size_t(p.ins[1]->numel()));
  e.foldedBias.assign(size_t(channels), 0.0f);
  for (int64_t o = 0; o < channels; ++o) {
    double a = double(scale[o]) / std::sqrt(double(var[o]) + epi.epsilon);
    for (int64_t i = o * per; i < (o + 1) * per; ++i)
      folded[size_t(i)] = float(double(w[i]) * a);
    double b = double(shift[o]) - double(mean[o]) * a;
    e.foldedBias[size_t(o)] = float((cb ? double(cb[o]) : 0.0) * a + b);
  }
  return folded;
}

/// Reorders \p p's weights (with \p epi's batch norm folded in) into
/// \p e's packed layout, unless they derive from resident tensors it holds
/// already.
void pack(const Prepared &p, const ConvEpilogue &epi, ConvEntry &e,
          dnnl::stream &st) {
  llvm::SmallVector<const Tensor *, 6> sources = packSources(p, epi);
  if (e.packedFrom.current(sources))
    return;
  std::vector<float> folded;
  const void *weights = sources[0]->data.data();
  if (epi.norm[0]) {
    folded = foldNorm(p, epi, e);
    weights = folded.data();
  }
  memory user(e.userWeights, dnnlEngine(), const_cast<void *>(weights));
  dnnl::reorder(user, e.packed).execute(st, user, e.packed);
  st.wait();
  e.packedFrom.packed(sources);
}

/// Runs \p e's primitive on \p p's buffers, through its inner layouts
/// where it has them, with \p epi's residual.
void execute(const Prepared &p, const ConvEpilogue &epi, ConvEntry &e,
             void *scratch, dnnl::stream &st) {
  auto buffer = [](const Tensor &t) {
    return const_cast<void *>(static_cast<const void *>(t.data.data()));
  };
  auto *x = static_cast<uint8_t *>(buffer(*p.ins[0])) +
            e.srcOffset * dtypeBytes(p.ins[0]->dtype);
  memory src(e.src, dnnlEngine(), x),
      dst(e.dst, dnnlEngine(), buffer(*p.outs[0]));
  if (e.srcInner) {
    dnnl::reorder(src, e.srcInner).execute(st, src, e.srcInner);
    src = e.srcInner;
  }
  memory out = e.dstInner ? e.dstInner : dst;
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, e.packed}, {DNNL_ARG_DST, out}};
  if (!e.foldedBias.empty())
    args.emplace(DNNL_ARG_BIAS,
                 memory(e.bias, dnnlEngine(), e.foldedBias.data()));
  else if (p.ins.size() > 2)
    args.emplace(DNNL_ARG_BIAS,
                 memory(e.bias, dnnlEngine(), buffer(*p.ins[2])));
  if (epi.residual && e.sumResidual) {
    if (e.dstInner || epi.residual->data.data() != p.outs[0]->data.data()) {
      memory residual(e.dst, dnnlEngine(), buffer(*epi.residual));
      dnnl::reorder(residual, out).execute(st, residual, out);
    }
  } else if (epi.residual) // the post-op after the relu, if any
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(epi.relu ? 1 : 0) |
                     DNNL_ARG_SRC_1,
                 memory(e.dst, dnnlEngine(), buffer(*epi.residual)));
  args.emplace(DNNL_ARG_SCRATCHPAD,
               memory(e.scratchpad, dnnlEngine(), scratch));
  e.primitive->execute(st, args);
  if (e.dstInner)
    dnnl::reorder(out, dst).execute(st, out, dst);
}
} // namespace

bool runConvDnnl(const Prepared &p, const Window2DShape &s, DnnlCache *cache,
                 const ConvEpilogue &epi, const void *key) {
  std::optional<DnnlDim> rows = dnnlDim(s.rows), cols = dnnlDim(s.cols);
  if (!rows || !cols)
    return false;
  ConvEntry local;
  ConvEntry &e =
      cache ? cache->entry<ConvEntry>(key ? key : &p.c, p.ins[0]->dtype)
            : local;
  if (e.refused)
    return false;
  try {
    useDeviceThreads();
    if (!e.primitive)
      build(p, s, epi, *rows, *cols, e);
    dnnl::stream st(dnnlEngine());
    pack(p, epi, e, st);
    Scratch scratch(cache, e.scratchpad.get_size());
    execute(p, epi, e, scratch.get(), st);
    st.wait();
  } catch (const dnnl::error &) {
    // No primitive for this convolution: nothing was written, the caller
    // runs another kernel.
    e = ConvEntry();
    e.refused = true;
    return false;
  }
  return true;
}
#else
bool runConvDnnl(const Prepared &, const Window2DShape &, DnnlCache *,
                 const ConvEpilogue &, const void *) {
  return false;
}
#endif

} // namespace pax::runtime::cpu
