// AlexNet, "one weird trick" variant (Krizhevsky 2014) as torchvision defines it.
// torchvision's adaptive 6x6 average pool is the identity at input 224 and is left out.
#include "definitions.hpp"

namespace crossbench::definitions {

Network alexnet() {
  NetworkBuilder b("alexnet", {3, 224, 224});
  int x = b.convolution(b.input(), 64, 11, 4, 2, true, "conv1");
  x = b.relu(x, "relu1");
  x = b.max_pool(x, 3, 2, 0, false, "pool1");
  x = b.convolution(x, 192, 5, 1, 2, true, "conv2");
  x = b.relu(x, "relu2");
  x = b.max_pool(x, 3, 2, 0, false, "pool2");
  x = b.convolution(x, 384, 3, 1, 1, true, "conv3");
  x = b.relu(x, "relu3");
  x = b.convolution(x, 256, 3, 1, 1, true, "conv4");
  x = b.relu(x, "relu4");
  x = b.convolution(x, 256, 3, 1, 1, true, "conv5");
  x = b.relu(x, "relu5");
  x = b.max_pool(x, 3, 2, 0, false, "pool5");  // 256x6x6
  x = b.flatten(x, "flatten");
  x = b.dropout(x, 0.5, "drop6");
  x = b.fully_connected(x, 4096, true, "fc6");
  x = b.relu(x, "relu6");
  x = b.dropout(x, 0.5, "drop7");
  x = b.fully_connected(x, 4096, true, "fc7");
  x = b.relu(x, "relu7");
  x = b.fully_connected(x, kImageNetClasses, true, "fc8");
  return b.finish_with_loss(x);
}

}  // namespace crossbench::definitions
