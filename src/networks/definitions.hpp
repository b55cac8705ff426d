// The network families of DESIGN.md (internal to src/networks; the public entry
// point is make_network in network.hpp). Each takes the ImageNet classes: 1000.
#pragma once

#include "crossbench/network.hpp"

namespace crossbench::definitions {

inline constexpr std::int64_t kImageNetClasses = 1000;

Network alexnet();
Network overfeat();
Network vgg(int depth);      // 11, 16 or 19 (configurations A, D, E)
Network googlenet();
Network resnet(int depth);   // 50, 101 or 152

}  // namespace crossbench::definitions
