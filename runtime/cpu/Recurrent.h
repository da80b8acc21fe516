//===- Recurrent.h - LSTM and GRU layers -----------------------*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_RECURRENT_H
#define PAX_RUNTIME_CPU_RECURRENT_H

#include "codegen/plan/Plan.pb.h"
#include "runtime/RecurrentMath.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace pax::runtime::cpu {

/// The cells of the recurrent kinds.
enum class RecurrentCell { Lstm, Gru };

/// The cell of a recurrent kind (`"lstm"`, `"gru"`), if it is one.
std::optional<RecurrentCell> parseRecurrentCell(llvm::StringRef kind);

/// One ONNX LSTM or GRU layer over the block of batch rows this device
/// holds: iteration dims [dir, s, b, g, h, k] as the importer writes them.
/// The sequence input, sequence lengths, initial states and the outputs are
/// read and written through their access maps, so a state held whole
/// serves a split batch; W, R, B and P (never split) are read by shape.
/// Each (direction, batch row) runs its steps in order, in parallel with
/// the others, so results do not depend on the thread count.
llvm::Error runRecurrent(const plan::Compute &c, RecurrentCell cell,
                         llvm::ArrayRef<const Tensor *> ins,
                         llvm::ArrayRef<Tensor *> outs);

/// Checks an LSTM or GRU compute (or, with \p grad, its gradient op)
/// against its tensors and describes it as plain data
/// (RecurrentMath.h), its maps compiled: what the CPU kernels and the CUDA
/// kernels both run.
llvm::Expected<recurrent::Layer>
prepareRecurrent(const plan::Compute &c, RecurrentCell cell,
                 llvm::ArrayRef<const Tensor *> ins,
                 llvm::ArrayRef<Tensor *> outs, bool grad);

/// prepareRecurrent for an `lstm`, `gru`, `lstm_grad` or `gru_grad`
/// compute, the cell and whether it is a gradient read off its kind.
llvm::Expected<recurrent::Layer>
prepareRecurrent(const plan::Compute &c, llvm::ArrayRef<const Tensor *> ins,
                 llvm::ArrayRef<Tensor *> outs);

/// The scratch doubles one row of \p l takes (its gradient op's with
/// \p grad).
inline int64_t rowScratch(const recurrent::Layer &l, bool grad) {
  return grad ? recurrent::gradScratch(l) : recurrent::forwardScratch(l);
}

/// The cell of a recurrent gradient kind (`"lstm_grad"`, `"gru_grad"`).
std::optional<RecurrentCell> parseRecurrentGradCell(llvm::StringRef kind);

/// Backpropagation through time of one LSTM or GRU layer (the op autodiff
/// builds for a layer, over the same iteration dims). Its operands are the
/// layer's, then the gradients of its results that exist (attribute
/// `grads`: bit 0 Y, 1 Y_h, 2 Y_c). It runs the layer forward again, then
/// backward, and writes per time step and gate (layout [s, dir, b, gate,
/// h]) the gradient of the gates' x-side pre-activations (W x + Wb), of
/// their h-side ones (R v + Rb) and the vectors v that R multiplied (the
/// previous state; for a GRU's candidate without linear_before_reset, the
/// reset state), then dH0 and, for an LSTM, dC0. The weights' and the
/// input's gradients are contractions of these (autodiff builds them).
llvm::Error runRecurrentGrad(const plan::Compute &c, RecurrentCell cell,
                             llvm::ArrayRef<const Tensor *> ins,
                             llvm::ArrayRef<Tensor *> outs);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_RECURRENT_H
