// RUN: paxc-opt %s --split-input-file -p pax-autocast | FileCheck %s
// RUN: paxc-opt %s --split-input-file -p 'pax-autocast{precision=fp16 master-weights=1}' | FileCheck %s --check-prefix=MASTER
// RUN: not paxc-opt %s -p 'pax-autocast{precision=fp32}' 2>&1 | FileCheck %s --check-prefix=BADP
// BADP: error: pax-autocast: unknown low precision 'fp32' (expected bf16 or fp16)
// RUN: not paxc-opt %s -p 'pax-autocast{master-weights=2}' 2>&1 | FileCheck %s --check-prefix=BADM
// BADM: error: pax-autocast: master-weights=2: expected 0 or 1
// RUN: not paxc-opt %s -p 'pax-autocast{master=1}' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: pass 'pax-autocast' has no option 'master'

// pax-autocast: the graph input is cast where it is read; the weights only
// products read are stored in bf16 (a plan loads them converted); the gemm
// computes in bf16, the relu follows it; the second product writes f32
// itself, since its one reader, the softmax, computes in f32 (the cast up
// folded into the product); the result keeps its type.
// CHECK-LABEL: module @mlp
// CHECK:      param @w1 : tensor<4x8xbf16>
// CHECK-NEXT: param @b1 : tensor<8xbf16>
// CHECK-NEXT: param @w2 : tensor<8x3xbf16>
// CHECK:      %0 = compute "cast" iter [d0: 2 par, d1: 4 par]
// CHECK-NEXT:     ins(%x[d0, d1])
// CHECK-NEXT:     outs([d0, d1] : tensor<2x4xbf16>)
// CHECK-NEXT: %1 = compute "gemm"
// CHECK-NEXT:     ins(%0[m, k], @w1[k, n], @b1[n])
// CHECK-NEXT:     outs([m, n] : tensor<2x8xbf16>)
// CHECK-NEXT: %2 = compute "relu"
// CHECK-NEXT:     ins(%1[d0, d1])
// CHECK-NEXT:     outs([d0, d1] : tensor<2x8xbf16>)
// CHECK-NEXT: %3 = compute "matmul"
// CHECK-NEXT:     ins(%2[m, k], @w2[k, n])
// CHECK-NEXT:     outs([m, n] : tensor<2x3xf32>)
// CHECK-NEXT: %4 = compute "softmax"
// CHECK-NEXT:     ins(%3[d0, d1])
// CHECK-NEXT:     outs([d0, d1] : tensor<2x3xf32>)
// CHECK-NEXT: return %4
// With master weights (a training step), the parameters stay fp32 and are
// cast where a product first reads them, once each.
// MASTER-LABEL: module @mlp
// MASTER:      param @w1 : tensor<4x8xf32>
// MASTER-NEXT: param @b1 : tensor<8xf32>
// MASTER-NEXT: param @w2 : tensor<8x3xf32>
// MASTER:      outs([d0, d1] : tensor<2x4xf16>)
// MASTER-NEXT: %1 = compute "cast"
// MASTER-NEXT:     ins(@w1[d0, d1])
// MASTER-NEXT:     outs([d0, d1] : tensor<4x8xf16>)
// MASTER-NEXT: %2 = compute "cast"
// MASTER-NEXT:     ins(@b1[d0])
// MASTER-NEXT:     outs([d0] : tensor<8xf16>)
// MASTER-NEXT: %3 = compute "gemm"
// MASTER-NEXT:     ins(%0[m, k], %1[k, n], %2[n])
// MASTER-NEXT:     outs([m, n] : tensor<2x8xf16>)
module @mlp {
  param @w1 : tensor<4x8xf32> = fill(0.5)
  param @b1 : tensor<8xf32> = fill(0.1)
  param @w2 : tensor<8x3xf32> = fill(0.25)
  func @main(%x: tensor<2x4xf32>) -> (y: tensor<2x3xf32>) {
    %0 = compute "gemm" iter [m: 2 par, n: 8 par, k: 4 red]
        ins(%x[m, k], @w1[k, n], @b1[n])
        outs([m, n] : tensor<2x8xf32>) {alpha = 1.0, beta = 1.0}
    %1 = compute "relu" iter [d0: 2 par, d1: 8 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<2x8xf32>)
    %2 = compute "matmul" iter [m: 2 par, n: 3 par, k: 8 red]
        ins(%1[m, k], @w2[k, n])
        outs([m, n] : tensor<2x3xf32>)
    %3 = compute "softmax" iter [d0: 2 par, d1: 3 red]
        ins(%2[d0, d1])
        outs([d0, d1] : tensor<2x3xf32>) {axis = 1}
    return %3
  }
}

// -----

// A table a lookup reads in fp32 and products read in bf16 stays fp32,
// cast once for the products. The layer norm computes in fp32 and writes
// bf16 itself (its only reader casts down). The add of a bf16 product and
// an fp32 value computes in fp32 (as PyTorch promotes), so the product
// writes f32.
// CHECK-LABEL: module @lm
// CHECK:      param @wte : tensor<10x4xf32>
// CHECK:      %0 = compute "gather"
// CHECK-NEXT:     ins(@wte[gather(v), d], %ids[s])
// CHECK-NEXT:     outs([s, d] : tensor<3x4xf32>)
// CHECK-NEXT: %1 = compute "layer_norm"
// CHECK-NEXT:     ins(%0[s, d], @g[d], @b[d])
// CHECK-NEXT:     outs([s, d] : tensor<3x4xbf16>)
// CHECK-NEXT: %2 = compute "cast"
// CHECK-NEXT:     ins(@wte[d0, d1])
// CHECK-NEXT:     outs([d0, d1] : tensor<10x4xbf16>)
// CHECK-NEXT: %3 = compute "matmul"
// CHECK-NEXT:     ins(%1[s, d], %2[v, d])
// CHECK-NEXT:     outs([s, v] : tensor<3x10xf32>)
// CHECK-NEXT: %4 = compute "matmul"
// CHECK-NEXT:     ins(%1[s, d], %2[n, d])
// CHECK-NEXT:     outs([s, n] : tensor<3x4xf32>)
// CHECK-NEXT: %5 = compute "add"
// CHECK-NEXT:     ins(%4[s, d], %r[s, d])
// CHECK-NEXT:     outs([s, d] : tensor<3x4xf32>)
// CHECK-NEXT: return %3, %5
// MASTER-LABEL: module @lm
// MASTER:      outs([s, d] : tensor<3x4xf16>)
module @lm {
  param @wte : tensor<10x4xf32> = fill(0.5)
  param @g : tensor<4xf32> = fill(1.0)
  param @b : tensor<4xf32> = fill(0.0)
  func @main(%ids: tensor<3xi64>, %r: tensor<3x4xf32>) -> (logits: tensor<3x10xf32>, h: tensor<3x4xf32>) {
    %0 = compute "gather" iter [s: 3 par, d: 4 par, v: 10 par]
        ins(@wte[gather(v), d], %ids[s])
        outs([s, d] : tensor<3x4xf32>)
    %1 = compute "layer_norm" iter [s: 3 par, d: 4 red]
        ins(%0[s, d], @g[d], @b[d])
        outs([s, d] : tensor<3x4xf32>) {axis = 1, epsilon = 1.0e-05}
    %2 = compute "matmul" iter [s: 3 par, v: 10 par, d: 4 red]
        ins(%1[s, d], @wte[v, d])
        outs([s, v] : tensor<3x10xf32>)
    %3 = compute "matmul" iter [s: 3 par, n: 4 par, d: 4 red]
        ins(%1[s, d], @wte[n, d])
        outs([s, n] : tensor<3x4xf32>)
    %4 = compute "add" iter [s: 3 par, d: 4 par]
        ins(%3[s, d], %r[s, d])
        outs([s, d] : tensor<3x4xf32>)
    return %2, %4
  }
}
