// RUN: paxc-opt %s --split-input-file -p pax-fold-casts | FileCheck %s
// RUN: paxc-opt %s --split-input-file -p 'pax-fold-casts{down-only=1}' | FileCheck %s --check-prefix=DOWN
// RUN: not paxc-opt %s -p 'pax-fold-casts{down-only=2}' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: pax-fold-casts: down-only=2: expected 0 or 1

// pax-fold-casts: a cast that alone reads a product's result becomes the
// product's store (a bf16 product written in f32: the gradient of an fp32
// master weight); with down-only=1 only casts to a narrower type fold, so
// the product stays bf16 and the cast stays. A cast of a value another op
// reads, a cast of a cast and a cast of a copy stay.
// CHECK-LABEL: module @casts
// CHECK:      %0 = compute "matmul"
// CHECK-NEXT:     ins(%a[m, k], %b[k, n])
// CHECK-NEXT:     outs([m, n] : tensor<2x3xf32>)
// CHECK-NEXT: %1 = compute "exp"
// CHECK-NEXT:     ins(%x[d0, d1])
// CHECK-NEXT:     outs([d0, d1] : tensor<2x3xbf16>)
// CHECK-NEXT: %2 = compute "cast"
// CHECK-NEXT:     ins(%1[d0, d1])
// CHECK-NEXT:     outs([d0, d1] : tensor<2x3xf32>)
// CHECK-NEXT: %3 = compute "transpose"
// CHECK-NEXT:     ins(%x[d1, d0])
// CHECK-NEXT:     outs([d0, d1] : tensor<3x2xf32>)
// CHECK-NEXT: %4 = compute "cast"
// CHECK-NEXT:     ins(%3[d0, d1])
// CHECK-NEXT:     outs([d0, d1] : tensor<3x2xbf16>)
// CHECK-NEXT: %5 = compute "add"
// CHECK-NEXT:     ins(%1[d0, d1], %2[d0, d1])
// CHECK-NEXT:     outs([d0, d1] : tensor<2x3xf32>)
// CHECK-NEXT: return %0, %5, %4
// DOWN-LABEL: module @casts
// DOWN:      %0 = compute "matmul"
// DOWN-NEXT:     ins(%a[m, k], %b[k, n])
// DOWN-NEXT:     outs([m, n] : tensor<2x3xbf16>)
// DOWN-NEXT: %1 = compute "cast"
// DOWN-NEXT:     ins(%0[d0, d1])
// DOWN-NEXT:     outs([d0, d1] : tensor<2x3xf32>)
module @casts {
  func @main(%a: tensor<2x4xbf16>, %b: tensor<4x3xbf16>, %x: tensor<2x3xf32>) -> (y: tensor<2x3xf32>, z: tensor<2x3xf32>, t: tensor<3x2xbf16>) {
    %0 = compute "matmul" iter [m: 2 par, n: 3 par, k: 4 red]
        ins(%a[m, k], %b[k, n])
        outs([m, n] : tensor<2x3xbf16>)
    %1 = compute "cast" iter [d0: 2 par, d1: 3 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<2x3xf32>)
    %2 = compute "exp" iter [d0: 2 par, d1: 3 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<2x3xbf16>)
    %3 = compute "cast" iter [d0: 2 par, d1: 3 par]
        ins(%2[d0, d1])
        outs([d0, d1] : tensor<2x3xf32>)
    %4 = compute "transpose" iter [d0: 3 par, d1: 2 par]
        ins(%x[d1, d0])
        outs([d0, d1] : tensor<3x2xf32>)
    %5 = compute "cast" iter [d0: 3 par, d1: 2 par]
        ins(%4[d0, d1])
        outs([d0, d1] : tensor<3x2xbf16>)
    %6 = compute "add" iter [d0: 2 par, d1: 3 par]
        ins(%2[d0, d1], %3[d0, d1])
        outs([d0, d1] : tensor<2x3xf32>)
    return %1, %6, %5
  }
}
