// The network of the data-parallel tests: every per-image layer kind that a
// shard must reproduce exactly (convolution, ReLU, LRN, pooling, dropout,
// fully-connected), and no batch-norm, whose statistics are per shard by
// design (as in PyTorch DDP without SyncBatchNorm), so that one data-parallel
// step equals one step on the concatenated batch.
#pragma once

#include "crossbench/network.hpp"

namespace crossbench::data_parallel_test {

inline Network network() {
  NetworkBuilder b("dp-test", {3, 12, 12});
  int x = b.convolution(b.input(), 8, 3, 1, 1, true, "conv1");
  x = b.relu(x, "relu1");
  x = b.lrn(x, 5, 0.5, 0.75, 2.0, "lrn1");
  x = b.max_pool(x, 2, 2, 0, false, "pool1");
  x = b.convolution(x, 12, 3, 1, 1, true, "conv2");
  x = b.relu(x, "relu2");
  x = b.flatten(x, "flatten");
  x = b.dropout(x, 0.5, "drop1");
  x = b.fully_connected(x, 32, true, "fc1");
  x = b.relu(x, "relu_fc1");
  x = b.dropout(x, 0.3, "drop2");
  return b.finish_with_loss(b.fully_connected(x, 10, true, "fc2"));
}

}  // namespace crossbench::data_parallel_test
