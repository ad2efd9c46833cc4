// Kernel interface of the recurrent layer ops (ops/rnn.cpp; CPU kernels in
// backends/cpu/kernels/rnn_kernels.cpp). One call runs one layer in one
// direction over the whole sequence.
//
// Every tensor is contiguous and in the compute dtype (float or double). The
// input has N rows: T steps of batch_sizes[t] rows each, step t starting at row
// offsets[t] (a padded (T, B, I) input is the case batch_sizes[t] == B). The
// batch sizes never increase, so the rows active at a step are always a prefix
// of the B state rows: a row that has finished keeps its state (which is its
// final state), and in reverse direction a row that has not started yet still
// holds its initial state. That makes packed sequences cost nothing extra.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/stub.h"

namespace strata::nn {

enum class RnnCell : int { Tanh = 0, Relu = 1, Lstm = 2, Gru = 3 };

// Gates per cell (rows of w_ih are gates * hidden).
constexpr int64_t rnn_gates(RnnCell c) { return c == RnnCell::Lstm ? 4 : c == RnnCell::Gru ? 3 : 1; }

// Columns of one workspace row. LSTM: the activated gates i, f, g, o (4H), the
// cell state after the step (H) and, with a projection, o * tanh(c) before it
// (H). GRU: r, z, n (3H) and w_hn h + b_hn (H). Tanh/ReLU: none (the output is
// all their backward needs).
constexpr int64_t rnn_workspace_cols(RnnCell c, int64_t hidden, bool proj) {
  return c == RnnCell::Lstm ? (proj ? 6 : 5) * hidden : c == RnnCell::Gru ? 4 * hidden : 0;
}

struct RnnGeom {
  RnnCell cell = RnnCell::Tanh;
  int64_t steps = 0, batch = 0, rows = 0;  // T, B (state rows), N (input rows)
  int64_t in = 0, hidden = 0, out = 0;     // I, H, H_out (the projection size, or H)
  bool reverse = false, proj = false;
  const int64_t* batch_sizes = nullptr;    // steps entries
  const int64_t* offsets = nullptr;        // steps entries
};

// Forward. b_ih/b_hh/w_hr/cx may be undefined. Writes out (N x H_out), hy
// (B x H_out), cy (B x H, LSTM) and ws (N x rnn_workspace_cols).
struct RnnForwardArgs {
  Tensor x, hx, cx, w_ih, w_hh, b_ih, b_hh, w_hr;
  Tensor out, hy, cy, ws;
};
// Backward: the gradients of the forward's input, hx, cx and weights given the
// gradients of its out, hy (and cy). db_ih/db_hh/dw_hr may be undefined (not
// wanted); the rest are written entirely.
struct RnnBackwardArgs {
  Tensor gout, ghy, gcy, x, hx, cx, w_ih, w_hh, w_hr, out, ws;
  Tensor dx, dhx, dcx, dw_ih, dw_hh, db_ih, db_hh, dw_hr;
};

using RnnForwardFn = void (*)(const RnnGeom& g, const RnnForwardArgs& a);
using RnnBackwardFn = void (*)(const RnnGeom& g, const RnnBackwardArgs& a);

}  // namespace strata::nn

namespace strata {
STRATA_DECLARE_STUB(rnn_forward_stub, nn::RnnForwardFn);
STRATA_DECLARE_STUB(rnn_backward_stub, nn::RnnBackwardFn);
}  // namespace strata
