// RUN: paxc-opt %s --split-input-file -p pax-fold-copies | FileCheck %s
// The pass takes one option, inference=0|1; paxc's flag takes a boolean.
// RUN: not paxc-opt %s -p 'pax-fold-copies{all=1}' 2>&1 | FileCheck %s --check-prefix=OPTION
// OPTION: error: pass 'pax-fold-copies' has no option 'all'
// RUN: not paxc-opt %s -p 'pax-fold-copies{inference=2}' 2>&1 | FileCheck %s --check-prefix=ATTN-OPTION
// ATTN-OPTION: pax-fold-copies: inference=2: expected 0 or 1
// RUN: not paxc %s --fold-copies=maybe 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: fold-copies{{.*}}maybe

// Attention's heads as exporters write them: a reshape splits the hidden
// dim, a transpose moves the heads out; after attention a transpose and a
// reshape undo it. Each pair becomes one copy that reads the first one's
// input through the composed map (a group of the outer copy's dims); the
// inner copies, no longer read, are gone. A slice that takes all of its
// input is no copy at all: its reader reads the input.
// CHECK-LABEL: module @heads
// CHECK:      %0 = compute "transpose" iter [d0: 2 par, d1: 3 par, d2: 4 par, d3: 8 par]
// CHECK-NEXT:     ins(%x[d0, d1, (d2, d3)])
// CHECK-NEXT:     outs([d0, d2, d1, d3] : tensor<2x4x3x8xf32>) {name = "Transpose", perm = [0, 2, 1, 3]}
// CHECK-NEXT: %1 = compute "add" iter [d0: 2 par, d1: 4 par, d2: 3 par, d3: 8 par]
// CHECK-NEXT:     ins(%0[d0, d1, d2, d3], @mask[_, _, d2, d3])
// CHECK:      %2 = compute "reshape" iter [d0: 2 par, d1: 3 par, d2: 4 par, d3: 8 par]
// CHECK-NEXT:     ins(%1[d0, d2, d1, d3])
// CHECK-NEXT:     outs([d0, d1, (d2, d3)] : tensor<2x3x32xf32>) {name = "Reshape_1"}
// CHECK-NEXT: return %2
module @heads {
  const @mask : tensor<1x1x3x8xf32> = fill(0.5)
  func @main(%x: tensor<2x3x32xf32>) -> (y: tensor<2x3x32xf32>) {
    %0 = compute "reshape" iter [d0: 2 par, d1: 3 par, d2: 4 par, d3: 8 par]
        ins(%x[d0, d1, (d2, d3)])
        outs([d0, d1, d2, d3] : tensor<2x3x4x8xf32>) {name = "Reshape"}
    %1 = compute "transpose" iter [d0: 2 par, d1: 3 par, d2: 4 par, d3: 8 par]
        ins(%0[d0, d1, d2, d3])
        outs([d0, d2, d1, d3] : tensor<2x4x3x8xf32>) {name = "Transpose", perm = [0, 2, 1, 3]}
    %2 = compute "slice" iter [d0: 1 par, d1: 1 par, d2: 3 par, d3: 8 par]
        ins(@mask[d0, d1, d2, d3])
        outs([d0, d1, d2, d3] : tensor<1x1x3x8xf32>) {name = "Slice"}
    %3 = compute "add" iter [d0: 2 par, d1: 4 par, d2: 3 par, d3: 8 par]
        ins(%1[d0, d1, d2, d3], %2[_, _, d2, d3])
        outs([d0, d1, d2, d3] : tensor<2x4x3x8xf32>) {name = "Add"}
    %4 = compute "transpose" iter [d0: 2 par, d1: 4 par, d2: 3 par, d3: 8 par]
        ins(%3[d0, d1, d2, d3])
        outs([d0, d2, d1, d3] : tensor<2x3x4x8xf32>) {name = "Transpose_1", perm = [0, 2, 1, 3]}
    %5 = compute "reshape" iter [d0: 2 par, d1: 3 par, d2: 4 par, d3: 8 par]
        ins(%4[d0, d1, d2, d3])
        outs([d0, d1, (d2, d3)] : tensor<2x3x32xf32>) {name = "Reshape_1"}
    return %5
  }
}

// -----

// Left as they are: a pad reading a transpose (a padded index regrouped
// could land inside the input), a slice of a reshape that takes part of a
// grouped dim (the group's members must be plain dims of the same
// extents), a non-copy reading a copy, and a copy that is returned.
// CHECK-LABEL: module @kept
// CHECK: compute "transpose"
// CHECK: compute "pad"
// CHECK-NEXT: ins(%0[d0 - 1, d1])
// CHECK: compute "reshape"
// CHECK: compute "slice"
// CHECK-NEXT: ins(%2[d0, d1 + 1, d2])
// CHECK: compute "transpose"
// CHECK: compute "relu"
// CHECK-NEXT: ins(%4[d0, d1])
// CHECK: compute "slice"
// CHECK-NEXT: ins(%x[d0, d1])
// CHECK: return %1, %3, %5, %6
module @kept {
  func @main(%x: tensor<4x6xf32>) -> (p: tensor<8x4xf32>, s: tensor<4x1x3xf32>, r: tensor<6x4xf32>, i: tensor<4x6xf32>) {
    %0 = compute "transpose" iter [d0: 4 par, d1: 6 par]
        ins(%x[d0, d1])
        outs([d1, d0] : tensor<6x4xf32>) {name = "t", perm = [1, 0]}
    %1 = compute "pad" iter [d0: 8 par, d1: 4 par]
        ins(%0[d0 - 1, d1])
        outs([d0, d1] : tensor<8x4xf32>) {name = "p"}
    %2 = compute "reshape" iter [d0: 4 par, d1: 2 par, d2: 3 par]
        ins(%x[d0, (d1, d2)])
        outs([d0, d1, d2] : tensor<4x2x3xf32>) {name = "r"}
    %3 = compute "slice" iter [d0: 4 par, d1: 1 par, d2: 3 par]
        ins(%2[d0, d1 + 1, d2])
        outs([d0, d1, d2] : tensor<4x1x3xf32>) {name = "s"}
    %4 = compute "transpose" iter [d0: 4 par, d1: 6 par]
        ins(%x[d0, d1])
        outs([d1, d0] : tensor<6x4xf32>) {name = "t2", perm = [1, 0]}
    %5 = compute "relu" iter [d0: 6 par, d1: 4 par]
        ins(%4[d0, d1])
        outs([d0, d1] : tensor<6x4xf32>) {name = "relu"}
    %6 = compute "slice" iter [d0: 4 par, d1: 6 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<4x6xf32>) {name = "whole"}
    return %1, %3, %5, %6
  }
}

// -----

// A copy with two readers stays, and its copy reader reads it: the value
// would otherwise be read in two layouts.
// CHECK-LABEL: module @shared
// CHECK:      %0 = compute "transpose"
// CHECK:      compute "reshape"
// CHECK-NEXT:     ins(%0[(d0, d1), d2])
// CHECK:      compute "relu"
// CHECK-NEXT:     ins(%0[d0, d1])
module @shared {
  func @main(%x: tensor<4x6xf32>) -> (r: tensor<2x3x4xf32>, y: tensor<6x4xf32>) {
    %0 = compute "transpose" iter [d0: 4 par, d1: 6 par]
        ins(%x[d0, d1])
        outs([d1, d0] : tensor<6x4xf32>) {name = "t", perm = [1, 0]}
    %1 = compute "reshape" iter [d0: 2 par, d1: 3 par, d2: 4 par]
        ins(%0[(d0, d1), d2])
        outs([d0, d1, d2] : tensor<2x3x4xf32>) {name = "r"}
    %2 = compute "relu" iter [d0: 6 par, d1: 4 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<6x4xf32>) {name = "relu"}
    return %1, %2
  }
}
