// RUN: paxc-opt %s -p pax-dce | FileCheck %s
// RUN: paxc-opt %s -p pax-dce,pax-strip-names --verify-each | FileCheck %s --check-prefix=STRIP

// pax-dce removes ops that no result depends on, and the globals only they
// read; pax-strip-names drops the source-model names.

// CHECK-NOT: @unused
// CHECK:     param @w
// CHECK:     %0 = compute "matmul"
// CHECK-NOT: compute "relu"
// CHECK:     return %0
// STRIP:     outs([m, n] : tensor<4x8xf32>)
// STRIP-NOT: name =
module @m {
  param @w : tensor<16x8xf32> = fill(0.5)
  param @unused : tensor<16xf32> = fill(1.0)
  func @main(%x: tensor<4x16xf32>) -> (y: tensor<4x8xf32>) {
    %0 = compute "matmul" iter [m: 4 par, n: 8 par, k: 16 red]
        ins(%x[m, k], @w[k, n])
        outs([m, n] : tensor<4x8xf32>) {name = "mm"}
    %1 = compute "relu" iter [d0: 16 par]
        ins(@unused[d0])
        outs([d0] : tensor<16xf32>) {name = "dead"}
    return %0
  }
}
