// RUN: paxc-opt %s --split-input-file -p pax-channels-last | FileCheck %s
// RUN: not paxc-opt %s -p 'pax-channels-last{all=1}' 2>&1 | FileCheck %s --check-prefix=OPTION
// OPTION: error: pass 'pax-channels-last' has no option 'all'
// paxc's flag takes a boolean.
// RUN: not paxc %s --channels-last=maybe 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: --channels-last option: 'maybe' is invalid value for boolean argument

// The activations around the convolutions are stored [n, h, w, c]: the
// first convolution reads the NCHW argument and writes NHWC; batch norm and
// relu walk [n, h, w, c] (their maps plain again); the pool and the 1x1
// convolution read and write NHWC. The returned residual sum and pooled
// features keep the model's layout: the ops that write them read NHWC.
// Weights are never permuted.

// CHECK-LABEL: module @net
// CHECK:       func @main(%x: tensor<2x3x8x8xf32>) -> (y: tensor<2x8x4x4xf32>, z: tensor<2x8x1x1xf32>)
// CHECK:         compute "conv" iter [n: 2 par, co: 8 par, oh: 8 par, ow: 8 par, ci: 3 red, kh: 3 red, kw: 3 red]
// CHECK-NEXT:        ins(%x[n, ci, oh + kh - 1, ow + kw - 1], @w1[co, ci, kh, kw])
// CHECK-NEXT:        outs([n, oh, ow, co] : tensor<2x8x8x8xf32>) {group = 1, name = "conv1"}
// CHECK-NEXT:    compute "batch_norm" iter [d0: 2 par, d2: 8 par, d3: 8 par, d1: 8 par]
// CHECK-NEXT:        ins(%0[d0, d2, d3, d1], @s[d1], @s[d1], @s[d1], @s[d1])
// CHECK-NEXT:        outs([d0, d2, d3, d1] : tensor<2x8x8x8xf32>)
// CHECK-NEXT:    compute "relu" iter [d0: 2 par, d2: 8 par, d3: 8 par, d1: 8 par]
// CHECK-NEXT:        ins(%1[d0, d2, d3, d1])
// CHECK-NEXT:        outs([d0, d2, d3, d1] : tensor<2x8x8x8xf32>)
// CHECK-NEXT:    compute "max_pool" iter [n: 2 par, c: 8 par, oh: 4 par, ow: 4 par, kh: 2 red, kw: 2 red]
// CHECK-NEXT:        ins(%2[n, 2*oh + kh, 2*ow + kw, c])
// CHECK-NEXT:        outs([n, oh, ow, c] : tensor<2x4x4x8xf32>)
// CHECK-NEXT:    compute "conv"
// CHECK-NEXT:        ins(%3[n, oh + kh, ow + kw, ci], @w2[co, ci, kh, kw])
// CHECK-NEXT:        outs([n, oh, ow, co] : tensor<2x4x4x8xf32>)
// CHECK-NEXT:    compute "add" iter [d0: 2 par, d1: 8 par, d2: 4 par, d3: 4 par]
// CHECK-NEXT:        ins(%4[d0, d2, d3, d1], %3[d0, d2, d3, d1])
// CHECK-NEXT:        outs([d0, d1, d2, d3] : tensor<2x8x4x4xf32>)
// CHECK-NEXT:    compute "average_pool"
// CHECK-NEXT:        ins(%4[n, oh + kh, ow + kw, c])
// CHECK-NEXT:        outs([n, c, oh, ow] : tensor<2x8x1x1xf32>)
module @net {
  param @w1 : tensor<8x3x3x3xf32> = fill(0.1)
  param @s : tensor<8xf32> = fill(1.0)
  param @w2 : tensor<8x8x1x1xf32> = fill(0.1)
  func @main(%x: tensor<2x3x8x8xf32>) -> (y: tensor<2x8x4x4xf32>, z: tensor<2x8x1x1xf32>) {
    %0 = compute "conv" iter [n: 2 par, co: 8 par, oh: 8 par, ow: 8 par, ci: 3 red, kh: 3 red, kw: 3 red]
        ins(%x[n, ci, oh + kh - 1, ow + kw - 1], @w1[co, ci, kh, kw])
        outs([n, co, oh, ow] : tensor<2x8x8x8xf32>) {group = 1, name = "conv1"}
    %1 = compute "batch_norm" iter [d0: 2 par, d1: 8 par, d2: 8 par, d3: 8 par]
        ins(%0[d0, d1, d2, d3], @s[d1], @s[d1], @s[d1], @s[d1])
        outs([d0, d1, d2, d3] : tensor<2x8x8x8xf32>) {epsilon = 1.0e-05, name = "bn"}
    %2 = compute "relu" iter [d0: 2 par, d1: 8 par, d2: 8 par, d3: 8 par]
        ins(%1[d0, d1, d2, d3])
        outs([d0, d1, d2, d3] : tensor<2x8x8x8xf32>) {name = "relu"}
    %3 = compute "max_pool" iter [n: 2 par, c: 8 par, oh: 4 par, ow: 4 par, kh: 2 red, kw: 2 red]
        ins(%2[n, c, 2*oh + kh, 2*ow + kw])
        outs([n, c, oh, ow] : tensor<2x8x4x4xf32>) {name = "pool", pads = [0, 0, 0, 0]}
    %4 = compute "conv" iter [n: 2 par, co: 8 par, oh: 4 par, ow: 4 par, ci: 8 red, kh: 1 red, kw: 1 red]
        ins(%3[n, ci, oh + kh, ow + kw], @w2[co, ci, kh, kw])
        outs([n, co, oh, ow] : tensor<2x8x4x4xf32>) {group = 1, name = "conv2"}
    %5 = compute "add" iter [d0: 2 par, d1: 8 par, d2: 4 par, d3: 4 par]
        ins(%4[d0, d1, d2, d3], %3[d0, d1, d2, d3])
        outs([d0, d1, d2, d3] : tensor<2x8x4x4xf32>) {name = "residual"}
    %6 = compute "average_pool" iter [n: 2 par, c: 8 par, oh: 1 par, ow: 1 par, kh: 4 red, kw: 4 red]
        ins(%4[n, c, oh + kh, ow + kw])
        outs([n, c, oh, ow] : tensor<2x8x1x1xf32>) {count_include_pad = 0, name = "gap", pads = [0, 0, 0, 0]}
    return %5, %6
  }
}

// -----

// An activation that some op reads through a map that is not indices alone
// (an average pool counting padding names trailing dims in `pads`; a whole-
// dim `*` read) keeps its layout, and so do the values only it joined. A
// model without 2-D convolutions is left as it is.

// CHECK-LABEL: module @kept
// CHECK:         outs([n, co, oh, ow] : tensor<1x4x6x6xf32>) {group = 1, name = "conv"}
// CHECK:         ins(%0[n, c, oh + kh - 1, ow + kw - 1])
// CHECK:         ins(%0[d0, *, d2, d3])
module @kept {
  param @w : tensor<4x4x3x3xf32> = fill(0.1)
  func @main(%x: tensor<1x4x6x6xf32>) -> (y: tensor<1x4x6x6xf32>, z: tensor<1x1x6x6xf32>) {
    %0 = compute "conv" iter [n: 1 par, co: 4 par, oh: 6 par, ow: 6 par, ci: 4 red, kh: 3 red, kw: 3 red]
        ins(%x[n, ci, oh + kh - 1, ow + kw - 1], @w[co, ci, kh, kw])
        outs([n, co, oh, ow] : tensor<1x4x6x6xf32>) {group = 1, name = "conv"}
    %1 = compute "average_pool" iter [n: 1 par, c: 4 par, oh: 6 par, ow: 6 par, kh: 3 red, kw: 3 red]
        ins(%0[n, c, oh + kh - 1, ow + kw - 1])
        outs([n, c, oh, ow] : tensor<1x4x6x6xf32>) {count_include_pad = 1, name = "pool", pads = [1, 1, 1, 1]}
    %2 = compute "reduce_sum" iter [d0: 1 par, d2: 6 par, d3: 6 par]
        ins(%0[d0, *, d2, d3])
        outs([d0, _, d2, d3] : tensor<1x1x6x6xf32>) {name = "sum"}
    return %1, %2
  }
}

// -----

// CHECK-LABEL: module @dense
// CHECK:         outs([d0, d1] : tensor<2x3xf32>)
module @dense {
  func @main(%x: tensor<2x3xf32>) -> (y: tensor<2x3xf32>) {
    %0 = compute "relu" iter [d0: 2 par, d1: 3 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<2x3xf32>) {name = "relu"}
    return %0
  }
}
