// RUN: paxc-opt %s --split-input-file -p pax-fuse-bias | FileCheck %s
// The pass takes no options; paxc's flag takes a boolean.
// RUN: not paxc-opt %s -p 'pax-fuse-bias{all=1}' 2>&1 | FileCheck %s --check-prefix=OPTION
// OPTION: error: pass 'pax-fuse-bias' has no option 'all'
// RUN: not paxc %s --fuse-bias=maybe 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: fuse-bias{{.*}}maybe

// pax-fuse-bias: a matmul and the bias add after it (the bias first or
// second) become one gemm over the matmul's dims, the bias read through
// them (broadcast over the others), alpha = beta = 1; the gemm writes the
// add's value and stands for its node.
// CHECK-LABEL: module @bias
// CHECK:      %0 = compute "gemm" iter [b: 2 par, m: 3 par, n: 5 par, k: 4 red]
// CHECK-NEXT:     ins(%x[b, m, k], @w[k, n], @bias[n])
// CHECK-NEXT:     outs([b, m, n] : tensor<2x3x5xf32>) {alpha = 1.0, beta = 1.0, name = "fc/MatMul", onnx_node = "fc/Add"}
// CHECK-NEXT: %1 = compute "gemm" iter [m: 3 par, n: 5 par, k: 5 red]
// CHECK-NEXT:     ins(%z[m, k], @w2[k, n], %res[m, n])
// CHECK-NEXT:     outs([m, n] : tensor<3x5xf32>) {alpha = 1.0, beta = 1.0, name = "fc2/MatMul", onnx_node = "fc2/Add"}
// CHECK-NEXT: return %0, %1
// CHECK-NOT:  "add"
module @bias {
  const @w : tensor<4x5xf32> = fill(0.5)
  const @bias : tensor<5xf32> = fill(1.0)
  const @w2 : tensor<5x5xf32> = fill(0.25)
  func @main(%x: tensor<2x3x4xf32>, %z: tensor<3x5xf32>, %res: tensor<3x5xf32>) -> (y: tensor<2x3x5xf32>, y2: tensor<3x5xf32>) {
    %0 = compute "matmul" iter [b: 2 par, m: 3 par, n: 5 par, k: 4 red]
        ins(%x[b, m, k], @w[k, n])
        outs([b, m, n] : tensor<2x3x5xf32>) {name = "fc/MatMul"}
    %1 = compute "add" iter [d0: 2 par, d1: 3 par, d2: 5 par]
        ins(@bias[d2], %0[d0, d1, d2])
        outs([d0, d1, d2] : tensor<2x3x5xf32>) {name = "fc/Add"}
    %2 = compute "matmul" iter [m: 3 par, n: 5 par, k: 5 red]
        ins(%z[m, k], @w2[k, n])
        outs([m, n] : tensor<3x5xf32>) {name = "fc2/MatMul"}
    %3 = compute "add" iter [d0: 3 par, d1: 5 par]
        ins(%2[d0, d1], %res[d0, d1])
        outs([d0, d1] : tensor<3x5xf32>) {name = "fc2/Add"}
    return %1, %3
  }
}

// -----

// Left as they are: a product with another reader, a product that is
// returned, an add that broadcasts the product, and an added tensor
// computed after the matmul.
// CHECK-LABEL: module @kept
// CHECK-NOT:  "gemm"
module @kept {
  const @w : tensor<4x5xf32> = fill(0.5)
  const @bias : tensor<5xf32> = fill(1.0)
  func @main(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>) -> (a: tensor<3x5xf32>, b: tensor<3x5xf32>, c: tensor<3x5xf32>, d: tensor<2x3x5xf32>, e: tensor<3x5xf32>) {
    %0 = compute "matmul" iter [m: 3 par, n: 5 par, k: 4 red]
        ins(%x[m, k], @w[k, n])
        outs([m, n] : tensor<3x5xf32>) {name = "shared"}
    %1 = compute "add" iter [d0: 3 par, d1: 5 par]
        ins(%0[d0, d1], @bias[d1])
        outs([d0, d1] : tensor<3x5xf32>) {name = "shared/Add"}
    %2 = compute "relu" iter [d0: 3 par, d1: 5 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<3x5xf32>) {name = "shared/Relu"}
    %3 = compute "matmul" iter [m: 3 par, n: 5 par, k: 4 red]
        ins(%y[m, k], @w[k, n])
        outs([m, n] : tensor<3x5xf32>) {name = "wide"}
    %4 = compute "add" iter [d0: 2 par, d1: 3 par, d2: 5 par]
        ins(%3[d1, d2], @bias[d2])
        outs([d0, d1, d2] : tensor<2x3x5xf32>) {name = "wide/Add"}
    %5 = compute "matmul" iter [m: 3 par, n: 5 par, k: 4 red]
        ins(%y[m, k], @w[k, n])
        outs([m, n] : tensor<3x5xf32>) {name = "late"}
    %6 = compute "relu" iter [d0: 3 par, d1: 5 par]
        ins(%1[d0, d1])
        outs([d0, d1] : tensor<3x5xf32>) {name = "late/Relu"}
    %7 = compute "add" iter [d0: 3 par, d1: 5 par]
        ins(%5[d0, d1], %6[d0, d1])
        outs([d0, d1] : tensor<3x5xf32>) {name = "late/Add"}
    return %1, %2, %0, %4, %7
  }
}
