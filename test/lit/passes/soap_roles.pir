// RUN: paxc-opt %s -p pax-print-soap-roles | FileCheck %s

// SOAP roles follow the access maps: the batch dim of the argument is
// `sample` and stays so through a transpose; dims that index a parameter are
// `parameter`; `red` dims are `reduction`; everything else is `attribute`.

// CHECK: soap transpose 't': d0=sample d1=attribute
// CHECK: soap matmul 'mm': m=attribute n=parameter k=sample
// CHECK: soap gather 'emb': i0=sample i1=attribute v=reduction d1=parameter
module @m {
  param @w : tensor<8x16xf32> = fill(0.5)
  param @table : tensor<100x16xf32> = fill(0.1)
  func @main(%x: tensor<8x4xf32>, %ids: tensor<8x3xi64>) -> (y: tensor<4x16xf32>, e: tensor<8x3x16xf32>) {
    %0 = compute "transpose" iter [d0: 8 par, d1: 4 par]
        ins(%x[d0, d1])
        outs([d1, d0] : tensor<4x8xf32>) {name = "t"}
    %1 = compute "matmul" iter [m: 4 par, n: 16 par, k: 8 par]
        ins(%0[m, k], @w[k, n])
        outs([m, n] : tensor<4x16xf32>) {name = "mm"}
    %2 = compute "gather" iter [i0: 8 par, i1: 3 par, v: 100 red, d1: 16 par]
        ins(@table[gather(v), d1], %ids[i0, i1])
        outs([i0, i1, d1] : tensor<8x3x16xf32>) {name = "emb"}
    return %1, %2
  }
}
