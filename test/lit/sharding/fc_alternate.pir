// RUN: paxc-opt %s -p "pax-solve-sharding{gpus=4 cluster=pase}" | FileCheck %s
// RUN: paxc-opt %s -p "pax-solve-sharding{gpus=4 cluster=pase solver=exhaustive}" | FileCheck %s
// RUN: paxc-opt %s -p "pax-solve-sharding{gpus=4 cluster=pase mode=infer}" | FileCheck %s --check-prefix=INFER

// Two fully connected layers on 4 devices, the second narrowing the first's
// output (a transformer MLP): the first splits its output channels n, the
// second its input channels k, so nothing moves between them; only the
// small output's partial sums are reduced (PaSE Table II, Megatron's MLP).

// CHECK: {config = [1, 4, 1], name = "fc1"}
// CHECK: {config = [1, 1, 4], name = "fc2"}
// For inference there is no gradient to synchronize: splitting the batch
// needs no communication at all.
// INFER: {config = [4, 1, 1], name = "fc1"}
// INFER: {config = [4, 1, 1], name = "fc2"}
module @mlp {
  param @w1 : tensor<512x8192xf32> = fill(0.1)
  param @w2 : tensor<8192x512xf32> = fill(0.1)
  func @main(%x: tensor<64x512xf32>) -> (z: tensor<64x512xf32>) {
    %0 = compute "matmul" iter [m: 64 par, n: 8192 par, k: 512 red]
        ins(%x[m, k], @w1[k, n])
        outs([m, n] : tensor<64x8192xf32>) {name = "fc1"}
    %1 = compute "matmul" iter [m: 64 par, n: 512 par, k: 8192 red]
        ins(%0[m, k], @w2[k, n])
        outs([m, n] : tensor<64x512xf32>) {name = "fc2"}
    return %1
  }
}
