// RUN: paxc-opt %s --split-input-file -p pax-fuse-kernels | FileCheck %s
// RUN: paxc-opt %s --split-input-file -p pax-fuse-kernels | paxc-opt - --split-input-file | FileCheck %s
// RUN: paxc-opt %s --split-input-file -p "pax-fuse-kernels{remarks=1}" | FileCheck %s --check-prefix=WHY
// RUN: not paxc-opt %s --split-input-file -p "pax-fuse-kernels{remarks=2}" 2>&1 | FileCheck %s --check-prefix=BADOPT
// BADOPT: error: pax-fuse-kernels: remarks=2: expected 0 or 1
//
// remarks=1 says why each kernel ends:
// WHY: fuse-kernels: matmul does not join the kernel of transpose: a kernel computes no matmul op
// WHY: fuse-kernels: neg does not join the kernel of matmul: it reads operand 0 through another map
// WHY: fuse-kernels: relu does not join the kernel of matmul: operand 0 holds partial sums (a split reduction)
// WHY: fuse-kernels: sqrt does not join the kernel of exp: it splits operand 0's dims otherwise
// WHY: fuse-kernels: batch_norm does not join the kernel of add: it reduces dims its results do not end with
// WHY: fuse-kernels: reduce_sum does not join the kernel of reduce_mean: it reduces dims its operands do not end with
// WHY: fuse-kernels: neg does not join the kernel of reshape: it regroups operand 0's split dims

// pax-fuse-kernels: runs of ops one kernel computes point by point or row
// by row become `fused` regions (the second RUN reads them back). GELU's
// tanh form: x comes from a reshape that reads its input through a grouped
// map but writes plain dims, so it joins; x's three readers are all in the
// kernel; 0.5 * x is a sibling (the same space, read by the last op).
// CHECK-LABEL: module @gelu
// CHECK:      fused "k0" {
// CHECK-NEXT:   %0 = compute "reshape"
// CHECK-NOT:  {{^ +[}]$|fused}}
// CHECK:        %8 = compute "mul"
// CHECK-NEXT:       ins(%1[d0, d1], %7[d0, d1])
// CHECK-NEXT:       outs([d0, d1] : tensor<4x8xf32>) {name = "out"}
// CHECK-NEXT: {{^ +[}]$}}
// CHECK-NEXT: return %8
module @gelu {
  const @half : tensor<f32> = fill(0.5)
  const @three : tensor<f32> = fill(3.0)
  const @c : tensor<f32> = fill(0.044715)
  const @s : tensor<f32> = fill(0.7978845608)
  const @one : tensor<f32> = fill(1.0)
  func @main(%in: tensor<32xf32>) -> (y: tensor<4x8xf32>) {
    %0 = compute "reshape" iter [d0: 4 par, d1: 8 par]
        ins(%in[(d0, d1)])
        outs([d0, d1] : tensor<4x8xf32>)
    %1 = compute "mul" iter [d0: 4 par, d1: 8 par]
        ins(%0[d0, d1], @half[])
        outs([d0, d1] : tensor<4x8xf32>)
    %2 = compute "pow" iter [d0: 4 par, d1: 8 par]
        ins(%0[d0, d1], @three[])
        outs([d0, d1] : tensor<4x8xf32>)
    %3 = compute "mul" iter [d0: 4 par, d1: 8 par]
        ins(%2[d0, d1], @c[])
        outs([d0, d1] : tensor<4x8xf32>)
    %4 = compute "add" iter [d0: 4 par, d1: 8 par]
        ins(%0[d0, d1], %3[d0, d1])
        outs([d0, d1] : tensor<4x8xf32>)
    %5 = compute "mul" iter [d0: 4 par, d1: 8 par]
        ins(%4[d0, d1], @s[])
        outs([d0, d1] : tensor<4x8xf32>)
    %6 = compute "tanh" iter [d0: 4 par, d1: 8 par]
        ins(%5[d0, d1])
        outs([d0, d1] : tensor<4x8xf32>)
    %7 = compute "add" iter [d0: 4 par, d1: 8 par]
        ins(%6[d0, d1], @one[])
        outs([d0, d1] : tensor<4x8xf32>)
    %8 = compute "mul" iter [d0: 4 par, d1: 8 par]
        ins(%1[d0, d1], %7[d0, d1])
        outs([d0, d1] : tensor<4x8xf32>) {name = "out"}
    return %8
  }
}

// -----

// A transpose and its elementwise reader fuse: the reader's d0 is the
// transpose's d1, point for point. A matmul cannot join a kernel but heads
// one of its elementwise epilogue (the relu); a read through an offset (a
// slice) does not fuse.
// CHECK-LABEL: module @edges
// CHECK:      fused "k0" {
// CHECK-NEXT:   %0 = compute "transpose"
// CHECK:        %1 = compute "relu"
// CHECK:      {{^ +[}]$}}
// CHECK-NEXT: fused "k1" {
// CHECK-NEXT:   %2 = compute "matmul"
// CHECK:        %3 = compute "relu"
// CHECK:      {{^ +[}]$}}
// CHECK-NEXT: %4 = compute "neg"
module @edges {
  func @main(%a: tensor<8x4xf32>, %w: tensor<8x8xf32>) -> (y: tensor<4x8xf32>, z: tensor<4x8xf32>, s: tensor<4x4xf32>) {
    %0 = compute "transpose" iter [d0: 8 par, d1: 4 par]
        ins(%a[d0, d1])
        outs([d1, d0] : tensor<4x8xf32>)
    %1 = compute "relu" iter [d0: 4 par, d1: 8 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<4x8xf32>)
    %2 = compute "matmul" iter [m: 4 par, n: 8 par, k: 8 red]
        ins(%1[m, k], %w[k, n])
        outs([m, n] : tensor<4x8xf32>)
    %3 = compute "relu" iter [d0: 4 par, d1: 8 par]
        ins(%2[d0, d1])
        outs([d0, d1] : tensor<4x8xf32>)
    %4 = compute "neg" iter [d0: 4 par, d1: 4 par]
        ins(%3[d0, d1 + 4])
        outs([d0, d1] : tensor<4x4xf32>)
    return %2, %3, %4
  }
}

// -----

// A matmul split along its reduction leaves partial sums: its epilogue
// waits for them to be added up, in another kernel.
// CHECK-LABEL: module @split_k
// CHECK-NOT:  fused
// CHECK:      return
module @split_k {
  func @main(%a: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (y: tensor<4x8xf32>) {
    %0 = compute "matmul" iter [m: 4 par, n: 8 par, k: 8 red]
        ins(%a[m, k], %w[k, n])
        outs([m, n] : tensor<4x8xf32>) {config = [1, 1, 2]}
    %1 = compute "relu" iter [d0: 4 par, d1: 8 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<4x8xf32>) {config = [1, 1]}
    return %1
  }
}

// -----

// Partitioned: a reader split like its writer fuses; one split another way
// (the same dims, other devices) does not.
// CHECK-LABEL: module @splits
// CHECK:      fused "k0" {
// CHECK-NEXT:   %0 = compute "exp"
// CHECK:        %1 = compute "neg"
// CHECK:      {{^ +[}]$}}
// CHECK-NEXT: %2 = compute "sqrt"
module @splits {
  func @main(%x: tensor<8x8xf32>) -> (y: tensor<8x8xf32>) {
    %0 = compute "exp" iter [d0: 8 par, d1: 8 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<8x8xf32>) {config = [4, 1]}
    %1 = compute "neg" iter [d0: 8 par, d1: 8 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<8x8xf32>) {config = [4, 1]}
    %2 = compute "sqrt" iter [d0: 8 par, d1: 8 par]
        ins(%1[d0, d1])
        outs([d0, d1] : tensor<8x8xf32>) {config = [1, 4]}
    return %2
  }
}

// -----

// Row by row: a residual add, the layer norm over its last dim, a scale
// and a reshape that merges the dims (a row-major group: each element
// still one point's) fuse; the add's sum is also returned (written out as
// well). A batch norm (its reduction over the batch, not the rows' last
// dim) does not join.
// CHECK-LABEL: module @rows
// CHECK:      fused "k0" {
// CHECK-NEXT:   %0 = compute "add"
// CHECK:        %1 = compute "layer_norm"
// CHECK:        %2 = compute "mul"
// CHECK:        %3 = compute "reshape"
// CHECK:      {{^ +[}]$}}
// CHECK-NEXT: %4 = compute "batch_norm"
// CHECK-NOT:  fused
// CHECK:      return
module @rows {
  const @g : tensor<8xf32> = fill(1.0)
  const @b : tensor<8xf32> = fill(0.0)
  const @two : tensor<f32> = fill(2.0)
  func @main(%x: tensor<4x8xf32>, %r: tensor<4x8xf32>) -> (y: tensor<32xf32>, s: tensor<4x8xf32>, n: tensor<32xf32>) {
    %0 = compute "add" iter [d0: 4 par, d1: 8 par]
        ins(%x[d0, d1], %r[d0, d1])
        outs([d0, d1] : tensor<4x8xf32>)
    %1 = compute "layer_norm" iter [d0: 4 par, d1: 8 red]
        ins(%0[d0, d1], @g[d1], @b[d1])
        outs([d0, d1] : tensor<4x8xf32>) {axis = 1, epsilon = 1e-05}
    %2 = compute "mul" iter [d0: 4 par, d1: 8 par]
        ins(%1[d0, d1], @two[])
        outs([d0, d1] : tensor<4x8xf32>)
    %3 = compute "reshape" iter [d0: 4 par, d1: 8 par]
        ins(%2[d0, d1])
        outs([(d0, d1)] : tensor<32xf32>)
    %4 = compute "batch_norm" iter [n: 4 red, c: 8 par]
        ins(%0[n, c], @g[c], @b[c], @b[c], @g[c])
        outs([n, c] : tensor<4x8xf32>) {epsilon = 1e-05}
    %5 = compute "reshape" iter [d0: 4 par, d1: 8 par]
        ins(%4[d0, d1])
        outs([(d0, d1)] : tensor<32xf32>)
    return %3, %0, %5
  }
}

// -----

// A reduction over the rows' last dim joins (a layer norm as exporters
// decompose it: the mean, read back along the row); one over the first
// dim (a column) does not.
// CHECK-LABEL: module @reductions
// CHECK:      fused "k0" {
// CHECK-NEXT:   %0 = compute "reduce_mean"
// CHECK:        %1 = compute "sub"
// CHECK:      {{^ +[}]$}}
// CHECK-NEXT: %2 = compute "reduce_sum"
module @reductions {
  func @main(%x: tensor<4x8xf32>) -> (y: tensor<4x8xf32>, c: tensor<1x8xf32>) {
    %0 = compute "reduce_mean" iter [d0: 4 par, d1: 8 red]
        ins(%x[d0, d1])
        outs([d0, _] : tensor<4x1xf32>)
    %1 = compute "sub" iter [d0: 4 par, d1: 8 par]
        ins(%x[d0, d1], %0[d0, _])
        outs([d0, d1] : tensor<4x8xf32>)
    %2 = compute "reduce_sum" iter [d0: 4 red, d1: 8 par]
        ins(%1[d0, d1])
        outs([_, d1] : tensor<1x8xf32>)
    return %1, %2
  }
}

// -----

// A value written through row-major groups of split dims (a reshape's
// flattened result) is not read point by point across devices: its
// reader starts another kernel.
// CHECK-LABEL: module @split_reshape
// CHECK-NOT:  fused
// CHECK:      return
module @split_reshape {
  func @main(%x: tensor<4x8xf32>) -> (y: tensor<32xf32>) {
    %0 = compute "reshape" iter [d0: 4 par, d1: 8 par]
        ins(%x[d0, d1])
        outs([(d0, d1)] : tensor<32xf32>) {config = [2, 1]}
    %1 = compute "neg" iter [e0: 32 par]
        ins(%0[e0])
        outs([e0] : tensor<32xf32>) {config = [2]}
    return %1
  }
}
