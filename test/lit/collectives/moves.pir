// RUN: paxc-opt %s -p "pax-insert-collectives{gpus=4 gpus-per-node=4}" --split-input-file | FileCheck %s
// RUN: paxc-opt %s -p "pax-insert-collectives{gpus=6 gpus-per-node=6}" --split-input-file | FileCheck %s --check-prefix=SIX

// Every move of a strategy becomes a collective op, each the identity on
// the whole tensor, with its device groups (the digits of the device id it
// runs across), the layout after it and the bytes the cost model counts
// per device.

// A reduction split four ways leaves partial sums, reduced where they are
// needed: all_reduce for a reader on one device, and before they leave.
// CHECK-LABEL: module @partial
// CHECK: compute "matmul"
// CHECK: compute "all_reduce"
// CHECK: bytes = 512, groups = groups[space [2, 2], over [0, 1]], {{.*}}name = "act.in0.all_reduce0"
// CHECK: compute "relu"
// CHECK: compute "all_reduce"
// CHECK: bytes = 512, groups = groups[space [2, 2], over [0, 1]], {{.*}}name = "fc.all_reduce"
// CHECK: return %2, %3
module @partial {
  param @w : tensor<64x16xf32> = fill(0.1)
  func @main(%x: tensor<8x64xf32>) -> (y: tensor<8x16xf32>, z: tensor<8x16xf32>) {
    %0 = compute "matmul" iter [m: 8 par, n: 16 par, k: 64 red]
        ins(%x[m, k], @w[k, n])
        outs([m, n] : tensor<8x16xf32>) {config = [1, 1, 4], name = "fc"}
    %1 = compute "relu" iter [d0: 8 par, d1: 16 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<8x16xf32>) {config = [1, 1], name = "act"}
    return %1, %0
  }
}

// -----

// Rows split four ways, read by an op on one device: all_gather; that
// op's result read by four: broadcast, then a slice; the partial sums of
// a split reduction read split: reduce_scatter.
// CHECK-LABEL: module @gather_slice
// CHECK: compute "all_gather"
// CHECK: bytes = 512, groups = groups[space {{.*}}, over [0, 1]], {{.*}}name = "b.in0.all_gather0"
// CHECK: compute "broadcast"
// CHECK: compute "local_slice"
// CHECK: compute "matmul"
// CHECK: compute "reduce_scatter"
// CHECK: bytes = 512, groups = groups[space {{.*}}, over [0, 1]], {{.*}}layout = layout[2 dim(0, 1), 2 dim(0, 0)], name = "d.in0.reduce_scatter0"
module @gather_slice {
  param @w : tensor<16x16xf32> = fill(0.1)
  func @main(%x: tensor<8x16xf32>) -> (y: tensor<8x16xf32>) {
    %0 = compute "relu" iter [d0: 8 par, d1: 16 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<8x16xf32>) {config = [4, 1], name = "a"}
    %1 = compute "relu" iter [d0: 8 par, d1: 16 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<8x16xf32>) {config = [1, 1], name = "b"}
    %2 = compute "matmul" iter [m: 8 par, n: 16 par, k: 16 red]
        ins(%1[m, k], @w[k, n])
        outs([m, n] : tensor<8x16xf32>) {config = [1, 1, 4], name = "c"}
    %3 = compute "relu" iter [d0: 8 par, d1: 16 par]
        ins(%2[d0, d1])
        outs([d0, d1] : tensor<8x16xf32>) {config = [4, 1], name = "d"}
    return %3
  }
}

// -----

// Columns to rows: all_to_all. A producer on one device feeding four:
// broadcast, then each device slices its block.
// CHECK-LABEL: module @a2a_broadcast
// CHECK: compute "all_to_all"
// CHECK: bytes = 128, groups = groups[space {{.*}}, over [0, 1]], {{.*}}name = "b.in0.all_to_all0"
// CHECK: compute "all_gather"
// CHECK: compute "broadcast"
// CHECK: bytes = 512, groups = groups[space {{.*}}, over [0, 1]], {{.*}}name = "d.in0.broadcast0"
// CHECK: compute "local_slice"
// CHECK: name = "d.in0.slice1"
module @a2a_broadcast {
  func @main(%x: tensor<8x16xf32>) -> (y: tensor<8x16xf32>) {
    %0 = compute "relu" iter [d0: 8 par, d1: 16 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<8x16xf32>) {config = [1, 4], name = "a"}
    %1 = compute "relu" iter [d0: 8 par, d1: 16 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<8x16xf32>) {config = [4, 1], name = "b"}
    %2 = compute "relu" iter [d0: 8 par, d1: 16 par]
        ins(%1[d0, d1])
        outs([d0, d1] : tensor<8x16xf32>) {config = [1, 1], name = "c"}
    %3 = compute "relu" iter [d0: 8 par, d1: 16 par]
        ins(%2[d0, d1])
        outs([d0, d1] : tensor<8x16xf32>) {config = [4, 1], name = "d"}
    return %3
  }
}

// -----

// A 3x3 window over rows split four ways: neighbours trade one row each
// (an inner block receives two rows of 2x16 floats).
// CHECK-LABEL: module @halo
// CHECK: compute "halo_exchange"
// CHECK: bytes = 256, groups = groups[space [2, 2], over [0, 1]], halo = [0, 0, 1, 1, 0, 0], layout = layout[2 dim(1, 1), 2 dim(1, 0)]
// CHECK: compute "max_pool"
module @halo {
  func @main(%x: tensor<2x16x16xf32>) -> (y: tensor<2x16x16xf32>) {
    %0 = compute "relu" iter [c: 2 par, h: 16 par, w: 16 par]
        ins(%x[c, h, w])
        outs([c, h, w] : tensor<2x16x16xf32>) {config = [1, 4, 1], name = "a"}
    %1 = compute "max_pool" iter [c: 2 par, oh: 16 par, ow: 16 par, kh: 3 red, kw: 3 red]
        ins(%0[c, oh + kh - 1, ow + kw - 1])
        outs([c, oh, ow] : tensor<2x16x16xf32>) {config = [1, 4, 1, 1, 1], name = "pool"}
    return %1
  }
}

// -----

// Two blocks read as three (6 devices): the digits do not line up, so each
// device fetches its block point to point.
// SIX-LABEL: module @p2p
// SIX: compute "send_recv"
// SIX: bytes = 64, groups = groups[space [3], over [0]], {{.*}}name = "b.in0.send_recv"
module @p2p {
  func @main(%x: tensor<6x8xf32>) -> (y: tensor<6x8xf32>) {
    %0 = compute "relu" iter [d0: 6 par, d1: 8 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<6x8xf32>) {config = [2, 1], name = "a"}
    %1 = compute "relu" iter [d0: 6 par, d1: 8 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<6x8xf32>) {config = [3, 1], name = "b"}
    return %1
  }
}
