// RUN: not paxc-opt %s -p "pax-insert-collectives{gpus=4}" --split-input-file 2>&1 | FileCheck %s

// A config must list one factor per iteration dim.
// CHECK: op 'a': its config must list one factor per iteration dim (2)
module @short {
  func @main(%x: tensor<8x16xf32>) -> (y: tensor<8x16xf32>) {
    %0 = compute "relu" iter [d0: 8 par, d1: 16 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<8x16xf32>) {config = [4], name = "a"}
    return %0
  }
}

// -----

// CHECK: op 'b': config factor 3 does not divide the extent 8 of 'd0'
module @divide {
  func @main(%x: tensor<8x16xf32>) -> (y: tensor<8x16xf32>) {
    %0 = compute "relu" iter [d0: 8 par, d1: 16 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<8x16xf32>) {config = [3, 1], name = "b"}
    return %0
  }
}

// -----

// CHECK: op 'c': its config uses 8 devices, more than the 4 of the plan
module @devices {
  func @main(%x: tensor<8x16xf32>) -> (y: tensor<8x16xf32>) {
    %0 = compute "relu" iter [d0: 8 par, d1: 16 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<8x16xf32>) {config = [8, 1], name = "c"}
    return %0
  }
}

// -----

// CHECK: op 'e': the module already has collectives
module @twice {
  func @main(%x: tensor<8x16xf32>) -> (y: tensor<8x16xf32>) {
    %0 = compute "all_gather" iter [d0: 8 par, d1: 16 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<8x16xf32>) {name = "e"}
    return %0
  }
}
