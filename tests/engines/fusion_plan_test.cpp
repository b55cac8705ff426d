// The kit's fusion pass (src/engines/kit/fusion.hpp) on every real network:
// groups are legal chains (one reader for every intermediate output), no
// layer is in two groups, every relu-ended chain is proposed, the counts per
// kind match the networks' structure, refusals carry the engine's reason and
// fall back to the next-longest chain, and `decisions` prints what it returned.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "crossbench/network.hpp"
#include "engines/kit/fusion.hpp"

namespace crossbench::kit {
namespace {

const CanLower accept_all = [](const FusedGroup&) -> std::optional<std::string> { return std::nullopt; };

std::vector<int> readers_of(const Network& network) {
  std::vector<int> readers(network.layers().size(), 0);
  for (const Layer& layer : network.layers())
    for (int from : layer.inputs) ++readers[static_cast<std::size_t>(from)];
  return readers;
}

LayerKind kind_of(const Network& network, int index) { return network.layers()[static_cast<std::size_t>(index)].kind; }

TEST(FusionPlan, GroupsAreLegalChainsAndDisjoint) {
  for (const std::string& name : network_names())
    for (const bool training : {false, true}) {
      SCOPED_TRACE(name + (training ? " training" : " inference"));
      const Network network = make_network(name);
      const FusionPlan plan = plan_fusions(network, training, accept_all);
      const std::vector<int> readers = readers_of(network);
      std::set<int> seen;
      for (const FusedGroup& g : plan.groups()) {
        ASSERT_GE(g.layers.size(), 2u);
        for (std::size_t i = 0; i < g.layers.size(); ++i) {
          EXPECT_TRUE(seen.insert(g.layers[i]).second) << "layer " << g.layers[i] << " in two groups";
          EXPECT_EQ(plan.group_of(g.layers[i]), &g);
          if (i + 1 < g.layers.size()) {
            // Every output but the last is read by the next layer of the chain alone.
            EXPECT_EQ(readers[static_cast<std::size_t>(g.layers[i])], 1);
            const auto& next_inputs = network.layers()[static_cast<std::size_t>(g.layers[i + 1])].inputs;
            EXPECT_NE(std::find(next_inputs.begin(), next_inputs.end(), g.layers[i]), next_inputs.end());
          }
        }
        if (g.relu >= 0) {
          // The relu ends the chain, or is followed by the max pool of conv_bias_relu_pool.
          EXPECT_EQ(g.layers.back(), g.kind == FusedKind::conv_bias_relu_pool ? g.pool : g.relu);
          EXPECT_EQ(kind_of(network, g.relu), LayerKind::relu);
        }
        switch (g.kind) {
          case FusedKind::conv_bias_relu: EXPECT_EQ(kind_of(network, g.anchor()), LayerKind::convolution); break;
          case FusedKind::fc_bias_relu: EXPECT_EQ(kind_of(network, g.anchor()), LayerKind::fully_connected); break;
          case FusedKind::conv_bn_relu:
            EXPECT_FALSE(training);
            EXPECT_EQ(kind_of(network, g.anchor()), LayerKind::convolution);
            EXPECT_EQ(kind_of(network, g.batch_norm), LayerKind::batch_norm);
            break;
          case FusedKind::bn_relu: EXPECT_TRUE(training); EXPECT_EQ(kind_of(network, g.anchor()), LayerKind::batch_norm); break;
          case FusedKind::bn_add_relu: {
            EXPECT_TRUE(training);
            EXPECT_EQ(kind_of(network, g.batch_norm), LayerKind::batch_norm);
            EXPECT_EQ(kind_of(network, g.add), LayerKind::add);
            const auto& add_inputs = network.layers()[static_cast<std::size_t>(g.add)].inputs;
            EXPECT_NE(std::find(add_inputs.begin(), add_inputs.end(), g.residual), add_inputs.end());
            EXPECT_NE(g.residual, g.batch_norm);
            break;
          }
          case FusedKind::add_relu: EXPECT_EQ(kind_of(network, g.anchor()), LayerKind::add); break;
          case FusedKind::conv_bn_add_relu: {
            EXPECT_FALSE(training);
            EXPECT_EQ(kind_of(network, g.anchor()), LayerKind::convolution);
            EXPECT_EQ(kind_of(network, g.batch_norm), LayerKind::batch_norm);
            EXPECT_EQ(kind_of(network, g.add), LayerKind::add);
            EXPECT_EQ(g.layers, (std::vector<int>{g.anchor(), g.batch_norm, g.add, g.relu}));
            const auto& add_inputs = network.layers()[static_cast<std::size_t>(g.add)].inputs;
            EXPECT_NE(std::find(add_inputs.begin(), add_inputs.end(), g.residual), add_inputs.end());
            EXPECT_NE(g.residual, g.batch_norm);
            // The anchor reads the residual: it exists before the convolution runs.
            EXPECT_LT(g.residual, g.anchor());
            break;
          }
          case FusedKind::conv_bias_relu_pool:
            EXPECT_TRUE(training);
            ASSERT_EQ(g.layers.size(), 3u);
            EXPECT_EQ(kind_of(network, g.anchor()), LayerKind::convolution);
            EXPECT_EQ(g.layers[1], g.relu);
            EXPECT_EQ(kind_of(network, g.pool), LayerKind::max_pool);
            break;
        }
      }
      EXPECT_TRUE(plan.refused().empty());
    }
}

// Every relu whose input is a convolution, fully-connected, batch-norm or add read by it alone is in a group.
TEST(FusionPlan, EveryFusableReluIsClaimed) {
  for (const std::string& name : network_names())
    for (const bool training : {false, true}) {
      SCOPED_TRACE(name);
      const Network network = make_network(name);
      const FusionPlan plan = plan_fusions(network, training, accept_all);
      const std::vector<int> readers = readers_of(network);
      for (int index = 1; index < static_cast<int>(network.layers().size()); ++index) {
        if (kind_of(network, index) != LayerKind::relu) continue;
        const int from = network.layers()[static_cast<std::size_t>(index)].inputs.front();
        const LayerKind k = kind_of(network, from);
        const bool fusable = readers[static_cast<std::size_t>(from)] == 1 &&
                             (k == LayerKind::convolution || k == LayerKind::fully_connected || k == LayerKind::add ||
                              k == LayerKind::batch_norm);
        // An inference batch-norm fuses only with a convolution before it that it alone reads.
        const bool inference_bn_without_conv =
            !training && k == LayerKind::batch_norm &&
            !(kind_of(network, network.layers()[static_cast<std::size_t>(from)].inputs.front()) ==
                  LayerKind::convolution &&
              readers[static_cast<std::size_t>(network.layers()[static_cast<std::size_t>(from)].inputs.front())] == 1);
        EXPECT_EQ(plan.group_of(index) != nullptr, fusable && !inference_bn_without_conv) << "relu " << index;
      }
    }
}

TEST(FusionPlan, CountsFollowTheNetworksStructure) {
  const Network resnet50 = make_network("resnet50");
  const FusionPlan training = plan_fusions(resnet50, true, accept_all);
  // 16 bottlenecks: two bn+relu inside each, bn+add+relu at each end; the stem's bn+relu.
  EXPECT_EQ(training.count(FusedKind::bn_relu), 2 * 16 + 1);
  EXPECT_EQ(training.count(FusedKind::bn_add_relu), 16);
  EXPECT_EQ(training.count(FusedKind::conv_bias_relu), 0);
  const FusionPlan inference = plan_fusions(resnet50, false, accept_all);
  // Every one of the 53 batch-norms folds into its convolution: 16 of them with the block's residual add and
  // relu (conv_bn_add_relu), 33 with the relu after them, and the 4 projection blocks' conv3 without one
  // (their projection's convolution takes the add: it runs after conv3).
  EXPECT_EQ(inference.count(FusedKind::conv_bn_add_relu), 16);
  EXPECT_EQ(inference.count(FusedKind::conv_bn_relu), 37);
  EXPECT_EQ(inference.count(FusedKind::add_relu), 0);
  for (const auto& [name, blocks] : {std::pair{"resnet101", 33}, std::pair{"resnet152", 50}}) {
    const FusionPlan deeper = plan_fusions(make_network(name), false, accept_all);
    EXPECT_EQ(deeper.count(FusedKind::conv_bn_add_relu), blocks) << name;
    EXPECT_EQ(deeper.count(FusedKind::add_relu), 0) << name;
    const FusionPlan trained = plan_fusions(make_network(name), true, accept_all);
    EXPECT_EQ(trained.count(FusedKind::conv_bn_add_relu), 0) << name << ": inference only";
    EXPECT_EQ(trained.count(FusedKind::bn_add_relu), blocks) << name;
  }

  // Training: the relu before each of VGG-11's five max pools fuses with its convolution and the pool.
  const Network vgg11 = make_network("vgg11");
  const FusionPlan vgg = plan_fusions(vgg11, true, accept_all);
  EXPECT_EQ(vgg.count(FusedKind::conv_bias_relu_pool), 5);
  EXPECT_EQ(vgg.count(FusedKind::conv_bias_relu), 3);
  EXPECT_EQ(vgg.count(FusedKind::fc_bias_relu), 2);
  const FusionPlan vgg_inference = plan_fusions(vgg11, false, accept_all);
  EXPECT_EQ(vgg_inference.count(FusedKind::conv_bias_relu), 8);
  EXPECT_EQ(vgg_inference.count(FusedKind::conv_bias_relu_pool), 0);
  const Network alexnet = make_network("alexnet");
  const FusionPlan alex = plan_fusions(alexnet, true, accept_all);
  EXPECT_EQ(alex.count(FusedKind::conv_bias_relu_pool), 3);  // pool1, pool2, pool5 (3x3 s2: overlapping windows)
  EXPECT_EQ(alex.count(FusedKind::conv_bias_relu), 2);
  const Network googlenet = make_network("googlenet");
  EXPECT_EQ(plan_fusions(googlenet, false, accept_all).count(FusedKind::conv_bias_relu), 57);
  // Training: conv1's relu before pool1; conv2's relu is read by an LRN, the inception pools by concats.
  const FusionPlan googlenet_training = plan_fusions(googlenet, true, accept_all);
  EXPECT_EQ(googlenet_training.count(FusedKind::conv_bias_relu_pool), 1);
  EXPECT_EQ(googlenet_training.count(FusedKind::conv_bias_relu), 56);
}

// An engine that refuses conv_bias_relu_pool gets conv_bias_relu for the same
// relus, and the pool stays its own layer.
TEST(FusionPlan, ReluPoolRefusedFallsBackToConvBiasRelu) {
  const Network vgg11 = make_network("vgg11");
  const FusionPlan plan = plan_fusions(vgg11, true, [](const FusedGroup& g) -> std::optional<std::string> {
    if (g.kind == FusedKind::conv_bias_relu_pool) return "no relu mask";
    return std::nullopt;
  });
  EXPECT_EQ(plan.count(FusedKind::conv_bias_relu_pool), 0);
  EXPECT_EQ(plan.count(FusedKind::conv_bias_relu), 8);
  ASSERT_EQ(plan.refused().size(), 5u);
  for (const FusionRefusal& r : plan.refused()) {
    EXPECT_EQ(plan.group_of(r.group.pool), nullptr);
    EXPECT_TRUE(plan.in(r.group.relu, FusedKind::conv_bias_relu));
  }
  EXPECT_EQ(plan.decisions(vgg11),
            "fusions=conv_bias_relu:8,fc_bias_relu:2;refused=conv_bias_relu_pool[conv1_1+relu1_1+pool1](no relu mask) x5");
}

TEST(FusionPlan, RefusalsAreRecordedWithTheReasonAndFallBack) {
  const Network resnet50 = make_network("resnet50");
  const CanLower no_batch_norm_groups = [](const FusedGroup& g) -> std::optional<std::string> {
    if (g.kind == FusedKind::bn_add_relu || g.kind == FusedKind::bn_relu) return "no kernel for it";
    return std::nullopt;
  };
  const FusionPlan plan = plan_fusions(resnet50, true, no_batch_norm_groups);
  EXPECT_EQ(plan.count(FusedKind::bn_relu), 0);
  EXPECT_EQ(plan.count(FusedKind::bn_add_relu), 0);
  EXPECT_EQ(plan.count(FusedKind::add_relu), 16);  // the next-longest chain of each block's end
  std::map<FusedKind, int> refused;
  for (const FusionRefusal& r : plan.refused()) {
    EXPECT_EQ(r.reason, "no kernel for it");
    ++refused[r.group.kind];
  }
  EXPECT_EQ(refused[FusedKind::bn_relu], 33);
  EXPECT_EQ(refused[FusedKind::bn_add_relu], 16);
  const std::string text = plan.decisions(resnet50);
  EXPECT_NE(text.find("fusions=add_relu:16"), std::string::npos) << text;
  EXPECT_NE(text.find("refused=bn_relu["), std::string::npos) << text;
  EXPECT_NE(text.find("](no kernel for it) x33"), std::string::npos) << text;
  EXPECT_NE(text.find("bn_add_relu["), std::string::npos) << text;
  EXPECT_NE(text.find("](no kernel for it) x16"), std::string::npos) << text;
}

// The residual add's convolution: conv3 in an identity block (the residual is the block's input), the
// projection's convolution where the block has one (conv3 runs before it, so its output is the residual).
TEST(FusionPlan, ConvBatchNormAddReluAnchorsTheConvolutionAfterTheResidual) {
  const Network resnet50 = make_network("resnet50");
  const FusionPlan plan = plan_fusions(resnet50, false, accept_all);
  const auto index_of = [&](const std::string& name) {
    for (std::size_t i = 0; i < resnet50.layers().size(); ++i)
      if (resnet50.layers()[i].name == name) return static_cast<int>(i);
    ADD_FAILURE() << "no layer " << name;
    return -1;
  };
  const FusedGroup* identity = plan.group_of(index_of("layer1.1.relu3"));
  ASSERT_NE(identity, nullptr);
  EXPECT_EQ(identity->kind, FusedKind::conv_bn_add_relu);
  EXPECT_EQ(identity->anchor(), index_of("layer1.1.conv3"));
  EXPECT_EQ(identity->residual, index_of("layer1.0.relu3"));
  const FusedGroup* projected = plan.group_of(index_of("layer2.0.relu3"));
  ASSERT_NE(projected, nullptr);
  EXPECT_EQ(projected->kind, FusedKind::conv_bn_add_relu);
  EXPECT_EQ(projected->anchor(), index_of("layer2.0.downsample.conv"));
  EXPECT_EQ(projected->batch_norm, index_of("layer2.0.downsample.bn"));
  EXPECT_EQ(projected->residual, index_of("layer2.0.bn3"));
  // conv3 + bn3 of that block still fold (no relu after them).
  const FusedGroup* conv3 = plan.group_of(index_of("layer2.0.conv3"));
  ASSERT_NE(conv3, nullptr);
  EXPECT_EQ(conv3->kind, FusedKind::conv_bn_relu);
  EXPECT_EQ(conv3->relu, -1);
}

// Refused, the next-longest chain of each block's end is proposed: add_relu, and every batch-norm folds alone.
TEST(FusionPlan, RefusedConvBatchNormAddReluFallsBackToAddRelu) {
  const Network resnet50 = make_network("resnet50");
  const FusionPlan plan = plan_fusions(resnet50, false, [](const FusedGroup& g) -> std::optional<std::string> {
    if (g.kind == FusedKind::conv_bn_add_relu) return "no fused graph";
    return std::nullopt;
  });
  EXPECT_EQ(plan.count(FusedKind::conv_bn_add_relu), 0);
  EXPECT_EQ(plan.count(FusedKind::add_relu), 16);
  EXPECT_EQ(plan.count(FusedKind::conv_bn_relu), 53);
  EXPECT_EQ(plan.refused().size(), 16u);
  EXPECT_EQ(plan.decisions(resnet50),
            "fusions=add_relu:16,conv_bn_relu:53;refused=conv_bn_add_relu[layer1.0.downsample.conv+"
            "layer1.0.downsample.bn+layer1.0.add+layer1.0.relu3](no fused graph) x16");
}

TEST(FusionPlan, DecisionsNameEveryTakenKindWithItsCount) {
  const Network vgg11 = make_network("vgg11");
  const FusionPlan plan = plan_fusions(vgg11, false, accept_all);
  EXPECT_EQ(plan.decisions(vgg11), "fusions=conv_bias_relu:8,fc_bias_relu:2");
  EXPECT_EQ(plan_fusions(vgg11, true, accept_all).decisions(vgg11),
            "fusions=conv_bias_relu:3,conv_bias_relu_pool:5,fc_bias_relu:2");
  const FusionPlan none = plan_fusions(vgg11, false, [](const FusedGroup&) -> std::optional<std::string> {
    return "off";
  });
  EXPECT_EQ(none.groups().size(), 0u);
  EXPECT_EQ(none.refused().size(), 10u);
  EXPECT_EQ(none.decisions(vgg11).rfind("fusions=none;refused=conv_bias_relu[", 0), 0u) << none.decisions(vgg11);
}

}  // namespace
}  // namespace crossbench::kit
