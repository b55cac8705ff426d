// Tiny networks, one per layer kind (input → convolution → LAYER → flatten →
// fully-connected → loss, the convolution in front so that the layer's
// backward has a data gradient to produce), shared by the reference
// generator (oneDNN, on a CPU) and the GPU test that compares against it.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "crossbench/network.hpp"

namespace crossbench::tiny {

inline constexpr std::int64_t kBatch = 4;  // > 1: batch-norm statistics need several images

struct Case {
  std::string name;
  std::function<Network()> build;
};

inline std::vector<Case> cases() {
  return {
      {"convolution",
       [] {
         NetworkBuilder b("tiny-convolution", {3, 12, 12});
         int x = b.convolution(b.input(), 8, 3, 1, 1, true, "conv");
         x = b.flatten(x, "flatten");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"convolution_strided",
       [] {
         NetworkBuilder b("tiny-convolution-strided", {4, 13, 13});
         int x = b.convolution(b.input(), 6, 5, 2, 2, false, "conv");
         x = b.convolution(x, 8, 1, 1, 0, true, "conv1x1");
         x = b.flatten(x, "flatten");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"relu",
       [] {
         NetworkBuilder b("tiny-relu", {3, 10, 10});
         int x = b.convolution(b.input(), 8, 3, 1, 1, true, "conv");
         x = b.relu(x, "relu");
         x = b.convolution(x, 8, 3, 1, 1, false, "conv2");
         x = b.relu(x, "relu2");
         x = b.flatten(x, "flatten");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"max_pool",
       [] {
         NetworkBuilder b("tiny-max-pool", {3, 12, 12});
         int x = b.convolution(b.input(), 8, 3, 1, 1, true, "conv");
         x = b.max_pool(x, 2, 2, 0, false, "pool");
         x = b.flatten(x, "flatten");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"max_pool_ceil",  // GoogLeNet's ceil-mode pooling: 12 → 6 (floor mode gives 5)
       [] {
         NetworkBuilder b("tiny-max-pool-ceil", {3, 12, 12});
         int x = b.convolution(b.input(), 8, 3, 1, 1, true, "conv");
         x = b.max_pool(x, 3, 2, 0, true, "pool");
         x = b.flatten(x, "flatten");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"max_pool_padded",  // ResNet's stem pooling
       [] {
         NetworkBuilder b("tiny-max-pool-padded", {3, 12, 12});
         int x = b.convolution(b.input(), 8, 3, 1, 1, true, "conv");
         x = b.max_pool(x, 3, 2, 1, false, "pool");
         x = b.flatten(x, "flatten");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"avg_pool",
       [] {
         NetworkBuilder b("tiny-avg-pool", {3, 12, 12});
         int x = b.convolution(b.input(), 8, 3, 1, 1, true, "conv");
         x = b.avg_pool(x, 3, 3, 0, false, "pool");
         x = b.flatten(x, "flatten");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"avg_pool_padded",  // count_include_pad
       [] {
         NetworkBuilder b("tiny-avg-pool-padded", {3, 12, 12});
         int x = b.convolution(b.input(), 8, 3, 1, 1, true, "conv");
         x = b.avg_pool(x, 3, 2, 1, false, "pool");
         x = b.flatten(x, "flatten");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"lrn",  // alpha and k large enough that the normalisation changes the values
       [] {
         NetworkBuilder b("tiny-lrn", {3, 10, 10});
         int x = b.convolution(b.input(), 8, 3, 1, 1, true, "conv");
         x = b.lrn(x, 5, 0.5, 0.75, 2.0, "lrn");
         x = b.flatten(x, "flatten");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"batch_norm",
       [] {
         NetworkBuilder b("tiny-batch-norm", {3, 10, 10});
         int x = b.convolution(b.input(), 8, 3, 1, 1, false, "conv");
         x = b.batch_norm(x, "bn");
         x = b.relu(x, "relu");
         x = b.flatten(x, "flatten");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"dropout",
       [] {
         NetworkBuilder b("tiny-dropout", {3, 8, 8});
         int x = b.convolution(b.input(), 8, 3, 1, 1, true, "conv");
         x = b.relu(x, "relu");
         x = b.flatten(x, "flatten");
         x = b.dropout(x, 0.5, "drop");
         x = b.fully_connected(x, 32, true, "fc1");
         x = b.relu(x, "relu_fc");
         x = b.dropout(x, 0.4, "drop2");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"concat",  // an inception-like fan-out: the input of the branches gets the sum of their gradients
       [] {
         NetworkBuilder b("tiny-concat", {3, 10, 10});
         int x = b.convolution(b.input(), 8, 3, 1, 1, true, "conv");
         x = b.relu(x, "relu");
         int a = b.relu(b.convolution(x, 4, 1, 1, 0, true, "branch_a"), "relu_a");
         int c = b.relu(b.convolution(x, 6, 3, 1, 1, true, "branch_b"), "relu_b");
         int p = b.max_pool(x, 3, 1, 1, false, "branch_pool");
         p = b.relu(b.convolution(p, 4, 1, 1, 0, true, "pool_proj"), "relu_p");
         x = b.concat({a, c, p}, "concat");
         x = b.flatten(x, "flatten");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"add",  // a residual block: the block input gets the gradient of the shortcut and of conv1
       [] {
         NetworkBuilder b("tiny-add", {3, 10, 10});
         int x = b.convolution(b.input(), 8, 3, 1, 1, false, "stem");
         x = b.relu(b.batch_norm(x, "stem_bn"), "stem_relu");
         int y = b.relu(b.batch_norm(b.convolution(x, 8, 3, 1, 1, false, "conv1"), "bn1"), "relu1");
         y = b.batch_norm(b.convolution(y, 8, 3, 1, 1, false, "conv2"), "bn2");
         y = b.relu(b.add(y, x, "add"), "relu_out");
         int z = b.batch_norm(b.convolution(y, 8, 1, 1, 0, false, "proj"), "proj_bn");
         int w = b.batch_norm(b.convolution(y, 8, 3, 1, 1, false, "conv3"), "bn3");
         y = b.relu(b.add(w, z, "add2"), "relu_out2");
         x = b.avg_pool(y, 2, 2, 0, false, "pool");
         x = b.flatten(x, "flatten");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"fully_connected",
       [] {
         NetworkBuilder b("tiny-fully-connected", {4, 3, 3});
         int x = b.flatten(b.input(), "flatten");
         x = b.relu(b.fully_connected(x, 24, true, "fc1"), "relu");
         x = b.fully_connected(x, 16, false, "fc2");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
      {"fully_connected_spatial",  // fc straight after a 4x4 feature map: NHWC permutes the weights
       [] {
         NetworkBuilder b("tiny-fc-spatial", {3, 8, 8});
         int x = b.convolution(b.input(), 6, 3, 2, 1, true, "conv");
         x = b.flatten(x, "flatten");
         return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
       }},
  };
}

}  // namespace crossbench::tiny
