// OverFeat "fast" (Sermanet et al. 2014, table 1): input 231, no padding on conv1
// and conv2, 2x2 max-pools, fc 3072-4096-1000; dropout before fc6 and fc7.
#include "definitions.hpp"

namespace crossbench::definitions {

Network overfeat() {
  NetworkBuilder b("overfeat", {3, 231, 231});
  int x = b.convolution(b.input(), 96, 11, 4, 0, true, "conv1");  // 96x56x56
  x = b.relu(x, "relu1");
  x = b.max_pool(x, 2, 2, 0, false, "pool1");
  x = b.convolution(x, 256, 5, 1, 0, true, "conv2");  // 256x24x24
  x = b.relu(x, "relu2");
  x = b.max_pool(x, 2, 2, 0, false, "pool2");
  x = b.convolution(x, 512, 3, 1, 1, true, "conv3");
  x = b.relu(x, "relu3");
  x = b.convolution(x, 1024, 3, 1, 1, true, "conv4");
  x = b.relu(x, "relu4");
  x = b.convolution(x, 1024, 3, 1, 1, true, "conv5");
  x = b.relu(x, "relu5");
  x = b.max_pool(x, 2, 2, 0, false, "pool5");  // 1024x6x6
  x = b.flatten(x, "flatten");
  x = b.dropout(x, 0.5, "drop6");
  x = b.fully_connected(x, 3072, true, "fc6");
  x = b.relu(x, "relu6");
  x = b.dropout(x, 0.5, "drop7");
  x = b.fully_connected(x, 4096, true, "fc7");
  x = b.relu(x, "relu7");
  x = b.fully_connected(x, kImageNetClasses, true, "fc8");
  return b.finish_with_loss(x);
}

}  // namespace crossbench::definitions
