// ResNet v1.5 (He et al. 2016 with the stride on the 3x3 convolution of the
// bottleneck), as torchvision's resnet50/101/152: convolutions without bias, each
// followed by batch-norm; a 1x1 convolution + batch-norm projection on the first
// block of every stage. Layer names follow torchvision's modules.
#include <array>
#include <string>

#include "crossbench/error.hpp"
#include "definitions.hpp"

namespace crossbench::definitions {
namespace {

constexpr std::int64_t kBottleneckExpansion = 4;

std::array<int, 4> blocks_per_stage(int depth) {
  switch (depth) {
    case 50: return {3, 4, 6, 3};
    case 101: return {3, 4, 23, 3};
    case 152: return {3, 8, 36, 3};
    default: throw Error("resnet: no configuration of depth " + std::to_string(depth) + " (50, 101 or 152)");
  }
}

int conv_bn(NetworkBuilder& b, int from, std::int64_t channels, std::int64_t kernel, std::int64_t stride,
            const std::string& conv_name, const std::string& bn_name) {
  const int conv = b.convolution(from, channels, kernel, stride, kernel / 2, false, conv_name);
  return b.batch_norm(conv, bn_name);
}

// One bottleneck block: 1x1 (width) → 3x3 (width, stride) → 1x1 (4 × width), plus the shortcut.
int bottleneck(NetworkBuilder& b, int from, std::int64_t width, std::int64_t stride, bool project,
               const std::string& name) {
  int x = conv_bn(b, from, width, 1, 1, name + ".conv1", name + ".bn1");
  x = b.relu(x, name + ".relu1");
  x = conv_bn(b, x, width, 3, stride, name + ".conv2", name + ".bn2");
  x = b.relu(x, name + ".relu2");
  x = conv_bn(b, x, width * kBottleneckExpansion, 1, 1, name + ".conv3", name + ".bn3");
  int shortcut = from;
  if (project)
    shortcut = conv_bn(b, from, width * kBottleneckExpansion, 1, stride, name + ".downsample.conv",
                       name + ".downsample.bn");
  x = b.add(x, shortcut, name + ".add");
  return b.relu(x, name + ".relu3");
}

}  // namespace

Network resnet(int depth) {
  constexpr std::array<std::int64_t, 4> kStageWidths{64, 128, 256, 512};
  const std::array<int, 4> blocks = blocks_per_stage(depth);
  NetworkBuilder b("resnet" + std::to_string(depth), {3, 224, 224});
  int x = conv_bn(b, b.input(), 64, 7, 2, "conv1", "bn1");  // 64x112x112
  x = b.relu(x, "relu");
  x = b.max_pool(x, 3, 2, 1, false, "maxpool");  // 64x56x56
  for (std::size_t stage = 0; stage < blocks.size(); ++stage) {
    for (int block = 0; block < blocks[stage]; ++block) {
      const bool first = block == 0;
      const std::int64_t stride = (first && stage > 0) ? 2 : 1;
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(block);
      x = bottleneck(b, x, kStageWidths[stage], stride, first, name);
    }
  }
  x = b.avg_pool(x, 7, 1, 0, false, "avgpool");  // 2048x1x1
  x = b.flatten(x, "flatten");
  x = b.fully_connected(x, kImageNetClasses, true, "fc");
  return b.finish_with_loss(x);
}

}  // namespace crossbench::definitions
