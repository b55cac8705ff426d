// The oneDNN engine against a plain double-precision reference
// (reference_network.cpp): every layer kind, forward and backward, on tiny
// networks; a small residual/inception graph that learns with SGD; refusal of
// cells that do not fit in memory; every real network at batch 1; every fused
// group (kit/fusion.hpp) against the unfused graph, element by element.
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "crossbench/engine.hpp"
#include "crossbench/error.hpp"
#include "engines/kit/fusion.hpp"
#include "engines/onednn/memory_pool.hpp"
#include "engines/onednn/onednn_engine.hpp"
#include "engines/onednn/onednn_session.hpp"
#include "reference_network.hpp"

namespace crossbench {
namespace {

constexpr std::uint64_t kSeed = 7;
using Vec = std::vector<double>;

EngineConfig test_config(Update update = Update::none, double learning_rate = 0.01) {
  EngineConfig config;
  config.seed = kSeed;
  config.threads = 2;
  config.update = update;
  config.learning_rate = learning_rate;
  return config;
}

CellSpec cell_of(const Network& network, std::int64_t batch, Phase phase, Precision precision = Precision::fp32) {
  CellSpec cell;
  cell.engine = "onednn";
  cell.network = network.name();
  cell.batch = batch;
  cell.phase = phase;
  cell.precision = precision;
  return cell;
}

// max |got - want| <= tolerance * max(max |want|, floor): errors relative to the tensor's scale.
void expect_close(const std::vector<float>& got, const Vec& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1e-2, worst = 0;  // the floor: exact zeros (a bias before batch-norm) come out as rounding noise
  std::size_t at = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(error <= worst)) {
      worst = error;
      at = i;
    }
  }
  EXPECT_LE(worst, tolerance * scale) << what << ": worst element " << at << " is " << got[at] << ", reference "
                                      << want[at] << " (scale " << scale << ")";
}

double norm(const Vec& v) {
  double sum = 0;
  for (double x : v) sum += x * x;
  return std::sqrt(sum);
}

std::string slot_name(synthetic::Slot slot) {
  switch (slot) {
    case synthetic::Slot::weight: return "weight";
    case synthetic::Slot::bias: return "bias";
    case synthetic::Slot::bn_gamma: return "gamma";
    case synthetic::Slot::bn_beta: return "beta";
    default: return "?";
  }
}

// Runs check() on the network and compares it with the reference: every
// layer's output and output gradient and every parameter gradient (session
// that keeps every tensor), then the loss and gradient norms of the default
// session (buffer reuse and in-place ops on), before and after a step.
void compare_with_reference(const Network& network, std::int64_t batch, Phase phase, double tolerance = 2e-4,
                            Precision precision = Precision::fp32) {
  SCOPED_TRACE(network.name() + " " + std::string(to_string(phase)) + " " + std::string(to_string(precision)));
  const bool training = phase == Phase::training;
  const CellSpec cell = cell_of(network, batch, phase, precision);
  const EngineConfig config = test_config();
  const testing::ReferenceResult ref = testing::run_reference(network, batch, kSeed, training);
  const int loss = static_cast<int>(network.layers().size()) - 1;

  onednn::OnednnSession exact(network, cell, config, onednn::GraphOptions{false, false});
  const OutputCheck result = exact.check();
  EXPECT_TRUE(result.finite);
  EXPECT_NEAR(result.loss, ref.loss, tolerance * std::max(1.0, std::abs(ref.loss)));
  EXPECT_NEAR(result.logits_checksum, ref.logits_checksum, tolerance * std::max(1.0, norm(ref.outputs[static_cast<std::size_t>(network.logits_layer())]) * std::sqrt(double(batch))));
  for (int l = 0; l < loss; ++l) {
    // A fused group writes only its last layer's output (checked against the plan).
    const kit::FusedGroup* group = exact.fusions().group_of(l);
    ASSERT_EQ(exact.has_output(l), group == nullptr || group->layers.back() == l) << network.layers()[static_cast<std::size_t>(l)].name;
    if (!exact.has_output(l)) continue;
    expect_close(exact.output(l), ref.outputs[static_cast<std::size_t>(l)], tolerance,
                 "output of " + network.layers()[static_cast<std::size_t>(l)].name);
  }
  if (training) {
    for (int l = 1; l < loss; ++l) {
      // bn_relu's batch-norm backward applies the ReLU's mask itself: y's gradient never exists.
      const kit::FusedGroup* group = exact.fusions().group_of(l);
      const bool fused_away = group != nullptr && group->kind == kit::FusedKind::bn_relu && l == group->batch_norm;
      ASSERT_EQ(exact.has_output_gradient(l), !fused_away) << network.layers()[static_cast<std::size_t>(l)].name;
      if (fused_away) continue;
      expect_close(exact.output_gradient(l), ref.gradients[static_cast<std::size_t>(l)], tolerance,
                   "gradient of " + network.layers()[static_cast<std::size_t>(l)].name);
    }
    ASSERT_EQ(result.gradient_norms.size(), ref.parameters.size());
    for (std::size_t i = 0; i < ref.parameters.size(); ++i) {
      const auto& p = ref.parameters[i];
      const std::string what = network.layers()[static_cast<std::size_t>(p.layer)].name + " " + slot_name(p.slot);
      expect_close(exact.parameter_gradient(p.layer, p.slot), p.gradient, tolerance, what + " gradient");
      EXPECT_NEAR(result.gradient_norms[i], norm(p.gradient), tolerance * std::max(1e-2, norm(p.gradient))) << what;
    }
  } else {
    EXPECT_TRUE(std::isnan(result.gradient_norm));
  }

  onednn::OnednnSession fast(network, cell, config);
  EXPECT_LE(fast.memory().peak_bytes, exact.memory().peak_bytes);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "default session" : "default session after two steps");
    const OutputCheck f = fast.check();
    EXPECT_TRUE(f.finite);
    EXPECT_NEAR(f.loss, result.loss, 1e-6 * std::max(1.0, std::abs(result.loss)));
    EXPECT_NEAR(f.logits_checksum, result.logits_checksum, 1e-5 * std::max(1.0, std::abs(result.logits_checksum)));
    ASSERT_EQ(f.gradient_norms.size(), result.gradient_norms.size());
    for (std::size_t i = 0; i < f.gradient_norms.size(); ++i)
      EXPECT_NEAR(f.gradient_norms[i], result.gradient_norms[i], 1e-5 * std::max(1e-3, result.gradient_norms[i])) << i;
    fast.step();  // no update: the next check() must see the same model and input
    fast.step();
  }
}

void both_phases(const Network& network, std::int64_t batch = 2, double tolerance = 2e-4) {
  compare_with_reference(network, batch, Phase::inference, tolerance);
  compare_with_reference(network, batch, Phase::training, tolerance);
}

// input → conv → <layer under test> → flatten → fc(6) → loss. The first
// convolution gives the tested layer's data gradient a weight to land on.
Network tiny(const std::string& name, TensorShape input, const std::function<int(NetworkBuilder&, int)>& under_test,
             std::int64_t channels = 5) {
  NetworkBuilder b(name, input);
  int x = b.convolution(b.input(), channels, 3, 1, 1, true, "conv0");
  x = under_test(b, x);
  x = b.flatten(x, "flatten");
  x = b.fully_connected(x, 6, true, "fc");
  return b.finish_with_loss(x);
}

// ---- Layer kinds --------------------------------------------------------------

TEST(OnednnLayers, Convolution) {
  both_phases(tiny("conv_3x3_bias", {3, 7, 7}, [](NetworkBuilder& b, int x) { return b.convolution(x, 4, 3, 1, 1, true); }));
  both_phases(tiny("conv_3x3_s2_nobias", {3, 9, 9}, [](NetworkBuilder& b, int x) { return b.convolution(x, 8, 3, 2, 0, false); }));
  both_phases(tiny("conv_5x5_s2_p2", {4, 9, 9}, [](NetworkBuilder& b, int x) { return b.convolution(x, 6, 5, 2, 2, true); }, 8));
  both_phases(tiny("conv_1x1", {3, 6, 6}, [](NetworkBuilder& b, int x) { return b.convolution(x, 16, 1, 1, 0, false); }, 16));
  both_phases(tiny("conv_7x7_s2_p3", {3, 9, 9}, [](NetworkBuilder& b, int x) { return b.convolution(x, 3, 7, 2, 3, true); }));
}

TEST(OnednnLayers, MaxPooling) {
  both_phases(tiny("max_3_2", {3, 8, 8}, [](NetworkBuilder& b, int x) { return b.max_pool(x, 3, 2, 0); }));
  both_phases(tiny("max_3_2_p1", {3, 8, 8}, [](NetworkBuilder& b, int x) { return b.max_pool(x, 3, 2, 1); }));
  both_phases(tiny("max_3_2_ceil", {3, 8, 8}, [](NetworkBuilder& b, int x) { return b.max_pool(x, 3, 2, 0, true); }, 8));
  both_phases(tiny("max_3_1_p1", {3, 6, 6}, [](NetworkBuilder& b, int x) { return b.max_pool(x, 3, 1, 1); }));
}

TEST(OnednnLayers, AveragePooling) {
  both_phases(tiny("avg_3_2_p1", {3, 8, 8}, [](NetworkBuilder& b, int x) { return b.avg_pool(x, 3, 2, 1); }));
  both_phases(tiny("avg_3_2_ceil", {3, 8, 8}, [](NetworkBuilder& b, int x) { return b.avg_pool(x, 3, 2, 0, true); }));
  both_phases(tiny("avg_global", {3, 7, 7}, [](NetworkBuilder& b, int x) { return b.avg_pool(x, 7, 1, 0); }, 8));
}

TEST(OnednnLayers, LocalResponseNormalisation) {
  both_phases(tiny("lrn_googlenet", {3, 6, 6}, [](NetworkBuilder& b, int x) { return b.lrn(x, 5, 1e-4, 0.75, 1.0); }, 8));
  // A strong normalisation, an odd channel count (padded blocked layouts).
  both_phases(tiny("lrn_strong", {3, 5, 5}, [](NetworkBuilder& b, int x) { return b.lrn(x, 3, 0.9, 0.75, 2.0); }, 6));
}

TEST(OnednnLayers, Relu) {
  both_phases(tiny("relu", {3, 6, 6}, [](NetworkBuilder& b, int x) {
    x = b.relu(x);
    x = b.convolution(x, 7, 3, 1, 1, true);
    return b.relu(x);
  }));
}

TEST(OnednnLayers, BatchNorm) {
  both_phases(tiny("batch_norm", {3, 6, 6}, [](NetworkBuilder& b, int x) {
    x = b.batch_norm(x);
    x = b.relu(x);
    x = b.convolution(x, 8, 3, 2, 1, false);
    return b.batch_norm(x);
  }), 4);
}

TEST(OnednnLayers, Dropout) {
  // AlexNet's head: dropout on a flattened and on a fully-connected tensor.
  NetworkBuilder b("dropout_head", {3, 6, 6});
  int x = b.convolution(b.input(), 5, 3, 1, 1, true);
  x = b.relu(x);
  x = b.flatten(x);
  x = b.dropout(x, 0.5);
  x = b.fully_connected(x, 16);
  x = b.relu(x);
  x = b.dropout(x, 0.3);
  x = b.fully_connected(x, 6);
  both_phases(b.finish_with_loss(x));
  // Dropout on a 4D tensor in a blocked layout.
  both_phases(tiny("dropout_4d", {3, 5, 5}, [](NetworkBuilder& b2, int y) {
    y = b2.dropout(y, 0.4);
    return b2.convolution(y, 4, 3, 1, 1, true);
  }));
}

TEST(OnednnLayers, ConcatWithFanOut) {
  // An inception-like fan-out: the conv0 output feeds three branches, whose
  // channel counts (3, 5, 5) do not align with oneDNN's channel blocks.
  both_phases(tiny("concat", {3, 6, 6}, [](NetworkBuilder& b, int x) {
    const int a = b.convolution(x, 3, 1, 1, 0, true);
    const int c = b.convolution(x, 5, 3, 1, 1, true);
    const int p = b.max_pool(x, 3, 1, 1);
    x = b.concat({a, c, p});
    return b.convolution(x, 4, 3, 1, 1, true);
  }));
  // Aligned channels (8 + 16): the sub-memory path without a plain copy.
  both_phases(tiny("concat_aligned", {3, 5, 5}, [](NetworkBuilder& b, int x) {
    const int a = b.convolution(x, 8, 1, 1, 0, true);
    const int c = b.convolution(x, 16, 3, 1, 1, true);
    return b.concat({a, c});
  }, 8));
}

TEST(OnednnLayers, ResidualAdd) {
  both_phases(tiny("residual", {3, 6, 6}, [](NetworkBuilder& b, int x) {
    x = b.relu(x);
    int branch = b.convolution(x, 5, 3, 1, 1, false);
    branch = b.batch_norm(branch);
    x = b.add(branch, x);
    x = b.relu(x);
    // A projection shortcut and a second residual on the same input.
    int other = b.convolution(x, 5, 1, 1, 0, false);
    x = b.add(x, other);
    return b.add(x, x);  // both inputs the same tensor: gradient 2 dy
  }), 3);
}

TEST(OnednnLayers, FullyConnected) {
  // fc straight on a 4D tensor (no flatten), then a 2D chain.
  NetworkBuilder b("fc_chain", {3, 5, 5});
  int x = b.convolution(b.input(), 6, 3, 1, 0, true);
  x = b.fully_connected(x, 12, true);
  x = b.relu(x);
  x = b.fully_connected(x, 9, false);
  x = b.fully_connected(x, 7, true);
  both_phases(b.finish_with_loss(x), 3);
}

// ---- A small residual + inception network ------------------------------------

Network mini_resnet() {
  NetworkBuilder b("mini_resnet", {3, 16, 16});
  int x = b.convolution(b.input(), 8, 3, 1, 1, false, "stem");
  x = b.batch_norm(x, "stem_bn");
  x = b.relu(x, "stem_relu");
  x = b.max_pool(x, 3, 2, 1, false, "stem_pool");  // 8x8x8
  int y = b.convolution(x, 4, 1, 1, 0, false, "b1");
  y = b.batch_norm(y, "b1_bn");
  y = b.relu(y, "b1_relu");
  y = b.convolution(y, 4, 3, 1, 1, false, "b2");
  y = b.batch_norm(y, "b2_bn");
  y = b.relu(y, "b2_relu");
  y = b.convolution(y, 16, 1, 1, 0, false, "b3");
  y = b.batch_norm(y, "b3_bn");
  int s = b.convolution(x, 16, 1, 1, 0, false, "proj");
  s = b.batch_norm(s, "proj_bn");
  x = b.add(y, s, "add");
  x = b.relu(x, "add_relu");  // 16x8x8
  const int i1 = b.relu(b.convolution(x, 8, 1, 1, 0, true, "i1"), "i1_relu");
  int i3 = b.relu(b.convolution(x, 6, 1, 1, 0, true, "i3_reduce"), "i3_reduce_relu");
  i3 = b.relu(b.convolution(i3, 8, 3, 1, 1, true, "i3"), "i3_relu");
  int ip = b.max_pool(x, 3, 1, 1, false, "ip_pool");
  ip = b.relu(b.convolution(ip, 8, 1, 1, 0, true, "ip"), "ip_relu");
  x = b.concat({i1, i3, ip}, "concat");  // 24x8x8
  x = b.avg_pool(x, 8, 1, 0, false, "avgpool");
  x = b.flatten(x, "flatten");
  x = b.dropout(x, 0.2, "dropout");
  x = b.fully_connected(x, 10, true, "fc");
  return b.finish_with_loss(x);
}

TEST(OnednnNetwork, MiniResnetMatchesReference) { both_phases(mini_resnet(), 4); }

// ---- Fused groups against the unfused graph ---------------------------------

Vec as_double(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

// The ops a step runs for `layer` in `stage` (from the profile's tags).
int ops_of(const OpSamples& samples, int layer, OpStage stage) {
  int n = 0;
  for (const OpTag& op : samples.ops) n += op.layer == layer && op.stage == stage;
  return n;
}

// The fused graph (GraphOptions::fuse, the default) against the same graph
// with every layer its own primitive: the plan has the `expected` groups, each
// fused ReLU runs no forward op (and in bn_relu no backward op), and every
// output and gradient that exists in both, and every parameter gradient, agree
// element by element within `tolerance` of the tensor's scale. Buffer reuse and
// in-place are off in both, so every tensor can be read after check().
void compare_fused_with_unfused(const Network& network, std::int64_t batch, Phase phase, Precision precision,
                                const std::map<kit::FusedKind, int>& expected, double tolerance) {
  SCOPED_TRACE(network.name() + " " + std::string(to_string(phase)) + " " + std::string(to_string(precision)));
  const bool training = phase == Phase::training;
  const CellSpec cell = cell_of(network, batch, phase, precision);
  onednn::OnednnSession fused(network, cell, test_config(), onednn::GraphOptions{false, false, true});
  onednn::OnednnSession unfused(network, cell, test_config(), onednn::GraphOptions{false, false, false});
  ASSERT_TRUE(unfused.fusions().groups().empty());
  std::map<kit::FusedKind, int> planned;
  for (const kit::FusedGroup& g : fused.fusions().groups()) ++planned[g.kind];
  EXPECT_EQ(planned, expected) << fused.record().decisions;

  const OpSamples fused_ops = fused.profile(1), unfused_ops = unfused.profile(1);
  for (const kit::FusedGroup& g : fused.fusions().groups()) {
    if (g.relu < 0) continue;
    const std::string& name = network.layers()[static_cast<std::size_t>(g.relu)].name;
    EXPECT_EQ(ops_of(fused_ops, g.relu, OpStage::forward), 0) << name << ": its producer applies it";
    EXPECT_EQ(ops_of(unfused_ops, g.relu, OpStage::forward), 1) << name;
    if (training && g.kind == kit::FusedKind::bn_relu)
      EXPECT_EQ(ops_of(fused_ops, g.relu, OpStage::backward), 0) << name << ": batch-norm's backward applies its mask";
  }

  const OutputCheck f = fused.check(), u = unfused.check();
  EXPECT_TRUE(f.finite);
  EXPECT_NEAR(f.loss, u.loss, tolerance * std::max(1.0, std::abs(u.loss)));
  const int loss = static_cast<int>(network.layers().size()) - 1;
  int outputs = 0, gradients = 0, parameters = 0;
  for (int l = 0; l < loss; ++l) {
    const std::string& name = network.layers()[static_cast<std::size_t>(l)].name;
    if (fused.has_output(l)) {
      expect_close(fused.output(l), as_double(unfused.output(l)), tolerance, "output of " + name);
      ++outputs;
    }
    if (training && l > 0 && fused.has_output_gradient(l)) {
      expect_close(fused.output_gradient(l), as_double(unfused.output_gradient(l)), tolerance, "gradient of " + name);
      ++gradients;
    }
    for (auto slot : {synthetic::Slot::weight, synthetic::Slot::bias, synthetic::Slot::bn_gamma, synthetic::Slot::bn_beta}) {
      if (!training || synthetic::parameter_elements(network, l, slot) == 0) continue;
      expect_close(fused.parameter_gradient(l, slot), as_double(unfused.parameter_gradient(l, slot)), tolerance,
                   name + " " + slot_name(slot) + " gradient");
      ++parameters;
    }
  }
  EXPECT_GT(outputs, 0);
  if (training) {
    EXPECT_GT(gradients, 0);
    EXPECT_EQ(static_cast<std::size_t>(parameters), f.gradient_norms.size());
  }
}

// fp32 and, where the CPU has it, bf16; both phases. The bounds are the
// measured worst cases rounded up (see src/engines/onednn/README.md).
void fused_matches_unfused(const Network& network, std::int64_t batch, const std::map<kit::FusedKind, int>& inference,
                           const std::map<kit::FusedKind, int>& training) {
  auto engine = make_onednn_engine(Device{}, test_config());
  for (Precision precision : {Precision::fp32, Precision::bf16}) {
    if (!engine->supports(Device{}, cell_of(network, batch, Phase::training, precision)).supported) continue;
    const double tolerance = 1e-6;
    // bf16 conv_bn_add_relu: the sum post-op adds the residual to the convolution's fp32 result, where the
    // unfused graph first rounds that result to bf16: one rounding fewer, which later layers carry on. Measured
    // (ConvBnAddReluSumsIntoTheResidualOrACopy, AddRelu, MiniResnetEveryGroup): worst 0.008 of a tensor's
    // scale (3 bf16 steps of a 2.7 element at scale 5.8), the loss 0.0044 relative. Every other group and
    // precision agrees within 1e-6.
    const bool sums = inference.count(kit::FusedKind::conv_bn_add_relu) > 0 && precision == Precision::bf16;
    compare_fused_with_unfused(network, batch, Phase::inference, precision, inference, sums ? 2e-2 : tolerance);
    compare_fused_with_unfused(network, batch, Phase::training, precision, training, tolerance);
  }
}

using Groups = std::map<kit::FusedKind, int>;

TEST(OnednnFusion, ConvBiasReluAndFcBiasRelu) {
  NetworkBuilder b("conv_fc_relu", {3, 7, 7});
  int x = b.convolution(b.input(), 5, 3, 1, 1, true, "conv0");
  x = b.relu(x, "relu0");                        // conv_bias_relu on a network-input convolution
  x = b.convolution(x, 8, 3, 2, 1, false, "conv1");
  x = b.relu(x, "relu1");                        // without a bias
  const int side = b.convolution(x, 6, 1, 1, 0, true, "conv2");
  x = b.relu(side, "relu2");
  x = b.fully_connected(x, 12, true, "fc0");     // on a 4D tensor
  x = b.relu(x, "relu3");
  x = b.fully_connected(x, 9, false, "fc1");
  x = b.relu(x, "relu4");
  x = b.fully_connected(x, 7, true, "fc2");
  const Network network = b.finish_with_loss(x);
  const Groups groups{{kit::FusedKind::conv_bias_relu, 3}, {kit::FusedKind::fc_bias_relu, 2}};
  fused_matches_unfused(network, 3, groups, groups);
  both_phases(network, 3);  // and the fused graph against the double-precision reference
}

TEST(OnednnFusion, BatchNormRelu) {
  const Network network = tiny("bn_relu", {3, 6, 6}, [](NetworkBuilder& b, int x) {
    x = b.batch_norm(x);
    x = b.relu(x);
    x = b.convolution(x, 8, 3, 2, 1, false);
    x = b.batch_norm(x);
    return b.relu(x);
  });
  // Training: bn_relu twice (no conv_bias_relu: the convolutions feed batch-norms). Inference:
  // conv_bn_relu twice (batch-norm folded into the convolution, ReLU its post-op).
  fused_matches_unfused(network, 4, {{kit::FusedKind::conv_bn_relu, 2}}, {{kit::FusedKind::bn_relu, 2}});
  both_phases(network, 4);
}

TEST(OnednnFusion, AddRelu) {
  const Network network = tiny("add_relu", {3, 6, 6}, [](NetworkBuilder& b, int x) {
    x = b.relu(x);
    int branch = b.convolution(x, 5, 3, 1, 1, false);
    branch = b.batch_norm(branch);
    x = b.add(branch, x);  // training: bn_add_relu refused (oneDNN 2.6), add_relu taken
    x = b.relu(x);
    const int other = b.convolution(x, 5, 1, 1, 0, true);
    x = b.add(x, other);
    return b.relu(x);      // add_relu whose add has a convolution on either side
  });
  // Inference: the branch's convolution, batch-norm (folded), add and ReLU are one primitive (conv_bn_add_relu,
  // a sum post-op into a copy of the residual, which that convolution reads); the second add is add_relu.
  fused_matches_unfused(network, 3,
                        {{kit::FusedKind::conv_bias_relu, 1}, {kit::FusedKind::add_relu, 1}, {kit::FusedKind::conv_bn_add_relu, 1}},
                        {{kit::FusedKind::conv_bias_relu, 1}, {kit::FusedKind::add_relu, 2}});
  both_phases(network, 3);
}

// The fold's arithmetic with batch-norm values other than a fresh model's (gamma 1, beta 0, mean 0,
// variance 1, which the network tests above run): the folded convolution equals convolution then
// batch-norm, computed in double, on one input.
TEST(OnednnFusion, FoldBatchNormIsConvolutionThenBatchNorm) {
  const std::vector<float> weights{0.5f, -1.f, 2.f, 0.25f, 1.5f, -0.75f};  // 2 output channels x 3 inputs
  const std::vector<float> bias{0.1f, -0.2f}, gamma{1.5f, -0.5f}, beta{0.3f, 2.f}, mean{0.7f, -1.1f}, variance{0.8f, 2.5f};
  const std::vector<float> x{1.f, -2.f, 0.5f};
  const double epsilon = 1e-3;
  std::vector<float> folded = weights, folded_bias = bias;
  onednn::fold_batch_norm(folded, folded_bias, gamma, beta, mean, variance, epsilon);
  for (std::size_t o = 0; o < 2; ++o) {
    double conv = bias[o], fused = folded_bias[o];
    for (std::size_t k = 0; k < 3; ++k) {
      conv += static_cast<double>(weights[o * 3 + k]) * x[k];
      fused += static_cast<double>(folded[o * 3 + k]) * x[k];
    }
    const double normalised = gamma[o] * (conv - mean[o]) / std::sqrt(variance[o] + epsilon) + beta[o];
    EXPECT_NEAR(fused, normalised, 1e-6 * std::max(1.0, std::abs(normalised))) << o;
  }
  std::vector<float> mismatched = bias;
  EXPECT_THROW(onednn::fold_batch_norm(folded, mismatched, gamma, beta, mean, {1.f}, epsilon), Error);
}

// conv_bn_add_relu (inference): the folded convolution's sum post-op adds the residual in its destination.
// In an identity block (the residual read by b1 before b3, and by the add) b3 writes over the residual's own
// tensor: one op. Where the convolution reads the residual itself (c), it sums into a copy: two ops. The add
// and its ReLU run none. Channels 16 (unpadded blocks) and 5 (padded: oneDNN's in-place binary bug, AddRelu).
TEST(OnednnFusion, ConvBnAddReluSumsIntoTheResidualOrACopy) {
  for (const std::int64_t channels : {16, 5}) {
    SCOPED_TRACE(channels);
    NetworkBuilder b("sum_post_op_" + std::to_string(channels), {3, 8, 8});
    int x = b.convolution(b.input(), channels, 3, 1, 1, false, "stem");
    x = b.relu(x, "stem_relu");
    x = b.convolution(x, channels, 1, 1, 0, false, "pre");
    x = b.batch_norm(x, "pre_bn");
    x = b.relu(x, "pre_relu");  // the identity block's residual
    int y = b.convolution(x, 8, 1, 1, 0, false, "b1");
    y = b.batch_norm(y, "b1_bn");
    y = b.relu(y, "b1_relu");
    const int b3 = b.convolution(y, channels, 1, 1, 0, false, "b3");
    y = b.batch_norm(b3, "b3_bn");
    const int add = b.add(y, x, "add");
    x = b.relu(add, "add_relu");
    const int c = b.convolution(x, channels, 1, 1, 0, true, "c");
    const int add2 = b.add(b.batch_norm(c, "c_bn"), x, "add2");
    x = b.relu(add2, "add2_relu");
    x = b.flatten(x, "flatten");
    x = b.fully_connected(x, 6, true, "fc");
    const Network network = b.finish_with_loss(x);
    // Buffer reuse and in-place off: both anchors sum into copies, compared with the unfused graph.
    fused_matches_unfused(network, 3,
                          {{kit::FusedKind::conv_bias_relu, 1}, {kit::FusedKind::conv_bn_relu, 2},
                           {kit::FusedKind::conv_bn_add_relu, 2}},
                          {{kit::FusedKind::conv_bias_relu, 1}, {kit::FusedKind::bn_relu, 2}, {kit::FusedKind::add_relu, 2}});
    both_phases(network, 3);  // the default graph (in place) against the double-precision reference
    onednn::OnednnSession session(network, cell_of(network, 3, Phase::inference), test_config());
    EXPECT_EQ(session.fusions().count(kit::FusedKind::conv_bn_add_relu), 2) << session.record().decisions;
    EXPECT_NE(session.record().decisions.find(" sum_post_op=into_residual:1,into_copy:1"), std::string::npos)
        << session.record().decisions;
    const OpSamples ops = session.profile(1);
    EXPECT_EQ(ops_of(ops, b3, OpStage::forward), 1) << "b3 sums into the residual's own tensor";
    EXPECT_EQ(ops_of(ops, c, OpStage::forward), 2) << "c reads its residual: a copy, then the convolution";
    EXPECT_EQ(ops_of(ops, add, OpStage::forward), 0);
    EXPECT_EQ(ops_of(ops, add2, OpStage::forward), 0);
  }
}

TEST(OnednnFusion, MiniResnetEveryGroup) {
  fused_matches_unfused(mini_resnet(), 4,
                        {{kit::FusedKind::conv_bias_relu, 4}, {kit::FusedKind::conv_bn_add_relu, 1}, {kit::FusedKind::conv_bn_relu, 4}},
                        {{kit::FusedKind::conv_bias_relu, 4}, {kit::FusedKind::bn_relu, 3}, {kit::FusedKind::add_relu, 1}});
}

TEST(OnednnNetwork, MiniResnetLearnsWithSgd) {
  const Network network = mini_resnet();
  onednn::OnednnSession session(network, cell_of(network, 8, Phase::training), test_config(Update::sgd, 0.05));
  const double before = session.check().loss;
  for (int step = 0; step < 8; ++step) session.step();
  const OutputCheck after = session.check();
  EXPECT_TRUE(after.finite);
  EXPECT_LT(after.loss, before - 0.05) << "loss " << before << " -> " << after.loss;
}

TEST(OnednnNetwork, SgdUpdateIsWeightMinusRateTimesGradient) {
  NetworkBuilder b("sgd", {3, 6, 6});
  int x = b.convolution(b.input(), 5, 3, 1, 1, false, "conv");
  x = b.batch_norm(x, "bn");
  x = b.relu(x, "relu");
  x = b.flatten(x);
  x = b.fully_connected(x, 6, true, "fc");
  const Network network = b.finish_with_loss(x);
  const double rate = 0.1;
  onednn::OnednnSession session(network, cell_of(network, 3, Phase::training), test_config(Update::sgd, rate));
  session.check();
  for (int layer : {1, 2, 5})
    for (auto slot : {synthetic::Slot::weight, synthetic::Slot::bias, synthetic::Slot::bn_gamma, synthetic::Slot::bn_beta}) {
      if (synthetic::parameter_elements(network, layer, slot) == 0) continue;
      SCOPED_TRACE(network.layers()[static_cast<std::size_t>(layer)].name + " " + slot_name(slot));
      const std::vector<float> w = session.parameter(layer, slot), g = session.parameter_gradient(layer, slot);
      Vec expected(w.size());
      for (std::size_t i = 0; i < w.size(); ++i) expected[i] = w[i] - rate * g[i];
      onednn::OnednnSession probe(network, cell_of(network, 3, Phase::training), test_config(Update::sgd, rate));
      probe.step();  // the same forward/backward as check() (no dropout), then the update
      expect_close(probe.parameter(layer, slot), expected, 1e-6, "updated value");
    }
}

// ---- Memory -------------------------------------------------------------------

TEST(OnednnMemory, AbsurdBatchIsRefusedBeforeAllocating) {
  auto engine = make_onednn_engine(Device{}, test_config());
  const Network network = make_network("vgg16");
  try {
    engine->prepare(network, cell_of(network, std::int64_t{1} << 20, Phase::training));
    FAIL() << "prepare() did not throw";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("available"), std::string::npos) << e.what();
  }
}

TEST(OnednnMemory, PoolSharesOnlyBuffersWithDisjointLifetimes) {
  onednn::MemoryPool pool;
  const int a = pool.request(1000, false, "a"), b = pool.request(1000, false, "b"), c = pool.request(3000, false, "c");
  const int w = pool.request(500, true, "w");
  pool.use(a, 0); pool.use(a, 1);
  pool.use(b, 1); pool.use(b, 2);
  pool.use(c, 3); pool.use(c, 4);
  pool.use(w, 2);
  const std::size_t shared = pool.plan(true);
  EXPECT_LT(shared, pool.unshared_bytes());
  pool.allocate(shared, "test");
  auto range = [&](int id) {
    const auto begin = reinterpret_cast<std::uintptr_t>(pool.address(id));
    return std::pair{begin, begin + pool.size(id)};
  };
  auto overlap = [&](int x, int y) { return range(x).first < range(y).second && range(y).first < range(x).second; };
  EXPECT_FALSE(overlap(a, b));  // alive together at op 1
  EXPECT_FALSE(overlap(w, a));
  EXPECT_FALSE(overlap(w, b));
  EXPECT_FALSE(overlap(w, c));
  EXPECT_TRUE(overlap(c, a) || overlap(c, b));  // c comes after both: it reuses their space

  onednn::MemoryPool small;
  small.request(1 << 20, true, "big");
  small.plan(true);
  EXPECT_THROW(small.allocate(1000, "test"), OutOfMemory);
}

TEST(OnednnMemory, ReuseAndInPlaceLowerThePeak) {
  const Network network = make_network("resnet50");
  onednn::OnednnSession session(network, cell_of(network, 2, Phase::training), test_config());
  const auto peak = static_cast<double>(session.memory().peak_bytes);
  EXPECT_LT(peak, 0.8 * static_cast<double>(session.unshared_bytes()));
  EXPECT_GT(peak, static_cast<double>(network.parameters()) * 4 * 2);  // weights and their gradients at least
}

// Each cell's decisions name the recipe that ran (DESIGN.md: one meaning per precision) and the fusions.
TEST(OnednnSession, DecisionsNameTheRecipeAndTheFusions) {
  const Network network = make_network("alexnet");
  onednn::OnednnSession session(network, cell_of(network, 1, Phase::inference), test_config());
  EXPECT_EQ(session.record().decisions, std::string(recipe_of(Precision::fp32)) + " fusions=conv_bias_relu:5,fc_bias_relu:2");
  onednn::OnednnSession unfused(network, cell_of(network, 1, Phase::inference), test_config(),
                                onednn::GraphOptions{true, true, false});
  EXPECT_EQ(unfused.record().decisions.rfind(std::string(recipe_of(Precision::fp32)) + " fusions=none;refused=conv_bias_relu[conv1+relu1]"
                                             "(fusion turned off (--fuse false)) x5,fc_bias_relu[", 0), 0u)
      << unfused.record().decisions;
}

// Training: the kit proposes conv_bias_relu_pool for a relu read by a max pool
// alone; oneDNN refuses it (its pooling backward takes no dReLU) and takes
// conv_bias_relu for the same relu.
TEST(OnednnSession, ReluPoolGroupIsRefusedForConvBiasRelu) {
  const Network network = make_network("alexnet");
  onednn::OnednnSession training(network, cell_of(network, 1, Phase::training), test_config());
  const kit::FusionPlan& plan = training.fusions();
  EXPECT_EQ(plan.count(kit::FusedKind::conv_bias_relu_pool), 0);
  EXPECT_EQ(plan.count(kit::FusedKind::conv_bias_relu), 5);
  const std::string& decisions = training.record().decisions;
  EXPECT_NE(decisions.find("fusions=conv_bias_relu:5,fc_bias_relu:2;refused=conv_bias_relu_pool[conv1+relu1+pool1]("
                           "oneDNN's pooling backward takes no post-op"),
            std::string::npos)
      << decisions;
  EXPECT_NE(decisions.find(") x3"), std::string::npos) << decisions;
}

// What the oneDNN engine lowers and refuses of ResNet-50's groups, with the reasons.
TEST(OnednnSession, ResnetFusionsAndRefusals) {
  const Network network = make_network("resnet50");
  onednn::OnednnSession training(network, cell_of(network, 1, Phase::training), test_config());
  const kit::FusionPlan& plan = training.fusions();
  EXPECT_EQ(plan.count(kit::FusedKind::bn_relu), 33);
  EXPECT_EQ(plan.count(kit::FusedKind::add_relu), 16);  // bn_add_relu refused: the add + relu still fuse
  EXPECT_EQ(plan.count(kit::FusedKind::bn_add_relu), 0);
  const std::string& decisions = training.record().decisions;
  EXPECT_NE(decisions.find("fusions=add_relu:16,bn_relu:33;refused=bn_add_relu["), std::string::npos) << decisions;
  EXPECT_NE(decisions.find("(oneDNN 2."), std::string::npos) << decisions;
  EXPECT_NE(decisions.find("fuse_norm_add_relu"), std::string::npos) << decisions;
  // Inference: every batch-norm folds into its convolution (53); each block's last convolution (conv3, or the
  // projection where conv3 runs first) also adds the residual and applies the ReLU, as its post-ops.
  onednn::OnednnSession inference(network, cell_of(network, 1, Phase::inference), test_config());
  EXPECT_EQ(inference.record().decisions,
            std::string(recipe_of(Precision::fp32)) +
                " fusions=conv_bn_add_relu:16,conv_bn_relu:37 sum_post_op=into_residual:16,into_copy:0");
  // Each of them writes over its residual's own tensor: nothing reads the residual after it but the add.
  const OpSamples ops = inference.profile(1);
  for (const kit::FusedGroup& g : inference.fusions().groups()) {
    if (g.kind != kit::FusedKind::conv_bn_add_relu) continue;
    const std::string& name = network.layers()[static_cast<std::size_t>(g.anchor())].name;
    EXPECT_EQ(ops_of(ops, g.anchor(), OpStage::forward), 1) << name << ": no copy of the residual";
    EXPECT_EQ(ops_of(ops, g.add, OpStage::forward), 0) << name;
  }
}

// ---- Engine -------------------------------------------------------------------

TEST(OnednnEngine, Supports) {
  auto engine = make_onednn_engine(Device{}, test_config());
  EXPECT_EQ(engine->name(), "onednn");
  EXPECT_EQ(engine->device_kind(), DeviceKind::cpu);
  Device cpu;
  const Network network = make_network("alexnet");
  EXPECT_TRUE(engine->supports(cpu, cell_of(network, 1, Phase::training)).supported);
  const Support tf32 = engine->supports(cpu, cell_of(network, 1, Phase::training, Precision::tf32));
  EXPECT_FALSE(tf32.supported);
  EXPECT_NE(tf32.reason.find("GPU"), std::string::npos);
  EXPECT_FALSE(engine->supports(cpu, cell_of(network, 1, Phase::training, Precision::fp16)).supported);
  const Support bf16 = engine->supports(cpu, cell_of(network, 1, Phase::training, Precision::bf16));
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const bool native = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
  EXPECT_EQ(bf16.supported, native) << bf16.reason;
  if (!native) {
    EXPECT_NE(bf16.reason.find("best ISA is"), std::string::npos) << bf16.reason;
    EXPECT_THROW(engine->prepare(network, cell_of(network, 1, Phase::inference, Precision::bf16)), Error);
  }
  EXPECT_THROW(engine->prepare(network, cell_of(network, 1, Phase::inference, Precision::tf32)), Error);
  for (const Precision amp : {Precision::amp_bf16, Precision::amp_fp16}) {  // the frameworks' recipe: refused, with why
    const Support support = engine->supports(cpu, cell_of(network, 1, Phase::training, amp));
    EXPECT_FALSE(support.supported);
    EXPECT_EQ(support.reason, mixed_precision_refusal(amp, "onednn", "bf16"));
    EXPECT_THROW(engine->prepare(network, cell_of(network, 1, Phase::training, amp)), Error);
  }
  Device gpu;
  gpu.kind = DeviceKind::gpu;
  EXPECT_FALSE(engine->supports(gpu, cell_of(network, 1, Phase::training)).supported);
}

// bf16 only where the CPU has it: the same comparison with bf16 tolerances.
TEST(OnednnEngine, Bf16MatchesReferenceWhereSupported) {
  auto engine = make_onednn_engine(Device{}, test_config());
  const Network network = mini_resnet();
  if (!engine->supports(Device{}, cell_of(network, 4, Phase::training, Precision::bf16)).supported)
    GTEST_SKIP() << "no native bf16 on this CPU";
  for (Phase phase : {Phase::inference, Phase::training}) {
    const testing::ReferenceResult ref = testing::run_reference(network, 4, kSeed, phase == Phase::training);
    onednn::OnednnSession session(network, cell_of(network, 4, phase, Precision::bf16), test_config());
    const OutputCheck result = session.check();
    EXPECT_TRUE(result.finite);
    EXPECT_NEAR(result.loss, ref.loss, 0.05 * std::max(1.0, ref.loss));
    for (std::size_t i = 0; i < result.gradient_norms.size(); ++i) {
      const double want = norm(ref.parameters[i].gradient);
      EXPECT_NEAR(result.gradient_norms[i], want, 0.1 * want + 1e-3) << i;
    }
  }
}

// ---- Every real network -------------------------------------------------------

// A whole real network against the reference: AlexNet training at batch 1,
// with the default session (buffer reuse, in-place ReLU).
TEST(OnednnNetwork, AlexnetTrainingMatchesReference) {
  const Network network = make_network("alexnet");
  const testing::ReferenceResult ref = testing::run_reference(network, 1, kSeed, true);
  onednn::OnednnSession session(network, cell_of(network, 1, Phase::training), test_config());
  const OutputCheck result = session.check();
  EXPECT_TRUE(result.finite);
  EXPECT_NEAR(result.loss, ref.loss, 1e-4 * std::max(1.0, ref.loss));
  EXPECT_NEAR(result.logits_checksum, ref.logits_checksum, 1e-3);
  ASSERT_EQ(result.gradient_norms.size(), ref.parameters.size());
  for (std::size_t i = 0; i < ref.parameters.size(); ++i) {
    const double want = norm(ref.parameters[i].gradient);
    EXPECT_NEAR(result.gradient_norms[i], want, 1e-4 * std::max(1e-2, want)) << i;
  }
}

// The synthetic models are untrained: their losses may be far from log(1000)
// (deep ReLU stacks without normalisation saturate the softmax), so this
// checks that everything runs, is finite, is repeatable, and reports what it should.
class OnednnRealNetwork : public ::testing::TestWithParam<std::string> {};

TEST_P(OnednnRealNetwork, InferenceAndTrainingStepAtBatchOne) {
  const Network network = make_network(GetParam());
  // One thread: on a shared machine, OpenMP's spinning barriers between two
  // threads cost milliseconds per primitive when a core is taken away; the
  // layer tests above run with two threads.
  EngineConfig config = test_config();
  config.threads = 1;
  auto engine = make_onednn_engine(Device{}, config);
  std::size_t trainable = 0;
  for (int l = 0; l < static_cast<int>(network.layers().size()); ++l)
    for (auto slot : {synthetic::Slot::weight, synthetic::Slot::bias, synthetic::Slot::bn_gamma, synthetic::Slot::bn_beta})
      trainable += synthetic::parameter_elements(network, l, slot) > 0;
  for (Phase phase : {Phase::inference, Phase::training}) {
    SCOPED_TRACE(std::string(to_string(phase)));
    const auto begin = std::chrono::steady_clock::now();
    auto session = engine->prepare(network, cell_of(network, 1, phase));
    const auto prepared = std::chrono::steady_clock::now();
    const OutputCheck first = session->check();
    auto& timer = session->timer();
    timer.start();
    session->step();
    timer.stop();
    const OutputCheck again = session->check();  // no update: the same results
    EXPECT_TRUE(first.finite);
    EXPECT_NEAR(first.loss, again.loss, 1e-9 * std::max(1.0, std::abs(first.loss)));
    EXPECT_NEAR(first.logits_checksum, again.logits_checksum, 1e-9 * std::max(1.0, std::abs(first.logits_checksum)));
    EXPECT_GT(session->memory().peak_bytes, network.parameters() * 4);
    if (phase == Phase::training) {
      EXPECT_EQ(first.gradient_norms.size(), trainable);
      for (std::size_t i = 0; i < first.gradient_norms.size() && i < again.gradient_norms.size(); ++i)
        EXPECT_NEAR(first.gradient_norms[i], again.gradient_norms[i], 1e-9 * std::max(1e-6, first.gradient_norms[i])) << i;
    } else {
      EXPECT_TRUE(first.gradient_norms.empty());
    }
    std::printf("[ onednn   ] %-10s %-9s batch 1: prepare %.2f s, step %.1f ms, peak %s, loss %.4g\n",
                GetParam().c_str(), std::string(to_string(phase)).c_str(),
                std::chrono::duration<double>(prepared - begin).count(), timer.elapsed_ms(),
                onednn::format_bytes(static_cast<double>(session->memory().peak_bytes)).c_str(), first.loss);
  }
}

INSTANTIATE_TEST_SUITE_P(AllNetworks, OnednnRealNetwork, ::testing::ValuesIn(network_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace crossbench
