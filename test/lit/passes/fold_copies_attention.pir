// RUN: paxc-opt %s --split-input-file -p 'pax-fold-copies{inference=1}' | FileCheck %s
// The folded maps print and parse back (a round trip prints the same):
// RUN: paxc-opt %s --split-input-file -p 'pax-fold-copies{inference=1}' > %t.pir
// RUN: paxc-opt %t.pir --split-input-file | diff %t.pir -
// RUN: paxc-opt %s --split-input-file -p pax-fold-copies | FileCheck %s --check-prefix=PLAIN

// GPT-2's heads: one projection writes Q, K and V side by side, a split
// cuts them apart, transposes move the heads out (K's to [b, h, d, s]);
// after attention a reshape merges the heads back. With inference=1,
// attention reads each head of the projection where it lies, `(b1, *4)`
// (head b1's 4 values, read whole) from K's and V's offsets, and writes its
// output in the merged layout: no copy is left.
// CHECK-LABEL: module @qkv
// CHECK:      %0, %1 = compute "attention" iter [b0: 2 par, b1: 2 par, q: 3 par, k: 3 red]
// CHECK-NEXT:     ins(%x[b0, q, (b1, *4)], %x[b0, k, (b1, *4) + 8], %x[b0, k, (b1, *4) + 16])
// CHECK-NEXT:     outs([b0, q, (b1, *4)] : tensor<2x3x8xf32>, [b0, b1, q] : tensor<2x2x3xf32>) {name = "Attention", scale = 0.5}
// CHECK-NEXT: return %0
// Without the option the transposes read the split's parts, and the
// reshape attention's output: the copies stay.
// PLAIN-LABEL: module @qkv
// PLAIN: compute "split"
// PLAIN-COUNT-3: compute "transpose"
// PLAIN: compute "attention"
// PLAIN: compute "reshape"
module @qkv {
  func @main(%x: tensor<2x3x24xf32>) -> (y: tensor<2x3x8xf32>) {
    %0, %1, %2 = compute "split" iter [d0: 2 par, d1: 3 par, d2: 24 par]
        ins(%x[d0, d1, d2])
        outs([d0, d1, d2] : tensor<2x3x8xf32>, [d0, d1, d2 - 8] : tensor<2x3x8xf32>, [d0, d1, d2 - 16] : tensor<2x3x8xf32>) {axis = 2, name = "Split"}
    %3 = compute "transpose" iter [d0: 2 par, d1: 3 par, d2: 2 par, d3: 4 par]
        ins(%0[d0, d1, (d2, d3)])
        outs([d0, d2, d1, d3] : tensor<2x2x3x4xf32>) {name = "Q", perm = [0, 2, 1, 3]}
    %4 = compute "transpose" iter [d0: 2 par, d1: 3 par, d2: 2 par, d3: 4 par]
        ins(%1[d0, d1, (d2, d3)])
        outs([d0, d2, d3, d1] : tensor<2x2x4x3xf32>) {name = "K", perm = [0, 2, 3, 1]}
    %5 = compute "transpose" iter [d0: 2 par, d1: 3 par, d2: 2 par, d3: 4 par]
        ins(%2[d0, d1, (d2, d3)])
        outs([d0, d2, d1, d3] : tensor<2x2x3x4xf32>) {name = "V", perm = [0, 2, 1, 3]}
    %6, %7 = compute "attention" iter [b0: 2 par, b1: 2 par, q: 3 par, k: 3 red]
        ins(%3[b0, b1, q, *], %4[b0, b1, *, k], %5[b0, b1, k, *])
        outs([b0, b1, q, *] : tensor<2x2x3x4xf32>, [b0, b1, q] : tensor<2x2x3xf32>) {name = "Attention", scale = 0.5}
    %8 = compute "reshape" iter [d0: 2 par, d1: 3 par, d2: 2 par, d3: 4 par]
        ins(%6[d0, d2, d1, d3])
        outs([d0, d1, (d2, d3)] : tensor<2x3x8xf32>) {name = "Merge"}
    return %8
  }
}

// -----

// Why not: Q's heads are also returned (a value left in two layouts gains
// nothing), so attention reads that copy; K's transpose folds, but the
// split's part it reads is read by another op too, so attention reads that
// part; the output is returned as well, so the reshape stays. V folds
// through its transpose and the split.
// CHECK-LABEL: module @kept
// CHECK:      %0, %1, %2 = compute "split"
// CHECK:      %3 = compute "transpose"
// CHECK-NOT:  compute "transpose"
// CHECK:      %5, %6 = compute "attention" iter [b0: 2 par, b1: 2 par, q: 3 par, k: 3 red]
// CHECK-NEXT:     ins(%3[b0, b1, q, *], %1[b0, k, (b1, *4)], %x[b0, k, (b1, *4) + 16])
// CHECK-NEXT:     outs([b0, b1, q, *] : tensor<2x2x3x4xf32>, [b0, b1, q] : tensor<2x2x3xf32>)
// CHECK:      compute "reshape"
module @kept {
  func @main(%x: tensor<2x3x24xf32>) -> (y: tensor<2x3x8xf32>, q: tensor<2x2x3x4xf32>, z: tensor<2x3x8xf32>, w: tensor<2x2x3x4xf32>) {
    %0, %1, %2 = compute "split" iter [d0: 2 par, d1: 3 par, d2: 24 par]
        ins(%x[d0, d1, d2])
        outs([d0, d1, d2] : tensor<2x3x8xf32>, [d0, d1, d2 - 8] : tensor<2x3x8xf32>, [d0, d1, d2 - 16] : tensor<2x3x8xf32>) {axis = 2, name = "Split"}
    %3 = compute "transpose" iter [d0: 2 par, d1: 3 par, d2: 2 par, d3: 4 par]
        ins(%0[d0, d1, (d2, d3)])
        outs([d0, d2, d1, d3] : tensor<2x2x3x4xf32>) {name = "Q", perm = [0, 2, 1, 3]}
    %4 = compute "transpose" iter [d0: 2 par, d1: 3 par, d2: 2 par, d3: 4 par]
        ins(%1[d0, d1, (d2, d3)])
        outs([d0, d2, d3, d1] : tensor<2x2x4x3xf32>) {name = "K", perm = [0, 2, 3, 1]}
    %5 = compute "transpose" iter [d0: 2 par, d1: 3 par, d2: 2 par, d3: 4 par]
        ins(%2[d0, d1, (d2, d3)])
        outs([d0, d2, d1, d3] : tensor<2x2x3x4xf32>) {name = "V", perm = [0, 2, 1, 3]}
    %6 = compute "relu" iter [d0: 2 par, d1: 3 par, d2: 8 par]
        ins(%1[d0, d1, d2])
        outs([d0, d1, d2] : tensor<2x3x8xf32>) {name = "KRelu"}
    %7, %8 = compute "attention" iter [b0: 2 par, b1: 2 par, q: 3 par, k: 3 red]
        ins(%3[b0, b1, q, *], %4[b0, b1, *, k], %5[b0, b1, k, *])
        outs([b0, b1, q, *] : tensor<2x2x3x4xf32>, [b0, b1, q] : tensor<2x2x3xf32>) {name = "Attention", scale = 0.5}
    %9 = compute "reshape" iter [d0: 2 par, d1: 3 par, d2: 2 par, d3: 4 par]
        ins(%7[d0, d2, d1, d3])
        outs([d0, d1, (d2, d3)] : tensor<2x3x8xf32>) {name = "Merge"}
    return %9, %3, %6, %7
  }
}

// -----

// A matrix product reads a transposed weight where it lies (plain dims in
// another order: BLAS's transpose), not through a reshape (a group).
// CHECK-LABEL: module @products
// CHECK:      %0 = compute "matmul" iter [m: 4 par, n: 6 par, k: 8 red]
// CHECK-NEXT:     ins(%x[m, k], @w[n, k])
// CHECK:      compute "reshape"
// CHECK:      compute "matmul" iter [m: 4 par, n: 6 par, k: 8 red]
// CHECK-NEXT:     ins(%x[m, k], %{{[0-9]+}}[k, n])
// PLAIN-LABEL: module @products
// PLAIN: compute "transpose"
module @products {
  param @w : tensor<6x8xf32> = fill(0.5)
  param @v : tensor<48xf32> = fill(0.25)
  func @main(%x: tensor<4x8xf32>) -> (y: tensor<4x6xf32>, z: tensor<4x6xf32>) {
    %0 = compute "transpose" iter [d0: 6 par, d1: 8 par]
        ins(@w[d0, d1])
        outs([d1, d0] : tensor<8x6xf32>) {name = "T", perm = [1, 0]}
    %1 = compute "matmul" iter [m: 4 par, n: 6 par, k: 8 red]
        ins(%x[m, k], %0[k, n])
        outs([m, n] : tensor<4x6xf32>) {name = "Head"}
    %2 = compute "reshape" iter [d0: 8 par, d1: 6 par]
        ins(@v[(d0, d1)])
        outs([d0, d1] : tensor<8x6xf32>) {name = "R"}
    %3 = compute "matmul" iter [m: 4 par, n: 6 par, k: 8 red]
        ins(%x[m, k], %2[k, n])
        outs([m, n] : tensor<4x6xf32>) {name = "Other"}
    return %1, %3
  }
}
