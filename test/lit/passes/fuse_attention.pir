// RUN: paxc-opt %s --split-input-file -p pax-fuse-attention | FileCheck %s

// pax-fuse-attention: Q.K^T, a scale, a causal where-mask, softmax and
// P.V become one attention op; the scale folds, the mask is read through
// the op's dims, the head dims whole.
// CHECK-LABEL: module @fused
// CHECK:      %0, %1 = compute "attention" iter [b0: 2 par, q: 4 par, k: 4 red]
// CHECK-NEXT:     ins(%q[b0, q, *], %k[b0, k, *], %v[b0, k, *], @causal[q, k])
// CHECK-NEXT:     outs([b0, q, *] : tensor<2x4x8xf32>, [b0, q] : tensor<2x4xf32>) {fills = [-1e+09], masks = [2], name = "attn/Attention", onnx_node = "attn/MatMul_1", scale = 0.25}
// CHECK-NEXT: return %0
module @fused {
  const @causal : tensor<4x4xi1> = dense<[1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1]>
  const @quarter : tensor<f32> = dense<[0.25]>
  const @fill : tensor<f32> = dense<[-1.0e+09]>
  func @main(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> (y: tensor<2x4x8xf32>) {
    %0 = compute "matmul" iter [b: 2 par, m: 4 par, n: 4 par, h: 8 red]
        ins(%q[b, m, h], %k[b, n, h])
        outs([b, m, n] : tensor<2x4x4xf32>) {name = "attn/MatMul"}
    %1 = compute "mul" iter [d0: 2 par, d1: 4 par, d2: 4 par]
        ins(%0[d0, d1, d2], @quarter[])
        outs([d0, d1, d2] : tensor<2x4x4xf32>) {name = "attn/Mul"}
    %2 = compute "where" iter [d0: 2 par, d1: 4 par, d2: 4 par]
        ins(@causal[d1, d2], %1[d0, d1, d2], @fill[])
        outs([d0, d1, d2] : tensor<2x4x4xf32>) {name = "attn/Where"}
    %3 = compute "softmax" iter [d0: 2 par, d1: 4 par, d2: 4 red]
        ins(%2[d0, d1, d2])
        outs([d0, d1, d2] : tensor<2x4x4xf32>) {axis = 2, name = "attn/Softmax"}
    %4 = compute "matmul" iter [b: 2 par, m: 4 par, n: 8 par, k: 4 red]
        ins(%3[b, m, k], %v[b, k, n])
        outs([b, m, n] : tensor<2x4x8xf32>) {name = "attn/MatMul_1"}
    return %4
  }
}

// -----

// The probabilities are an output too: nothing fuses.
// CHECK-LABEL: module @returned
// CHECK-NOT:  "attention"
// CHECK:      compute "softmax"
module @returned {
  func @main(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> (y: tensor<2x4x8xf32>, p: tensor<2x4x4xf32>) {
    %0 = compute "matmul" iter [b: 2 par, m: 4 par, n: 4 par, h: 8 red]
        ins(%q[b, m, h], %k[b, n, h])
        outs([b, m, n] : tensor<2x4x4xf32>)
    %1 = compute "softmax" iter [d0: 2 par, d1: 4 par, d2: 4 red]
        ins(%0[d0, d1, d2])
        outs([d0, d1, d2] : tensor<2x4x4xf32>) {axis = 2}
    %2 = compute "matmul" iter [b: 2 par, m: 4 par, n: 8 par, k: 4 red]
        ins(%1[b, m, k], %v[b, k, n])
        outs([b, m, n] : tensor<2x4x8xf32>)
    return %2, %1
  }
}

// -----

// A learned bias added to the scores (a parameter): its gradient would be
// lost, so nothing fuses.
// CHECK-LABEL: module @learned
// CHECK-NOT:  "attention"
// CHECK:      compute "softmax"
module @learned {
  param @bias : tensor<4x4xf32> = fill(0.5)
  func @main(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> (y: tensor<2x4x8xf32>) {
    %0 = compute "matmul" iter [b: 2 par, m: 4 par, n: 4 par, h: 8 red]
        ins(%q[b, m, h], %k[b, n, h])
        outs([b, m, n] : tensor<2x4x4xf32>)
    %1 = compute "add" iter [d0: 2 par, d1: 4 par, d2: 4 par]
        ins(%0[d0, d1, d2], @bias[d1, d2])
        outs([d0, d1, d2] : tensor<2x4x4xf32>)
    %2 = compute "softmax" iter [d0: 2 par, d1: 4 par, d2: 4 red]
        ins(%1[d0, d1, d2])
        outs([d0, d1, d2] : tensor<2x4x4xf32>) {axis = 2}
    %3 = compute "matmul" iter [b: 2 par, m: 4 par, n: 8 par, k: 4 red]
        ins(%2[b, m, k], %v[b, k, n])
        outs([b, m, n] : tensor<2x4x8xf32>)
    return %3
  }
}

// -----

// A scale that is not a constant (an input): nothing fuses.
// CHECK-LABEL: module @scaled
// CHECK-NOT:  "attention"
// CHECK:      compute "softmax"
module @scaled {
  func @main(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>, %t: tensor<f32>) -> (y: tensor<2x4x8xf32>) {
    %0 = compute "matmul" iter [b: 2 par, m: 4 par, n: 4 par, h: 8 red]
        ins(%q[b, m, h], %k[b, n, h])
        outs([b, m, n] : tensor<2x4x4xf32>)
    %1 = compute "mul" iter [d0: 2 par, d1: 4 par, d2: 4 par]
        ins(%0[d0, d1, d2], %t[])
        outs([d0, d1, d2] : tensor<2x4x4xf32>)
    %2 = compute "softmax" iter [d0: 2 par, d1: 4 par, d2: 4 red]
        ins(%1[d0, d1, d2])
        outs([d0, d1, d2] : tensor<2x4x4xf32>) {axis = 2}
    %3 = compute "matmul" iter [b: 2 par, m: 4 par, n: 8 par, k: 4 red]
        ins(%2[b, m, k], %v[b, k, n])
        outs([b, m, n] : tensor<2x4x8xf32>)
    return %3
  }
}
