// VGG configurations A, D and E (Simonyan and Zisserman 2015) without batch-norm,
// as torchvision's vgg11, vgg16, vgg19. torchvision's adaptive 7x7 average pool is
// the identity at input 224 and is left out.
#include <array>
#include <string>

#include "crossbench/error.hpp"
#include "definitions.hpp"

namespace crossbench::definitions {
namespace {

// Convolutions per block (each block ends with a 2x2 max-pool); widths 64, 128, 256, 512, 512.
std::array<int, 5> convolutions_per_block(int depth) {
  switch (depth) {
    case 11: return {1, 1, 2, 2, 2};  // A
    case 16: return {2, 2, 3, 3, 3};  // D
    case 19: return {2, 2, 4, 4, 4};  // E
    default: throw Error("vgg: no configuration of depth " + std::to_string(depth) + " (11, 16 or 19)");
  }
}

}  // namespace

Network vgg(int depth) {
  constexpr std::array<std::int64_t, 5> kBlockWidths{64, 128, 256, 512, 512};
  const std::array<int, 5> counts = convolutions_per_block(depth);
  NetworkBuilder b("vgg" + std::to_string(depth), {3, 224, 224});
  int x = b.input();
  for (std::size_t block = 0; block < counts.size(); ++block) {
    const std::string number = std::to_string(block + 1);
    for (int i = 1; i <= counts[block]; ++i) {
      const std::string suffix = number + "_" + std::to_string(i);
      x = b.convolution(x, kBlockWidths[block], 3, 1, 1, true, "conv" + suffix);
      x = b.relu(x, "relu" + suffix);
    }
    x = b.max_pool(x, 2, 2, 0, false, "pool" + number);
  }
  x = b.flatten(x, "flatten");  // 512x7x7 → 25088
  x = b.fully_connected(x, 4096, true, "fc6");
  x = b.relu(x, "relu6");
  x = b.dropout(x, 0.5, "drop6");
  x = b.fully_connected(x, 4096, true, "fc7");
  x = b.relu(x, "relu7");
  x = b.dropout(x, 0.5, "drop7");
  x = b.fully_connected(x, kImageNetClasses, true, "fc8");
  return b.finish_with_loss(x);
}

}  // namespace crossbench::definitions
