// GoogLeNet / Inception v1 (Szegedy et al. 2014, table 1) as Caffe's bvlc_googlenet:
// real 5x5 convolutions (torchvision uses 3x3 there), ceil-mode max-pools, LRN after
// pool1 and conv2, ReLU after every convolution, biases on, no batch-norm, no
// auxiliary classifiers. Layer names follow bvlc_googlenet's prototxt.
#include <string>

#include "definitions.hpp"

namespace crossbench::definitions {
namespace {

// Output channels of one inception module's branches (table 1 of the paper).
struct InceptionWidths {
  std::int64_t branch_1x1;
  std::int64_t reduce_3x3, branch_3x3;
  std::int64_t reduce_5x5, branch_5x5;
  std::int64_t pool_projection;
};

int conv_relu(NetworkBuilder& b, int from, std::int64_t channels, std::int64_t kernel, std::int64_t stride,
              std::int64_t padding, const std::string& prefix, const std::string& suffix) {
  const int conv = b.convolution(from, channels, kernel, stride, padding, true, prefix + "/" + suffix);
  return b.relu(conv, prefix + "/relu_" + suffix);
}

int inception(NetworkBuilder& b, int from, const std::string& name, const InceptionWidths& w) {
  const int branch_1x1 = conv_relu(b, from, w.branch_1x1, 1, 1, 0, name, "1x1");
  int branch_3x3 = conv_relu(b, from, w.reduce_3x3, 1, 1, 0, name, "3x3_reduce");
  branch_3x3 = conv_relu(b, branch_3x3, w.branch_3x3, 3, 1, 1, name, "3x3");
  int branch_5x5 = conv_relu(b, from, w.reduce_5x5, 1, 1, 0, name, "5x5_reduce");
  branch_5x5 = conv_relu(b, branch_5x5, w.branch_5x5, 5, 1, 2, name, "5x5");
  int branch_pool = b.max_pool(from, 3, 1, 1, false, name + "/pool");
  branch_pool = conv_relu(b, branch_pool, w.pool_projection, 1, 1, 0, name, "pool_proj");
  return b.concat({branch_1x1, branch_3x3, branch_5x5, branch_pool}, name + "/output");
}

}  // namespace

Network googlenet() {
  // LRN of DESIGN.md: size 5, alpha 1e-4, beta 0.75, k 1 (Caffe's convention: alpha divided by size).
  constexpr std::int64_t kLrnSize = 5;
  constexpr double kLrnAlpha = 1e-4, kLrnBeta = 0.75, kLrnK = 1.0;

  NetworkBuilder b("googlenet", {3, 224, 224});
  int x = conv_relu(b, b.input(), 64, 7, 2, 3, "conv1", "7x7_s2");  // 64x112x112
  x = b.max_pool(x, 3, 2, 0, true, "pool1/3x3_s2");                  // 64x56x56
  x = b.lrn(x, kLrnSize, kLrnAlpha, kLrnBeta, kLrnK, "pool1/norm1");
  x = conv_relu(b, x, 64, 1, 1, 0, "conv2", "3x3_reduce");
  x = conv_relu(b, x, 192, 3, 1, 1, "conv2", "3x3");
  x = b.lrn(x, kLrnSize, kLrnAlpha, kLrnBeta, kLrnK, "conv2/norm2");
  x = b.max_pool(x, 3, 2, 0, true, "pool2/3x3_s2");  // 192x28x28

  x = inception(b, x, "inception_3a", {64, 96, 128, 16, 32, 32});     // 256
  x = inception(b, x, "inception_3b", {128, 128, 192, 32, 96, 64});   // 480
  x = b.max_pool(x, 3, 2, 0, true, "pool3/3x3_s2");                   // 480x14x14
  x = inception(b, x, "inception_4a", {192, 96, 208, 16, 48, 64});    // 512
  x = inception(b, x, "inception_4b", {160, 112, 224, 24, 64, 64});   // 512
  x = inception(b, x, "inception_4c", {128, 128, 256, 24, 64, 64});   // 512
  x = inception(b, x, "inception_4d", {112, 144, 288, 32, 64, 64});   // 528
  x = inception(b, x, "inception_4e", {256, 160, 320, 32, 128, 128}); // 832
  x = b.max_pool(x, 3, 2, 0, true, "pool4/3x3_s2");                   // 832x7x7
  x = inception(b, x, "inception_5a", {256, 160, 320, 32, 128, 128}); // 832
  x = inception(b, x, "inception_5b", {384, 192, 384, 48, 128, 128}); // 1024x7x7

  x = b.avg_pool(x, 7, 1, 0, false, "pool5/7x7_s1");  // 1024x1x1
  x = b.flatten(x, "flatten");
  x = b.dropout(x, 0.4, "pool5/drop_7x7_s1");
  x = b.fully_connected(x, kImageNetClasses, true, "loss3/classifier");
  return b.finish_with_loss(x);
}

}  // namespace crossbench::definitions
