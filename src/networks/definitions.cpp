// The registry of networks: names in DESIGN.md's order, and make_network.
#include <functional>
#include <utility>

#include "crossbench/error.hpp"
#include "definitions.hpp"

namespace crossbench {
namespace {

using Factory = std::function<Network()>;

const std::vector<std::pair<std::string, Factory>>& factories() {
  static const std::vector<std::pair<std::string, Factory>> table{
      {"alexnet", definitions::alexnet},
      {"overfeat", definitions::overfeat},
      {"vgg11", [] { return definitions::vgg(11); }},
      {"vgg16", [] { return definitions::vgg(16); }},
      {"vgg19", [] { return definitions::vgg(19); }},
      {"googlenet", definitions::googlenet},
      {"resnet50", [] { return definitions::resnet(50); }},
      {"resnet101", [] { return definitions::resnet(101); }},
      {"resnet152", [] { return definitions::resnet(152); }},
  };
  return table;
}

}  // namespace

const std::vector<std::string>& network_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list;
    for (const auto& [name, factory] : factories()) list.push_back(name);
    return list;
  }();
  return names;
}

Network make_network(std::string_view name) {
  for (const auto& [known, factory] : factories())
    if (known == name) return factory();
  std::string valid;
  for (const std::string& known : network_names()) valid += (valid.empty() ? "" : ", ") + known;
  throw UsageError("unknown network '" + std::string(name) + "'; valid networks: " + valid);
}

}  // namespace crossbench
