// The cuDNN engine's build phase on a CPU (label `cpu`): building the ops and
// the memory plan of a cell makes no CUDA or cuDNN call, so every network,
// precision, layout and phase can be planned here. Checks that the plan is
// complete (every layer that needs a gradient gets one), that buffers are
// reused, and the decisions the builder makes (in-place relus, concat slices).
#include <gtest/gtest.h>

#include "crossbench/engine.hpp"
#include "crossbench/network.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/graph_api_convolution.hpp"
#include "engines_cudnn/tiny_networks.hpp"

namespace crossbench::cudnn {
namespace {

struct Plan {
  MemoryPool pool;
  std::vector<Op> ops;
  std::vector<Parameter> parameters;
  std::vector<std::unique_ptr<LayerImpl>> impls;
  std::int64_t bytes = 0;
  std::unique_ptr<Builder> builder;
};

std::unique_ptr<Plan> plan(const Network& network, Precision precision, Phase phase, std::int64_t batch,
                           Layout layout = Layout::automatic, bool fuse = true,
                           AlgorithmPolicy algorithm = AlgorithmPolicy::heuristic, bool graph_api = true,
                           bool fold_relu_into_pool = true) {
  auto p = std::make_unique<Plan>();
  static CudnnConfig config;
  config.layout = layout;
  config.fuse = fuse;
  config.algorithm = algorithm;
  config.graph_api = graph_api;
  config.fold_relu_into_pool = fold_relu_into_pool;
  static CellSpec cell;
  cell = {"cudnn", network.name(), precision, batch, phase, 0};
  p->builder = std::make_unique<Builder>(network, cell, config, p->pool, p->ops, p->parameters, p->impls);
  build_graph(*p->builder);
  p->bytes = p->pool.plan();
  return p;
}

TEST(CudnnPlan, TheEngineIsInTheCatalogue) {
  bool built = false;
  for (const EngineInfo& info : engine_catalog()) built = built || (info.name == "cudnn" && info.built);
  EXPECT_TRUE(built);
}

TEST(CudnnPlan, EveryNetworkPlansInEveryConfiguration) {
  for (const std::string& name : network_names()) {
    const Network network = make_network(name);
    for (Precision precision : {Precision::fp32, Precision::bf16})
      for (Phase phase : {Phase::inference, Phase::training}) {
        std::unique_ptr<Plan> p;
        ASSERT_NO_THROW(p = plan(network, precision, phase, 64)) << name;
        EXPECT_LT(p->bytes, p->pool.unshared_bytes()) << name << ": buffers are reused";
        // The cuDNN engine placed lowest-gap only before the kit: its peak may not grow.
        const std::int64_t lowest = p->pool.plan_with(kit::GapRule::lowest);
        const std::int64_t tightest = p->pool.plan_with(kit::GapRule::tightest);
        EXPECT_EQ(p->bytes, std::min(lowest, tightest)) << name;
        EXPECT_EQ(p->pool.plan(), p->bytes) << name << ": planning again gives the same plan";
        std::cerr << "  lowest-gap " << lowest << " B, tightest-gap " << tightest << " B\n";
        if (phase == Phase::training) {
          std::size_t gradients = 0;
          for (const Parameter& q : p->parameters) gradients += q.gradient.valid();
          EXPECT_EQ(gradients, p->parameters.size()) << name;
        }
        std::cerr << name << " " << to_string(precision) << " " << to_string(phase) << " b64: " << p->ops.size()
                  << " ops, plan " << p->bytes / double(1 << 20) << " MiB (no reuse "
                  << p->pool.unshared_bytes() / double(1 << 20) << " MiB)\n";
      }
  }
}

TEST(CudnnPlan, TinyNetworksPlanInBothLayouts) {
  for (const tiny::Case& c : tiny::cases())
    for (Layout layout : {Layout::nchw, Layout::nhwc})
      for (Phase phase : {Phase::inference, Phase::training})
        EXPECT_NO_THROW(plan(c.build(), Precision::fp32, phase, tiny::kBatch, layout)) << c.name;
}

TEST(CudnnPlan, GoogLeNetBranchesWriteIntoTheirConcatSliceInNchw) {
  const Network network = make_network("googlenet");
  auto nchw = plan(network, Precision::fp32, Phase::training, 8, Layout::nchw);
  auto nhwc = plan(network, Precision::fp32, Phase::training, 8, Layout::nhwc);
  auto copies = [](const Plan& p) {
    int n = 0;
    for (const Op& op : p.ops) n += op.label.find("forward copy") != std::string::npos;
    return n;
  };
  EXPECT_EQ(copies(*nchw), 0) << "every branch is placed in its slice";
  EXPECT_EQ(copies(*nhwc), 9 * 4) << "NHWC copies each branch of the nine inception modules";
}

// Concat slices and packed copies are pitched rows (kernels::copy_rows:
// cudaMemcpy2DAsync or the row kernel), decided when the copy is built;
// anything else keeps cudnnTransformTensor.
TEST(CudnnPlan, ConcatSlicesCopyAsPitchedRows) {
  const Tensor nhwc_out = Tensor::packed({8, 256, 28, 28}, DType::bf16, true);
  const Tensor nhwc_branch = Tensor::packed({8, 64, 28, 28}, DType::bf16, true);
  const Tensor nhwc_slice = nhwc_out.channel_slice(64, 64);
  auto rows = pitched_rows(nhwc_branch, nhwc_slice);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->rows, 8 * 28 * 28);
  EXPECT_EQ(rows->width, 64);
  EXPECT_EQ(rows->x_pitch, 64);
  EXPECT_EQ(rows->y_pitch, 256);
  rows = pitched_rows(nhwc_slice, nhwc_branch);  // the backward's slice of the output gradient
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->x_pitch, 256);
  EXPECT_EQ(rows->y_pitch, 64);

  const Tensor nchw_out = Tensor::packed({8, 256, 28, 28}, DType::f32, false);
  const Tensor nchw_branch = Tensor::packed({8, 64, 28, 28}, DType::f32, false);
  rows = pitched_rows(nchw_branch, nchw_out.channel_slice(64, 64));
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->rows, 8);
  EXPECT_EQ(rows->width, 64 * 28 * 28);
  EXPECT_EQ(rows->x_pitch, 64 * 28 * 28);
  EXPECT_EQ(rows->y_pitch, 256 * 28 * 28);

  EXPECT_FALSE(pitched_rows(nhwc_branch, nhwc_branch.with_type(DType::f32)).has_value());
  EXPECT_FALSE(pitched_rows(Tensor::packed({8, 64, 28, 28}, DType::bf16, false), nhwc_branch).has_value())
      << "a layout change is no row copy";
  EXPECT_FALSE(pitched_rows(nhwc_branch, nhwc_out).has_value()) << "different dims";

  EXPECT_TRUE(TensorCopy(nhwc_branch, nhwc_slice, 0.0f).uses_rows());
  EXPECT_TRUE(TensorCopy(nhwc_slice, nhwc_branch, 1.0f).uses_rows());
  const Tensor bytes = Tensor::packed({8, 64, 28, 28}, DType::u8, true);
  EXPECT_TRUE(TensorCopy(bytes, bytes, 0.0f).uses_rows()) << "a plain copy takes any type";
  EXPECT_FALSE(TensorCopy(bytes, bytes, 1.0f).uses_rows()) << "the row kernel adds fp32, fp16 and bf16 only";
}

TEST(CudnnPlan, ResNetRunsReluAndAddInPlace) {
  const Network network = make_network("resnet50");
  auto p = plan(network, Precision::fp32, Phase::training, 8);
  int in_place_relus = 0, relus = 0, in_place_adds = 0, adds = 0;
  for (std::size_t i = 0; i < network.layers().size(); ++i) {
    const LayerKind kind = network.layers()[i].kind;
    const LayerState& s = p->builder->states[i];
    if (kind == LayerKind::relu) {
      ++relus;
      in_place_relus += s.in_place;
    }
    if (kind == LayerKind::add) {
      ++adds;
      in_place_adds += s.in_place;
    }
  }
  EXPECT_EQ(in_place_relus, relus);
  EXPECT_EQ(in_place_adds, adds);
  int gradient_copies = 0;
  for (const Op& op : p->ops) gradient_copies += op.label.find("backward (") != std::string::npos;
  EXPECT_EQ(gradient_copies, 0) << "residual gradients are shared, not copied";
}

// Inference folds every batch-norm of a ResNet into the convolution before it
// (no op of its own, its output the convolution's) and lets the relu after a
// folded batch-norm fuse into that convolution; training folds nothing.
TEST(CudnnPlan, ResNetInferenceFoldsBatchNormIntoTheConvolution) {
  const Network network = make_network("resnet50");
  for (Layout layout : {Layout::nchw, Layout::nhwc}) {
    auto p = plan(network, Precision::fp32, Phase::inference, 8, layout);
    int batch_norms = 0, folded = 0, fused_relus = 0;
    for (std::size_t i = 0; i < network.layers().size(); ++i) {
      const Layer& layer = network.layers()[i];
      const LayerState& s = p->builder->states[i];
      if (layer.kind == LayerKind::batch_norm) {
        ++batch_norms;
        if (s.folded_into < 0) continue;
        ++folded;
        const LayerState& conv = p->builder->states[static_cast<std::size_t>(s.folded_into)];
        EXPECT_EQ(network.layers()[static_cast<std::size_t>(s.folded_into)].kind, LayerKind::convolution);
        EXPECT_EQ(conv.folded_batch_norm, static_cast<int>(i));
        EXPECT_EQ(s.out.buffer, conv.out.buffer) << layer.name << ": the folded output is the convolution's";
        EXPECT_EQ(s.out.offset, conv.out.offset);
        EXPECT_TRUE(conv.fold_shift.valid()) << layer.name;
        if (s.fusable_relu >= 0) {
          ++fused_relus;
          EXPECT_EQ(conv.fusable_relu, s.fusable_relu) << layer.name;
        }
      }
    }
    EXPECT_EQ(folded, batch_norms) << "every batch-norm of ResNet-50 follows a convolution that only it reads";
    EXPECT_EQ(fused_relus, 2 * 16 + 1) << "relu1 and relu2 of each of the 16 blocks, and the stem's";
    EXPECT_EQ(p->builder->after_initialise.size(), static_cast<std::size_t>(batch_norms));
    for (const Op& op : p->ops)
      EXPECT_EQ(op.label.find("bn"), std::string::npos) << op.label << ": a folded batch-norm has no op";
  }
  auto training = plan(network, Precision::fp32, Phase::training, 8);
  for (const LayerState& s : training->builder->states) EXPECT_LT(s.folded_into, 0);
  EXPECT_TRUE(training->builder->after_initialise.empty());
}

// The relu that ends each residual block runs in its add's pass: in
// inference, and in training where the batch-norm before the add is not
// fused with them (strict fp32's NCHW).
TEST(CudnnPlan, ResNetAddsApplyTheReluAfterThem) {
  const Network network = make_network("resnet50");
  for (const auto& [phase, precision] :
       {std::pair{Phase::inference, Precision::bf16}, std::pair{Phase::training, Precision::fp32}}) {
    auto p = plan(network, precision, phase, 8);
    int adds = 0, fusable = 0;
    for (std::size_t i = 0; i < network.layers().size(); ++i) {
      if (network.layers()[i].kind != LayerKind::add) continue;
      ++adds;
      const int relu = p->builder->states[i].fusable_relu;
      fusable += relu >= 0;
      if (relu >= 0) {
        EXPECT_EQ(network.layers()[static_cast<std::size_t>(relu)].kind, LayerKind::relu);
        EXPECT_TRUE(p->builder->states[i].impl->relu_fused()) << network.layers()[i].name;
      }
    }
    EXPECT_EQ(adds, 16);
    EXPECT_EQ(fusable, adds);
  }
}

// The cells whose activations are packed NHWC: tf32 and 16-bit, and fp32 with --layout nhwc.
std::vector<std::pair<Precision, Layout>> nhwc_cells() {
  return {{Precision::bf16, Layout::automatic}, {Precision::tf32, Layout::automatic}, {Precision::fp32, Layout::nhwc}};
}

// Training batch-norm with its relu (and the residual add between) is one
// fused op each way in NHWC (tf32 and 16-bit cells, --layout nhwc), and the
// batch-norm, add and relu layers have no ops of their own; strict fp32's
// NCHW and --fuse false keep cuDNN's batch-norm, named in the decisions.
TEST(CudnnPlan, ResNetTrainingFusesBatchNormAddReluInNhwc) {
  const Network network = make_network("resnet50");
  for (const auto& [precision, layout] : nhwc_cells()) {
    const std::string what = std::string(to_string(precision));
    auto fused = plan(network, precision, Phase::training, 64, layout);
    auto unfused = plan(network, precision, Phase::training, 64, layout, false);
    const kit::FusionPlan& groups = fused->builder->fusions;
    EXPECT_EQ(groups.count(kit::FusedKind::bn_add_relu), 16) << what;
    EXPECT_EQ(groups.count(kit::FusedKind::bn_relu), 33) << what << ": two per block and the stem's";
    const std::string decisions = groups.decisions(network);
    EXPECT_EQ(decisions.rfind("fusions=bn_add_relu:16,bn_relu:33", 0), 0u) << decisions;
    int fused_forward = 0, fused_backward = 0;
    for (const Op& op : fused->ops) {
      const auto& layer = network.layers()[static_cast<std::size_t>(op.layer)];
      if (op.label.find("fused forward: batch-norm") != std::string::npos) ++fused_forward;
      if (op.label.find("fused backward: batch-norm") != std::string::npos) ++fused_backward;
      if (layer.kind == LayerKind::relu || layer.kind == LayerKind::add)
        ADD_FAILURE() << what << " " << op.label << ": a fused group's relu and add have no op";
    }
    EXPECT_EQ(fused_forward, 49) << what;
    EXPECT_EQ(fused_backward, 49) << what;
    // Unfused: batch-norm, add (+ relu) and relu are separate ops, forward and backward.
    EXPECT_GT(unfused->ops.size(), fused->ops.size() + 2 * 49) << what;
    const std::string off = unfused->builder->fusions.decisions(network);
    EXPECT_NE(off.find("bn_add_relu[layer1.0.bn3+layer1.0.add+layer1.0.relu3](fusion turned off (--fuse false))"),
              std::string::npos) << off;
    EXPECT_EQ(unfused->builder->fusions.groups().size(), 0u) << off;
    std::cerr << "resnet50 " << what << " training b64 plan: " << fused->bytes / double(1 << 20) << " MiB fused, "
              << unfused->bytes / double(1 << 20) << " MiB unfused\n";
  }
  auto nchw = plan(network, Precision::fp32, Phase::training, 64);
  const std::string decisions = nchw->builder->fusions.decisions(network);
  EXPECT_EQ(nchw->builder->fusions.count(kit::FusedKind::bn_relu), 0);
  EXPECT_NE(decisions.find("bn_relu[bn1+relu](NCHW (strict fp32's layout): the fused batch-norm kernels take "
                           "packed NHWC; cuDNN's batch-norm, then our relu kernels) x33"),
            std::string::npos)
      << decisions;
  // bn_add_relu refused in NCHW falls back to add_relu, which is taken.
  EXPECT_EQ(nchw->builder->fusions.count(kit::FusedKind::add_relu), 16) << decisions;
}

// Inference conv_bn_add_relu (tensor-core NHWC cells, exhaustive search, a
// Graph API build): each block's add and relu3 run in the convolution's op
// (conv3 in an identity block, the projection's convolution in a block whose
// conv3 runs first); the add has no op, its output is the convolution's, and
// the relu is fused there. Everywhere else the group is refused with its
// reason and the add_relu group takes the block's end, as before.
TEST(CudnnPlan, ResNetInferenceAddsTheResidualInTheConvolution) {
  for (const char* name : {"resnet50", "resnet101"}) {
    const Network network = make_network(name);
    const int blocks = std::string(name) == "resnet50" ? 16 : 33;
    for (Precision precision : {Precision::tf32, Precision::bf16}) {
      const std::string what = std::string(name) + " " + std::string(to_string(precision));
      auto fused = plan(network, precision, Phase::inference, 8, Layout::automatic, true, AlgorithmPolicy::exhaustive);
      auto heuristic = plan(network, precision, Phase::inference, 8, Layout::automatic, true, AlgorithmPolicy::heuristic);
      const kit::FusionPlan& groups = fused->builder->fusions;
      const std::string decisions = groups.decisions(network);
      if (!graph_api_available()) {
        EXPECT_EQ(groups.count(kit::FusedKind::conv_bn_add_relu), 0) << what;
        EXPECT_NE(decisions.find("(no Graph API: "), std::string::npos) << what << ": " << decisions;
        continue;
      }
      EXPECT_EQ(groups.count(kit::FusedKind::conv_bn_add_relu), blocks) << what;
      EXPECT_EQ(groups.count(kit::FusedKind::add_relu), 0) << what;
      EXPECT_EQ(groups.count(kit::FusedKind::conv_bn_relu), 2 * blocks + 1 + 4) << what;
      EXPECT_EQ(decisions.find("refused"), std::string::npos) << what << ": " << decisions;
      EXPECT_LT(fused->bytes, fused->pool.unshared_bytes()) << what << ": buffers are reused";
      int anchors = 0;
      for (const kit::FusedGroup& g : groups.groups()) {
        if (g.kind != kit::FusedKind::conv_bn_add_relu) continue;
        ++anchors;
        const LayerState& conv = fused->builder->states[static_cast<std::size_t>(g.anchor())];
        const LayerState& add = fused->builder->states[static_cast<std::size_t>(g.add)];
        const LayerState& relu = fused->builder->states[static_cast<std::size_t>(g.relu)];
        const std::string& add_name = network.layers()[static_cast<std::size_t>(g.add)].name;
        EXPECT_EQ(conv.fused_residual, g.residual) << add_name;
        EXPECT_EQ(conv.folded_batch_norm, g.batch_norm) << add_name;
        EXPECT_EQ(conv.fusable_relu, -1) << add_name << ": the relu is not its own epilogue's (conv_bias_relu)";
        EXPECT_EQ(add.residual_into, g.anchor()) << add_name;
        EXPECT_EQ(add.out.buffer, conv.out.buffer) << add_name << ": the add's output is the convolution's";
        EXPECT_EQ(relu.out.buffer, conv.out.buffer) << add_name << ": the relu runs in place";
        ASSERT_NE(conv.impl, nullptr);
        EXPECT_TRUE(conv.impl->relu_fused()) << add_name;
        // The residual is an input of the convolution's op (so the buffer plan keeps it live until then).
        const Tensor residual = fused->builder->states[static_cast<std::size_t>(g.residual)].out;
        int conv_ops = 0;
        for (const Op& op : fused->ops) {
          EXPECT_NE(op.layer, g.add) << add_name << ": the add has no op (" << op.label << ")";
          if (op.layer == g.anchor()) ++conv_ops;
        }
        EXPECT_EQ(conv_ops, 1) << add_name;
        EXPECT_NE(residual.buffer, conv.out.buffer) << add_name << ": the output does not overwrite the residual";
      }
      EXPECT_EQ(anchors, blocks) << what;
      // The same ops as the add_relu lowering less one add op per block.
      EXPECT_EQ(heuristic->ops.size(), fused->ops.size() + static_cast<std::size_t>(blocks)) << what;
      const std::string refused = heuristic->builder->fusions.decisions(network);
      EXPECT_EQ(heuristic->builder->fusions.count(kit::FusedKind::add_relu), blocks) << what;
      EXPECT_NE(refused.find("conv_bn_add_relu[layer1.0.downsample.conv+layer1.0.downsample.bn+layer1.0.add+"
                             "layer1.0.relu3](--algo heuristic: the fused graph is chosen by the measured search only) x" +
                             std::to_string(blocks)),
                std::string::npos)
          << what << ": " << refused;
    }
  }
  // Refused, with the reason, where the Graph API cannot take it; add_relu then ends each block as today.
  const Network network = make_network("resnet50");
  struct Refusal {
    Precision precision;
    Layout layout;
    bool fuse, graph_api;
    std::string reason;
  };
  for (const Refusal& r : {Refusal{Precision::fp32, Layout::automatic, true, true, "(strict fp32 or NCHW: "},
                           Refusal{Precision::tf32, Layout::nchw, true, true, "(strict fp32 or NCHW: "},
                           Refusal{Precision::bf16, Layout::automatic, true, false, "(the Graph API is off (--engine.graph_api false))"},
                           Refusal{Precision::bf16, Layout::automatic, false, true, "(fusion turned off (--fuse false))"}}) {
    auto p = plan(network, r.precision, Phase::inference, 8, r.layout, r.fuse, AlgorithmPolicy::exhaustive, r.graph_api);
    const std::string decisions = p->builder->fusions.decisions(network);
    EXPECT_EQ(p->builder->fusions.count(kit::FusedKind::conv_bn_add_relu), 0) << decisions;
    EXPECT_EQ(p->builder->fusions.count(kit::FusedKind::add_relu), r.fuse ? 16 : 0) << decisions;
    EXPECT_NE(decisions.find("conv_bn_add_relu[layer1.0.downsample.conv+layer1.0.downsample.bn+layer1.0.add+"
                             "layer1.0.relu3]" + r.reason),
              std::string::npos)
        << decisions;
    for (const LayerState& s : p->builder->states) {
      EXPECT_EQ(s.fused_residual, -1);
      EXPECT_EQ(s.residual_into, -1);
    }
  }
  // Training never proposes it.
  auto training = plan(network, Precision::bf16, Phase::training, 8, Layout::automatic, true, AlgorithmPolicy::exhaustive);
  EXPECT_EQ(training->builder->fusions.count(kit::FusedKind::conv_bn_add_relu), 0);
  EXPECT_EQ(training->builder->fusions.decisions(network).find("conv_bn_add_relu"), std::string::npos);
}

// VGG's and AlexNet's fully-connected layers before a relu are lowered as
// fc_bias_relu groups (cuBLASLt's RELU_BIAS epilogue, layer_fully_connected.cpp):
// the layer applies the relu, whose op then does nothing; --fuse false refuses
// every group with its reason, and the relu runs on its own.
TEST(CudnnPlan, FullyConnectedReluGroupsAreLoweredUnlessFusionIsOff) {
  for (const char* name : {"vgg11", "alexnet"}) {
    const Network network = make_network(name);
    for (Precision precision : {Precision::fp32, Precision::tf32, Precision::bf16})
      for (Phase phase : {Phase::training, Phase::inference}) {
        const std::string what = std::string(name) + " " + std::string(to_string(precision)) +
                                 (phase == Phase::training ? " training" : " inference");
        auto fused = plan(network, precision, phase, 8);
        auto unfused = plan(network, precision, phase, 8, Layout::automatic, false);
        EXPECT_EQ(fused->builder->fusions.count(kit::FusedKind::fc_bias_relu), 2) << what;
        const std::string decisions = fused->builder->fusions.decisions(network);
        EXPECT_NE(decisions.find("fc_bias_relu:2"), std::string::npos) << what << ": " << decisions;
        EXPECT_EQ(decisions.find("fc_bias_relu["), std::string::npos) << what << ": none refused: " << decisions;
        const std::string off = unfused->builder->fusions.decisions(network);
        EXPECT_EQ(unfused->builder->fusions.count(kit::FusedKind::fc_bias_relu), 0) << what;
        EXPECT_NE(off.find("fc_bias_relu["), std::string::npos) << what << ": " << off;
        EXPECT_NE(off.find("(fusion turned off (--fuse false))"), std::string::npos) << what << ": " << off;
        int anchors = 0;
        for (std::size_t i = 0; i < network.layers().size(); ++i) {
          if (network.layers()[i].kind != LayerKind::fully_connected) continue;
          const int relu = fused->builder->states[i].fusable_relu;
          EXPECT_EQ(unfused->builder->states[i].fusable_relu, -1) << what << " " << network.layers()[i].name;
          EXPECT_FALSE(unfused->builder->states[i].impl->relu_fused()) << what << " " << network.layers()[i].name;
          if (relu < 0) {
            EXPECT_FALSE(fused->builder->states[i].impl->relu_fused()) << what << " " << network.layers()[i].name;
            continue;
          }
          ++anchors;
          EXPECT_EQ(network.layers()[static_cast<std::size_t>(relu)].kind, LayerKind::relu) << what;
          EXPECT_TRUE(fused->builder->states[static_cast<std::size_t>(relu)].in_place) << what;
          EXPECT_TRUE(fused->builder->states[i].impl->relu_fused()) << what << " " << network.layers()[i].name;
        }
        EXPECT_EQ(anchors, 2) << what << ": fc6 and fc7; the logits layer has no relu";
        // The same ops either way: a fused relu's op does nothing at run time (as after a convolution),
        // but for the relus folded into a max pool's backward (conv_bias_relu_pool: no backward op).
        const auto folded = static_cast<std::size_t>(fused->builder->fusions.count(kit::FusedKind::conv_bias_relu_pool));
        EXPECT_EQ(fused->ops.size() + folded, unfused->ops.size()) << what;
      }
  }
}

// Training in NHWC (tf32 and 16-bit cells, --layout nhwc): the relu before
// each of VGG-11's five max pools folds into the pool's backward
// (conv_bias_relu_pool): the relu has no backward op and receives no
// gradient, the pool's backward writes the convolution's output gradient, and
// the pool records the relu's mask (its decision says +drelu). Strict fp32's
// NCHW runs cuDNN's pooling: refused with the reason, conv_bias_relu instead.
TEST(CudnnPlan, VggTrainingFoldsTheReluIntoTheMaxPoolBackwardInNhwc) {
  const Network network = make_network("vgg11");
  for (const auto& [precision, layout] : nhwc_cells()) {
    const std::string what = std::string(to_string(precision));
    auto p = plan(network, precision, Phase::training, 8, layout);
    const kit::FusionPlan& fusions = p->builder->fusions;
    EXPECT_EQ(fusions.count(kit::FusedKind::conv_bias_relu_pool), 5) << what;
    EXPECT_EQ(fusions.count(kit::FusedKind::conv_bias_relu), 3) << what;
    EXPECT_EQ(fusions.decisions(network).rfind("fusions=conv_bias_relu:3,conv_bias_relu_pool:5,fc_bias_relu:2", 0), 0u)
        << fusions.decisions(network);
    for (const kit::FusedGroup& g : fusions.groups()) {
      if (g.kind != kit::FusedKind::conv_bias_relu_pool) continue;
      const std::string& pool = network.layers()[static_cast<std::size_t>(g.pool)].name;
      const auto& states = p->builder->states;
      EXPECT_EQ(states[static_cast<std::size_t>(g.anchor())].fusable_relu, g.relu) << pool;
      EXPECT_FALSE(states[static_cast<std::size_t>(g.relu)].grad.has_value()) << pool << ": the relu gets no gradient";
      EXPECT_TRUE(states[static_cast<std::size_t>(g.anchor())].grad.has_value()) << pool;
      EXPECT_EQ(states[static_cast<std::size_t>(g.pool)].impl->decisions(), pool + ":max_pool=kernel+drelu");
      int pool_backward = 0;
      for (const Op& op : p->ops) {
        if (op.stage != Stage::backward) continue;
        EXPECT_NE(op.layer, g.relu) << what << " " << op.label << ": the relu's backward is the pool's";
        pool_backward += op.layer == g.pool;
      }
      EXPECT_EQ(pool_backward, 1) << what << " " << pool;
    }
    // CudnnSettings::fold_relu_into_pool false (the GPU test's counterpart): conv_bias_relu for the same relus.
    auto no_fold = plan(network, precision, Phase::training, 8, layout, true, AlgorithmPolicy::heuristic, true, false);
    EXPECT_EQ(no_fold->builder->fusions.count(kit::FusedKind::conv_bias_relu), 8) << what;
    EXPECT_EQ(no_fold->ops.size(), p->ops.size() + 5) << what << ": the five relus' backward ops";
    auto unfused = plan(network, precision, Phase::training, 8, layout, false);
    std::cerr << "vgg11 " << what << " training b8 plan: " << p->bytes / double(1 << 20) << " MiB fused, "
              << no_fold->bytes / double(1 << 20) << " MiB with conv_bias_relu instead, "
              << unfused->bytes / double(1 << 20) << " MiB unfused\n";
  }
  auto nchw = plan(network, Precision::fp32, Phase::training, 8);
  const std::string decisions = nchw->builder->fusions.decisions(network);
  EXPECT_EQ(nchw->builder->fusions.count(kit::FusedKind::conv_bias_relu_pool), 0);
  EXPECT_EQ(nchw->builder->fusions.count(kit::FusedKind::conv_bias_relu), 8) << decisions;
  EXPECT_NE(decisions.find("conv_bias_relu_pool[conv1_1+relu1_1+pool1](NCHW (strict fp32's layout): cuDNN's max "
                           "pooling"),
            std::string::npos)
      << decisions;
  auto inference = plan(network, Precision::bf16, Phase::inference, 8);
  EXPECT_EQ(inference->builder->fusions.count(kit::FusedKind::conv_bias_relu_pool), 0);
  EXPECT_EQ(inference->builder->fusions.count(kit::FusedKind::conv_bias_relu), 8);
}

// AlexNet's and GoogLeNet's overlapping 3x3 s2 pools (the gathering backward) take the group too, and
// OverFeat's 2x2 ones.
TEST(CudnnPlan, OverlappingMaxPoolsTakeTheReluToo) {
  for (const auto& [name, groups] : {std::pair{"alexnet", 3}, std::pair{"googlenet", 1}, std::pair{"overfeat", 3}}) {
    const Network network = make_network(name);
    auto p = plan(network, Precision::bf16, Phase::training, 8);
    EXPECT_EQ(p->builder->fusions.count(kit::FusedKind::conv_bias_relu_pool), groups)
        << name << ": " << p->builder->fusions.decisions(network);
  }
}

}  // namespace
}  // namespace crossbench::cudnn
