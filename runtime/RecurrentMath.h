//===- RecurrentMath.h - LSTM and GRU rows, host and device ----*- C++ -*-===//
//
// One (direction, batch row) of an ONNX LSTM or GRU layer, walked step by
// step, forward (forwardRow) and backpropagated through time (gradRow):
// the one definition the CPU kernels (a TBB task per row) and the CUDA
// kernels (a thread per row) both run. The layer is plain data: the
// tensors W, R, B and P read by shape, the others through flat access maps
// over the iteration dims [dir, s, b, g, h, k]. Each row works in a
// scratch block of doubles its caller gives it (forwardScratch /
// gradScratch long).
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_RECURRENTMATH_H
#define PAX_RUNTIME_RECURRENTMATH_H

#include "runtime/Elements.h"
#include "runtime/FlatMaps.h"

#include <cmath>
#include <cstdint>

namespace pax::runtime::recurrent {

/// The iteration dims of a recurrent op, in the importer's order.
enum Dim : int32_t { D, S, B, G, H, K, NumDims };

/// A tensor read or written through a map (unused when data is null).
struct Operand {
  const uint8_t *data = nullptr;
  int32_t type = 0;
  flat::Map map;
};

/// A tensor read by shape (unused when data is null).
struct Dense {
  const uint8_t *data = nullptr;
  int32_t type = 0;
  PAX_HD double at(int64_t i) const {
    return elements::readReal(data, type, i);
  }
};

/// A layer (or its gradient op) on one device's block of batch rows.
struct Layer {
  bool lstm = true, reverse = false, linearBeforeReset = false;
  int64_t dirs = 0, hs = 0, in = 0, gates = 0, steps = 0, batch = 0;
  Dense w, r, bias, peep;
  Operand x, lens, h0, c0;
  /// The gradient op's result gradients: Y, Y_h, Y_c.
  Operand grad[3];
  /// The results: Y, Y_h[, Y_c]; for the gradient op the x-side and h-side
  /// gate gradients, the vectors R multiplied, dH0[, dC0].
  int32_t outputs = 0;
  uint8_t *out[5] = {};
  int32_t outType[5] = {};
  flat::Map outMap[5];
};

PAX_HD inline double sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

/// Doubles of scratch one row of the forward layer takes.
PAX_HD inline int64_t forwardScratch(const Layer &l) {
  int64_t gh = l.gates * l.hs;
  return 6 * l.hs + 2 * gh + l.in;
}

/// One row walked step by step: the state (h, and an LSTM's c) after each
/// step.
struct Walk {
  const Layer &l;
  int64_t d, b, len, hs, in, gh;
  bool back;
  int64_t point[NumDims] = {};
  double *h, *state, *xg, *hg, *xt, *rh, *z, *rg;

  /// Takes forwardScratch(l) doubles at \p scratch.
  PAX_HD Walk(const Layer &l, int64_t d, int64_t b, double *scratch)
      : l(l), d(d), b(b), hs(l.hs), in(l.in), gh(l.gates * l.hs),
        back(l.reverse || d == 1) {
    h = scratch, state = h + hs, xg = state + hs, hg = xg + gh;
    xt = hg + gh, rh = xt + in, z = rh + hs, rg = z + hs;
    point[D] = d, point[B] = b;
    len = l.steps;
    if (l.lens.data) {
      int64_t v = elements::readInteger(l.lens.data, l.lens.type,
                                        at(l.lens.map, 0, 0, 0));
      len = v < 0 ? 0 : (v > l.steps ? l.steps : v);
    }
    for (int64_t j = 0; j < hs; ++j) {
      h[j] = l.h0.data ? elements::readReal(l.h0.data, l.h0.type,
                                            at(l.h0.map, 0, 0, j))
                       : 0.0;
      state[j] = l.c0.data ? elements::readReal(l.c0.data, l.c0.type,
                                                at(l.c0.map, 0, 0, j))
                           : 0.0;
    }
  }

  /// The index of \p m at time \p s, gate \p g, hidden unit \p j.
  PAX_HD int64_t at(const flat::Map &m, int64_t s, int64_t g, int64_t j) {
    point[S] = s, point[G] = g, point[H] = j, point[K] = 0;
    return flat::index(m, point);
  }
  /// The time position of processing step \p step.
  PAX_HD int64_t time(int64_t step) const {
    return back ? len - 1 - step : step;
  }
  PAX_HD double bias(int64_t which, int64_t g) const {
    return l.bias.data ? l.bias.at((d * 2 + which) * gh + g) : 0.0;
  }
  /// Row \p row, column \p k of this direction's R.
  PAX_HD double r(int64_t row, int64_t k) const {
    return l.r.at((d * gh + row) * hs + k);
  }
  /// hg[g] = R v + Rb for gate rows [g0, g1).
  PAX_HD void recur(int64_t g0, int64_t g1, const double *v) {
    for (int64_t g = g0; g < g1; ++g) {
      double acc = 0;
      for (int64_t k = 0; k < hs; ++k)
        acc += r(g, k) * v[k];
      hg[g] = acc + bias(1, g);
    }
  }

  /// Runs processing step \p step, updating h and state. With \p act, also
  /// writes the gates after their activations (gh values; an LSTM's i, o,
  /// f, c; a GRU's z, r, h) and, with \p hn, a GRU's R_h h + Rb_h.
  PAX_HD void step(int64_t step, double *act = nullptr, double *hn = nullptr) {
    int64_t t = time(step);
    for (int64_t k = 0; k < in; ++k) {
      point[S] = t, point[G] = 0, point[H] = 0, point[K] = k;
      xt[k] =
          elements::readReal(l.x.data, l.x.type, flat::index(l.x.map, point));
    }
    for (int64_t g = 0; g < gh; ++g) {
      double acc = 0;
      int64_t row = (d * gh + g) * in;
      for (int64_t k = 0; k < in; ++k)
        acc += l.w.at(row + k) * xt[k];
      xg[g] = acc + bias(0, g);
    }
    if (l.lstm) {
      // Gates i, o, f, c; peepholes i, o, f.
      recur(0, gh, h);
      for (int64_t j = 0; j < hs; ++j) {
        double p0 = l.peep.data ? l.peep.at((d * 3 + 0) * hs + j) : 0.0;
        double p1 = l.peep.data ? l.peep.at((d * 3 + 1) * hs + j) : 0.0;
        double p2 = l.peep.data ? l.peep.at((d * 3 + 2) * hs + j) : 0.0;
        double ig = sigmoid(xg[j] + hg[j] + p0 * state[j]);
        double fg = sigmoid(xg[2 * hs + j] + hg[2 * hs + j] + p2 * state[j]);
        double cg = tanh(xg[3 * hs + j] + hg[3 * hs + j]);
        state[j] = fg * state[j] + ig * cg;
        double og = sigmoid(xg[hs + j] + hg[hs + j] + p1 * state[j]);
        h[j] = og * tanh(state[j]);
        if (act)
          act[j] = ig, act[hs + j] = og, act[2 * hs + j] = fg,
          act[3 * hs + j] = cg;
      }
      return;
    }
    // Gates z, r, h. With linear_before_reset the reset gate scales
    // R_h h + Rb_h; without, it scales h before R_h.
    bool lbr = l.linearBeforeReset;
    recur(0, (lbr ? 3 : 2) * hs, h);
    for (int64_t j = 0; j < hs; ++j) {
      z[j] = sigmoid(xg[j] + hg[j]);
      rg[j] = sigmoid(xg[hs + j] + hg[hs + j]);
      rh[j] = rg[j] * h[j];
    }
    if (!lbr)
      recur(2 * hs, 3 * hs, rh);
    for (int64_t j = 0; j < hs; ++j) {
      double cand = lbr ? tanh(xg[2 * hs + j] + rg[j] * hg[2 * hs + j])
                        : tanh(xg[2 * hs + j] + hg[2 * hs + j]);
      if (act)
        act[j] = z[j], act[hs + j] = rg[j], act[2 * hs + j] = cand;
      if (hn)
        hn[j] = hg[2 * hs + j];
      h[j] = (1 - z[j]) * cand + z[j] * h[j];
    }
  }

  /// Stores \p v at output \p o's map at (time \p s, gate \p g, unit \p j).
  PAX_HD void put(int o, int64_t s, int64_t g, int64_t j, double v) {
    int64_t i = at(l.outMap[o], s, g, j);
    if (i >= 0)
      elements::writeReal(l.out[o], l.outType[o], i, v);
  }
  /// Operand \p op at (time \p s, unit \p j), 0 where absent.
  PAX_HD double read(const Operand &op, int64_t s, int64_t j) {
    if (!op.data)
      return 0.0;
    int64_t i = at(op.map, s, 0, j);
    return i >= 0 ? elements::readReal(op.data, op.type, i) : 0.0;
  }
};

/// Runs row (\p d, \p b) of the forward layer: Y at every time step (zero
/// past the row's length), then Y_h and an LSTM's Y_c.
PAX_HD inline void forwardRow(const Layer &l, int64_t d, int64_t b,
                              double *scratch) {
  Walk w(l, d, b, scratch);
  for (int64_t step = 0; step < l.steps; ++step) {
    if (step >= w.len) {
      for (int64_t j = 0; j < l.hs; ++j)
        w.put(0, step, 0, j, 0.0);
      continue;
    }
    w.step(step);
    for (int64_t j = 0; j < l.hs; ++j)
      w.put(0, w.time(step), 0, j, w.h[j]);
  }
  for (int64_t j = 0; j < l.hs; ++j) {
    if (l.outputs > 1)
      w.put(1, 0, 0, j, w.h[j]);
    if (l.outputs > 2)
      w.put(2, 0, 0, j, w.state[j]);
  }
}

/// Doubles of scratch one row of the gradient op takes.
PAX_HD inline int64_t gradScratch(const Layer &l) {
  int64_t gh = l.gates * l.hs, n = l.steps > 1 ? l.steps : 1;
  return forwardScratch(l) + n * (4 * l.hs + gh) + 4 * l.hs + 2 * gh;
}

/// The gradient op's buffers in one row's scratch, after the forward
/// walk's: per step, the previous h and state, the state after, the gates
/// after their activations and a GRU's R_h h + Rb_h; then the backward
/// pass's vectors.
struct GradBuffers {
  double *hPrev, *cPrev, *cNow, *act, *hn;
  double *dh, *dc, *dx, *dhGate, *dPrev, *drh;

  /// Lays the buffers of a row of \p len steps out in \p scratch
  /// (gradScratch(l) doubles).
  PAX_HD GradBuffers(const Layer &l, int64_t len, double *scratch) {
    int64_t hs = l.hs, gh = l.gates * l.hs;
    int64_t n = len > 1 ? len : 1;
    hPrev = scratch + forwardScratch(l), cPrev = hPrev + n * hs;
    cNow = cPrev + n * hs, act = cNow + n * hs, hn = act + n * gh;
    dh = hn + n * hs, dc = dh + hs, dx = dc + hs, dhGate = dx + gh;
    dPrev = dhGate + gh, drh = dPrev + hs;
  }
};

/// Zeroes the gradient op's per-step results at the time steps past the
/// row's length, where no step runs.
PAX_HD inline void zeroUnrunSteps(Walk &w) {
  const Layer &l = w.l;
  int64_t hs = l.hs, gs = l.gates;
  for (int64_t t = w.len; t < l.steps; ++t)
    for (int64_t g = 0; g < gs; ++g)
      for (int64_t j = 0; j < hs; ++j)
        for (int o = 0; o < 3; ++o)
          w.put(o, t, g, j, 0.0);
}

/// Runs the row's steps forward again, keeping per step the previous h and
/// state, the gates after their activations, a GRU's R_h h + Rb_h and the
/// state after.
PAX_HD inline void replayForward(Walk &w, const GradBuffers &buf) {
  int64_t hs = w.hs, gh = w.gh, len = w.len;
  double *hPrev = buf.hPrev, *cPrev = buf.cPrev, *cNow = buf.cNow;
  for (int64_t step = 0; step < len; ++step) {
    for (int64_t j = 0; j < hs; ++j) {
      hPrev[step * hs + j] = w.h[j];
      cPrev[step * hs + j] = w.state[j];
    }
    w.step(step, buf.act + step * gh, buf.hn + step * hs);
    for (int64_t j = 0; j < hs; ++j)
      cNow[step * hs + j] = w.state[j];
  }
}

/// Adds the gradients of Y_h and Y_c (zero where absent) to \p dh and
/// \p dc.
PAX_HD inline void addFinalGrads(Walk &w, double *dh, double *dc) {
  const Layer &l = w.l;
  int64_t hs = w.hs;
  for (int64_t j = 0; j < hs; ++j) {
    dh[j] += w.read(l.grad[1], 0, j);
    dc[j] += w.read(l.grad[2], 0, j);
  }
}

/// Adds R^T v over gate rows [g0, g1) to \p out: the gradient those rows
/// hand back to the vector R multiplied.
PAX_HD inline void addRTransposed(const Walk &w, int64_t g0, int64_t g1,
                                  const double *v, double *out) {
  int64_t hs = w.hs;
  for (int64_t g = g0; g < g1; ++g)
    for (int64_t k = 0; k < hs; ++k)
      out[k] += w.r(g, k) * v[g];
}

/// Backpropagates LSTM step \p step: the gates' gradients into dx and
/// dhGate, the previous state's into dc and the previous h's into dPrev.
PAX_HD inline void lstmStepGrad(const Walk &w, const GradBuffers &buf,
                                int64_t step) {
  int64_t hs = w.hs, gh = w.gh;
  const double *a = buf.act + step * gh;
  const double *cPrev = buf.cPrev, *cNow = buf.cNow, *dh = buf.dh;
  double *dc = buf.dc, *dx = buf.dx, *dhGate = buf.dhGate;
  for (int64_t j = 0; j < hs; ++j) {
    double ig = a[j], og = a[hs + j], fg = a[2 * hs + j], cg = a[3 * hs + j];
    double tc = tanh(cNow[step * hs + j]);
    double dct = dc[j] + dh[j] * og * (1 - tc * tc);
    dx[0 * hs + j] = dct * cg * ig * (1 - ig);
    dx[1 * hs + j] = dh[j] * tc * og * (1 - og);
    dx[2 * hs + j] = dct * cPrev[step * hs + j] * fg * (1 - fg);
    dx[3 * hs + j] = dct * ig * (1 - cg * cg);
    dc[j] = dct * fg;
  }
  for (int64_t g = 0; g < gh; ++g)
    dhGate[g] = dx[g];
  addRTransposed(w, 0, gh, dhGate, buf.dPrev);
}

/// Backpropagates GRU step \p step: the gates' gradients into dx and
/// dhGate and the previous h's into dPrev.
PAX_HD inline void gruStepGrad(const Walk &w, const GradBuffers &buf,
                               int64_t step) {
  bool lbr = w.l.linearBeforeReset;
  int64_t hs = w.hs;
  const double *a = buf.act + step * w.gh;
  const double *hp = buf.hPrev + step * hs, *hn = buf.hn, *dh = buf.dh;
  double *dx = buf.dx, *dhGate = buf.dhGate, *dPrev = buf.dPrev;
  double *drh = buf.drh;
  for (int64_t j = 0; j < hs; ++j) {
    double zz = a[j], nn = a[2 * hs + j];
    double dn = dh[j] * (1 - zz) * (1 - nn * nn);
    dx[j] = dh[j] * (hp[j] - nn) * zz * (1 - zz);
    dx[2 * hs + j] = dn;
    dhGate[j] = dx[j];
    dhGate[2 * hs + j] = lbr ? dn * a[hs + j] : dn;
    dPrev[j] = dh[j] * zz;
  }
  // The reset gate: through r h (or r (R_h h + Rb_h)).
  if (!lbr) {
    for (int64_t j = 0; j < hs; ++j)
      drh[j] = 0;
    addRTransposed(w, 2 * hs, 3 * hs, dhGate, drh);
  }
  for (int64_t j = 0; j < hs; ++j) {
    double rr = a[hs + j];
    double dr = lbr ? dx[2 * hs + j] * hn[step * hs + j] : drh[j] * hp[j];
    dx[hs + j] = dr * rr * (1 - rr);
    dhGate[hs + j] = dx[hs + j];
    if (!lbr)
      dPrev[j] += drh[j] * rr;
  }
  int64_t rows = lbr ? 3 * hs : 2 * hs;
  addRTransposed(w, 0, rows, dhGate, dPrev);
}

/// Writes step \p step's gate gradients (x side and h side) and the vectors
/// R multiplied at time \p t.
PAX_HD inline void putStepGrads(Walk &w, const GradBuffers &buf, int64_t step,
                                int64_t t) {
  bool lstm = w.l.lstm, lbr = w.l.linearBeforeReset;
  int64_t hs = w.hs, gs = w.l.gates;
  const double *a = buf.act + step * w.gh;
  const double *hp = buf.hPrev + step * hs;
  const double *dx = buf.dx, *dhGate = buf.dhGate;
  for (int64_t g = 0; g < gs; ++g)
    for (int64_t j = 0; j < hs; ++j) {
      w.put(0, t, g, j, dx[g * hs + j]);
      w.put(1, t, g, j, dhGate[g * hs + j]);
      double v = !lstm && !lbr && g == 2 ? a[hs + j] * hp[j] : hp[j];
      w.put(2, t, g, j, v);
    }
}

/// Runs processing step \p step backward: adds the step's result gradients
/// to dh (and, on the last step, the final state's), backpropagates the
/// cell, writes the step's results and leaves the previous h's gradient in
/// dh.
PAX_HD inline void backwardStep(Walk &w, const GradBuffers &buf, int64_t step) {
  const Layer &l = w.l;
  int64_t hs = w.hs, t = w.time(step);
  double *dh = buf.dh, *dPrev = buf.dPrev;
  if (l.grad[0].data)
    for (int64_t j = 0; j < hs; ++j)
      dh[j] += w.read(l.grad[0], t, j);
  if (step == w.len - 1)
    addFinalGrads(w, dh, buf.dc);
  for (int64_t j = 0; j < hs; ++j)
    dPrev[j] = 0;
  if (l.lstm)
    lstmStepGrad(w, buf, step);
  else
    gruStepGrad(w, buf, step);
  // The step's gate gradients and the vectors R multiplied.
  putStepGrads(w, buf, step, t);
  for (int64_t j = 0; j < hs; ++j)
    dh[j] = dPrev[j];
}

/// Writes dH0 and an LSTM's dC0 from what the backward pass leaves in dh
/// and dc.
PAX_HD inline void putStateGrads(Walk &w, const GradBuffers &buf) {
  int64_t hs = w.hs;
  bool lstm = w.l.lstm;
  for (int64_t j = 0; j < hs; ++j) {
    w.put(3, 0, 0, j, buf.dh[j]);
    if (lstm)
      w.put(4, 0, 0, j, buf.dc[j]);
  }
}

/// Runs row (\p d, \p b) of the gradient op: the forward pass again,
/// keeping per step the previous state, the gates after their activations
/// and a GRU's R_h h + Rb_h, then backward through time. Writes per time
/// step and gate the gradients of the gates' x-side and h-side
/// pre-activations and the vectors R multiplied, then dH0 and an LSTM's
/// dC0.
PAX_HD inline void gradRow(const Layer &l, int64_t d, int64_t b,
                           double *scratch) {
  Walk w(l, d, b, scratch);
  // Zero where no step runs.
  zeroUnrunSteps(w);
  GradBuffers buf(l, w.len, scratch);
  replayForward(w, buf);
  // Backward through time: dh and dc carry the gradient of the state each
  // step hands to the next.
  for (int64_t j = 0; j < l.hs; ++j)
    buf.dh[j] = 0, buf.dc[j] = 0;
  if (w.len == 0)
    addFinalGrads(w, buf.dh, buf.dc);
  for (int64_t step = w.len - 1; step >= 0; --step)
    backwardStep(w, buf, step);
  putStateGrads(w, buf);
}

} // namespace pax::runtime::recurrent

#endif // PAX_RUNTIME_RECURRENTMATH_H
