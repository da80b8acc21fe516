// RUN: paxc-opt %s | FileCheck %s
// RUN: paxc-opt %s > %t.a && paxc-opt %t.a > %t.b && diff %t.a %t.b

// Every form of access expression, every kind of global and of iteration dim
// survives a print and a parse unchanged.

module @roundtrip attributes {source = "hand-written"} {
  param @w : tensor<8x3x3x3xf32> = fill(0.02)
  param @emb : tensor<100x16xf32> = input("emb")
  param @b : tensor<8xf32> = initializer("conv.bias")
  const @idx : tensor<2x2xi64> = dense<[1, 2, 3, -4]>
  const @half : tensor<f32> = dense<[0.5]>
  const @mask : tensor<2xi1> = dense<[0, 1]>

  func @main(%x: tensor<2x3x10x10xf32>, %ids.0: tensor<2x5xi64>) -> (y: tensor<2x8x5x5xf32>, "out/emb": tensor<2x5x16xf32>) {
    %c = compute "conv" iter [n: 2 par, co: 8 par, oh: 5 par, ow: 5 par, ci: 3 red, kh: 3 red, kw: 3 red]
        ins(%x[n, ci, 2*oh + kh - 1, 2*ow + 2*kw - 2], @w[co, ci, kh, kw], @b[co])
        outs([n, co, oh, ow] : tensor<2x8x5x5xf32>) {group = 1, name = "conv", strides = [2, 2]}
    %g = compute "gather" iter [i0: 2 par, i1: 5 par, v: 100 red, d1: 16 par]
        ins(@emb[gather(v), d1], %ids.0[i0, i1])
        outs([i0, i1, d1] : tensor<2x5x16xf32>) {axis = 0, scale = 1.5, values = [1.0, -2.5e-07]}
    %r = compute "reshape" iter [d0: 2 par, d1: 5 par, d2: 4 par, d3: 4 par]
        ins(%g[d0, d1, (d2, d3)])
        outs([d0, d1, d2, d3] : tensor<2x5x4x4xf32>)
    %s0, %s1 = compute "split" iter [d0: 2 par, d1: 5 par, d2: 16 par]
        ins(%g[d0, d1, d2])
        outs([d0, d1, d2] : tensor<2x5x6xf32>, [d0, d1, d2 - 6] : tensor<2x5x10xf32>)
    %m = compute "mul" iter [d0: 2 par, d1: 8 par, d2: 5 par, d3: 5 par]
        ins(%c[d0, d1, d2, d3], @half[])
        outs([d0, d1, d2, d3] : tensor<2x8x5x5xf32>)
    %p = compute "average_pool" iter [n: 2 par, c: 8 par, k0: 5 red, k1: 5 red]
        ins(%m[n, c, k0, k1])
        outs([n, c, _, _] : tensor<2x8x1x1xf32>)
    %q = compute "opaque" iter []
        ins(%p[*, *, *, *], @idx[*, *], @mask[*])
        outs([*, *] : tensor<3x3xf32>) {onnx_op = "TopK"}
    %l = compute "lstm" iter [s: 4 seq, b: 2 par, k: 24 red]
        ins(%q[*, *])
        outs([s, b] : tensor<4x2xf32>)
    %a = compute "all_reduce" iter [d0: 2 par, d1: 8 par, d2: 5 par, d3: 5 par]
        ins(%m[d0, d1, d2, d3])
        outs([d0, d1, d2, d3] : tensor<2x8x5x5xf32>) {bytes = 3200, groups = groups[space [2, 3, 2], over [0, 2]], halo = [0, 0, 0, 0, 0, 0, 0, 0], layout = layout[2 partial, 3 dim(1, 0), 2 rep]}
    return %m, %g
  }
}

// CHECK-LABEL: module @roundtrip attributes {source = "hand-written"} {
// CHECK-NEXT:    param @w : tensor<8x3x3x3xf32> = fill(0.02)
// CHECK-NEXT:    param @emb : tensor<100x16xf32> = input("emb")
// CHECK-NEXT:    param @b : tensor<8xf32> = initializer("conv.bias")
// CHECK-NEXT:    const @idx : tensor<2x2xi64> = dense<[1, 2, 3, -4]>
// CHECK-NEXT:    const @half : tensor<f32> = dense<[0.5]>
// CHECK-NEXT:    const @mask : tensor<2xi1> = dense<[0, 1]>
// CHECK:         func @main(%x: tensor<2x3x10x10xf32>, %ids.0: tensor<2x5xi64>) -> (y: tensor<2x8x5x5xf32>, "out/emb": tensor<2x5x16xf32>) {
// CHECK-NEXT:      %0 = compute "conv" iter [n: 2 par, co: 8 par, oh: 5 par, ow: 5 par, ci: 3 red, kh: 3 red, kw: 3 red]
// CHECK-NEXT:          ins(%x[n, ci, 2*oh + kh - 1, 2*ow + 2*kw - 2], @w[co, ci, kh, kw], @b[co])
// CHECK-NEXT:          outs([n, co, oh, ow] : tensor<2x8x5x5xf32>) {group = 1, name = "conv", strides = [2, 2]}
// CHECK-NEXT:      %1 = compute "gather" iter [i0: 2 par, i1: 5 par, v: 100 red, d1: 16 par]
// CHECK-NEXT:          ins(@emb[gather(v), d1], %ids.0[i0, i1])
// CHECK-NEXT:          outs([i0, i1, d1] : tensor<2x5x16xf32>) {axis = 0, scale = 1.5, values = [1.0, -2.5e-07]}
// CHECK:           ins(%1[d0, d1, (d2, d3)])
// CHECK:         %3, %4 = compute "split"
// CHECK:           outs([d0, d1, d2] : tensor<2x5x6xf32>, [d0, d1, d2 - 6] : tensor<2x5x10xf32>)
// CHECK:           outs([n, c, _, _] : tensor<2x8x1x1xf32>)
// CHECK:           ins(%6[*, *, *, *], @idx[*, *], @mask[*])
// CHECK:         compute "lstm" iter [s: 4 seq, b: 2 par, k: 24 red]
// CHECK:         compute "all_reduce"
// CHECK:           {bytes = 3200, groups = groups[space [2, 3, 2], over [0, 2]], halo = [0, 0, 0, 0, 0, 0, 0, 0], layout = layout[2 partial, 3 dim(1, 0), 2 rep]}
// CHECK:         return %5, %1
