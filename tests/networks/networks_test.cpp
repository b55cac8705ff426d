// The nine networks of DESIGN.md: reference costs, shapes, the JSON graph, builder errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <map>

#include "crossbench/error.hpp"
#include "crossbench/network.hpp"

namespace crossbench {
namespace {

struct Reference {
  double forward_gflops;  // per image
  double parameters_millions;
};

// DESIGN.md "Networks": the figures every engine's TFLOP/s are computed from.
const std::map<std::string, Reference>& references() {
  static const std::map<std::string, Reference> table{
      {"alexnet", {1.43, 61.1}},   {"overfeat", {5.60, 145.9}},  {"vgg11", {15.2, 132.9}},
      {"vgg16", {30.9, 138.4}},    {"vgg19", {39.3, 143.7}},     {"googlenet", {3.17, 7.0}},
      {"resnet50", {8.18, 25.6}},  {"resnet101", {15.6, 44.5}},  {"resnet152", {23.0, 60.2}},
  };
  return table;
}

const Layer& layer_named(const Network& network, const std::string& name) {
  for (const Layer& layer : network.layers())
    if (layer.name == name) return layer;
  throw std::runtime_error("no layer named " + name + " in " + network.name());
}

// The layer that feeds the first flatten: the last spatial tensor.
const Layer& before_flatten(const Network& network) {
  for (const Layer& layer : network.layers())
    if (layer.kind == LayerKind::flatten) return network.layers().at(static_cast<std::size_t>(layer.inputs.front()));
  throw std::runtime_error("no flatten in " + network.name());
}

TEST(Networks, NamesAreTheNineOfTheDesignInOrder) {
  const std::vector<std::string> expected{"alexnet", "overfeat", "vgg11", "vgg16", "vgg19",
                                          "googlenet", "resnet50", "resnet101", "resnet152"};
  EXPECT_EQ(network_names(), expected);
}

TEST(Networks, ForwardFlopsAndParametersMatchTheReferenceWithinOnePercent) {
  for (const std::string& name : network_names()) {
    SCOPED_TRACE(name);
    const Network network = make_network(name);
    const Reference& reference = references().at(name);
    const double gflops = network.forward_flops_per_image() / 1e9;
    const double millions = static_cast<double>(network.parameters()) / 1e6;
    EXPECT_NEAR(gflops, reference.forward_gflops, 0.01 * reference.forward_gflops);
    EXPECT_NEAR(millions, reference.parameters_millions, 0.01 * reference.parameters_millions);
  }
}

TEST(Networks, TrainingCostsAboutThreeTimesTheForwardPass) {
  for (const std::string& name : network_names()) {
    SCOPED_TRACE(name);
    const Network network = make_network(name);
    const double ratio = network.training_flops_per_image() / network.forward_flops_per_image();
    EXPECT_GT(ratio, 2.5);
    EXPECT_LE(ratio, 3.0);
  }
}

TEST(Networks, EveryNetworkIsWellFormed) {
  for (const std::string& name : network_names()) {
    SCOPED_TRACE(name);
    const Network network = make_network(name);
    EXPECT_EQ(network.name(), name);
    EXPECT_EQ(network.layers().front().kind, LayerKind::input);
    EXPECT_EQ(network.layers().back().kind, LayerKind::softmax_cross_entropy);
    EXPECT_EQ(network.classes(), 1000);
    EXPECT_EQ(network.layers().at(static_cast<std::size_t>(network.logits_layer())).kind, LayerKind::fully_connected);
    EXPECT_GT(network.activation_bytes_per_image(), 0);
    // The first fully-connected layer reads an explicit flatten.
    for (const Layer& layer : network.layers()) {
      if (layer.kind != LayerKind::fully_connected) continue;
      const Layer& source = network.layers().at(static_cast<std::size_t>(layer.inputs.front()));
      EXPECT_EQ(source.output.height, 1);
      EXPECT_EQ(source.output.width, 1);
      break;
    }
  }
}

TEST(Networks, Shapes) {
  const TensorShape alexnet_last_conv{256, 6, 6};
  EXPECT_EQ(before_flatten(make_network("alexnet")).output, alexnet_last_conv);
  EXPECT_EQ(layer_named(make_network("alexnet"), "conv1").output, (TensorShape{64, 55, 55}));

  const TensorShape overfeat_last{1024, 6, 6};
  EXPECT_EQ(before_flatten(make_network("overfeat")).output, overfeat_last);
  EXPECT_EQ(make_network("overfeat").input_shape(), (TensorShape{3, 231, 231}));

  const Network googlenet = make_network("googlenet");
  EXPECT_EQ(layer_named(googlenet, "inception_5b/output").output, (TensorShape{1024, 7, 7}));
  EXPECT_EQ(layer_named(googlenet, "inception_3a/output").output, (TensorShape{256, 28, 28}));
  EXPECT_EQ(layer_named(googlenet, "pool1/3x3_s2").output, (TensorShape{64, 56, 56}));  // ceil mode
  EXPECT_EQ(layer_named(googlenet, "inception_3a/5x5").params.kernel, 5);

  const Network resnet50 = make_network("resnet50");
  EXPECT_EQ(layer_named(resnet50, "maxpool").output, (TensorShape{64, 56, 56}));
  EXPECT_EQ(layer_named(resnet50, "layer2.0.conv2").params.stride, 2);  // v1.5
  EXPECT_EQ(layer_named(resnet50, "layer2.0.conv1").params.stride, 1);
  EXPECT_EQ(layer_named(resnet50, "layer4.2.relu3").output, (TensorShape{2048, 7, 7}));
  EXPECT_EQ(resnet50.layers().at(static_cast<std::size_t>(resnet50.logits_layer())).output, (TensorShape{1000, 1, 1}));

  EXPECT_EQ(before_flatten(make_network("vgg16")).output, (TensorShape{512, 7, 7}));
}

TEST(Networks, LayerCosts) {
  const Network alexnet = make_network("alexnet");
  const Layer& conv1 = layer_named(alexnet, "conv1");
  EXPECT_DOUBLE_EQ(conv1.cost.forward_flops, 2.0 * 64 * 55 * 55 * 3 * 11 * 11);
  EXPECT_EQ(conv1.cost.parameters, 64 * 3 * 11 * 11 + 64);
  EXPECT_EQ(conv1.cost.activation_bytes, 64 * 55 * 55 * 4);
  const Layer& fc6 = layer_named(alexnet, "fc6");
  EXPECT_DOUBLE_EQ(fc6.cost.forward_flops, 2.0 * 9216 * 4096);
  EXPECT_EQ(fc6.cost.parameters, 9216 * 4096 + 4096);

  const Network resnet50 = make_network("resnet50");
  EXPECT_EQ(layer_named(resnet50, "conv1").cost.parameters, 64 * 3 * 7 * 7);  // no bias
  EXPECT_EQ(layer_named(resnet50, "bn1").cost.parameters, 2 * 64);
}

TEST(Networks, UnknownNameIsAUsageErrorListingTheValidOnes) {
  try {
    static_cast<void>(make_network("lenet"));
    FAIL() << "expected UsageError";
  } catch (const UsageError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("unknown network 'lenet'"), std::string::npos) << message;
    EXPECT_NE(message.find("valid networks: alexnet, overfeat, vgg11"), std::string::npos) << message;
    EXPECT_NE(message.find("resnet152"), std::string::npos) << message;
  }
}

// ---- Builder ----

TEST(NetworkBuilder, InfersShapesWithFloorAndCeilModes) {
  NetworkBuilder b("tiny", {3, 32, 32});
  const int conv = b.convolution(b.input(), 8, 3, 2, 1);               // (32 + 2 - 3) / 2 + 1 = 16
  const int floor_pool = b.max_pool(conv, 3, 2, 0, false);             // (16 - 3) / 2 + 1 = 7
  const int ceil_pool = b.max_pool(conv, 3, 2, 0, true);               // ceil(13 / 2) + 1 = 8
  const int padded_ceil_pool = b.max_pool(conv, 2, 2, 1, true);        // ceil(16 / 2) + 1 = 9 (last window starts at 16 < 17)
  const int flat = b.flatten(ceil_pool);
  const int fc = b.fully_connected(flat, 10);
  const Network network = b.finish_with_loss(fc);
  EXPECT_EQ(network.layers()[static_cast<std::size_t>(conv)].output, (TensorShape{8, 16, 16}));
  EXPECT_EQ(network.layers()[static_cast<std::size_t>(floor_pool)].output, (TensorShape{8, 7, 7}));
  EXPECT_EQ(network.layers()[static_cast<std::size_t>(ceil_pool)].output, (TensorShape{8, 8, 8}));
  EXPECT_EQ(network.layers()[static_cast<std::size_t>(padded_ceil_pool)].output, (TensorShape{8, 9, 9}));
  EXPECT_EQ(network.layers()[static_cast<std::size_t>(flat)].output, (TensorShape{8 * 8 * 8, 1, 1}));
  EXPECT_EQ(network.classes(), 10);
  EXPECT_EQ(network.layers()[static_cast<std::size_t>(conv)].name, "convolution1");  // generated name
}

TEST(NetworkBuilder, CeilModeDropsAWindowThatStartsInTheRightPadding) {
  // in 5, kernel 2, stride 2, padding 1: ceil((5 + 2 - 2) / 2) + 1 = 4 windows, the last would
  // start at 6 ≥ 5 + 1 (only right padding), so PyTorch gives 3.
  NetworkBuilder b("edge", {1, 5, 5});
  const int pool = b.max_pool(b.input(), 2, 2, 1, true);
  EXPECT_EQ(b.finish_with_loss(b.fully_connected(b.flatten(pool), 2)).layers()[1].output, (TensorShape{1, 3, 3}));
}

TEST(NetworkBuilder, RejectsBadInputs) {
  NetworkBuilder b("bad", {3, 8, 8});
  EXPECT_THROW(b.relu(5), Error);   // not an earlier layer
  EXPECT_THROW(b.relu(-1), Error);
  EXPECT_THROW(b.convolution(b.input(), 4, 9), Error);  // kernel larger than the input
  EXPECT_THROW(b.convolution(b.input(), 0, 3), Error);
  EXPECT_THROW(b.max_pool(b.input(), 2, 0), Error);     // stride 0
  const int a = b.convolution(b.input(), 4, 3, 1, 1);
  const int c = b.convolution(b.input(), 4, 3, 1, 0);
  EXPECT_THROW(b.add(a, c), Error);     // 4x8x8 + 4x6x6
  EXPECT_THROW(b.concat({a, c}), Error);
  EXPECT_THROW(b.dropout(a, 1.0), Error);
  try {
    b.relu(42, "late");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("input index 42 is out of range"), std::string::npos) << error.what();
  }
}

TEST(Network, ConstructorValidates) {
  NetworkBuilder b("ok", {1, 4, 4});
  const Network good = b.finish_with_loss(b.fully_connected(b.flatten(b.input()), 3));
  std::vector<Layer> layers = good.layers();
  EXPECT_NO_THROW(Network("copy", layers));

  std::vector<Layer> forward_reference = layers;
  forward_reference[1].inputs = {2};
  EXPECT_THROW(Network("x", forward_reference), Error);

  std::vector<Layer> loss_not_last = layers;
  std::swap(loss_not_last[2], loss_not_last[3]);
  EXPECT_THROW(Network("x", loss_not_last), Error);

  std::vector<Layer> two_inputs = layers;
  two_inputs[1].kind = LayerKind::input;
  EXPECT_THROW(Network("x", two_inputs), Error);

  std::vector<Layer> duplicate_names = layers;
  duplicate_names[2].name = duplicate_names[1].name;
  EXPECT_THROW(Network("x", duplicate_names), Error);
}

// ---- JSON ----

void expect_same_network(const Network& a, const Network& b) {
  ASSERT_EQ(a.name(), b.name());
  ASSERT_EQ(a.layers().size(), b.layers().size());
  for (std::size_t i = 0; i < a.layers().size(); ++i) {
    const Layer& x = a.layers()[i];
    const Layer& y = b.layers()[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.inputs, y.inputs);
    EXPECT_EQ(x.output, y.output);
    EXPECT_EQ(x.params.out_channels, y.params.out_channels);
    EXPECT_EQ(x.params.kernel, y.params.kernel);
    EXPECT_EQ(x.params.stride, y.params.stride);
    EXPECT_EQ(x.params.padding, y.params.padding);
    EXPECT_EQ(x.params.bias, y.params.bias);
    EXPECT_EQ(x.params.ceil_mode, y.params.ceil_mode);
    EXPECT_EQ(x.params.lrn_size, y.params.lrn_size);
    EXPECT_EQ(x.params.lrn_alpha, y.params.lrn_alpha);
    EXPECT_EQ(x.params.lrn_beta, y.params.lrn_beta);
    EXPECT_EQ(x.params.lrn_k, y.params.lrn_k);
    EXPECT_EQ(x.params.dropout_rate, y.params.dropout_rate);
    EXPECT_EQ(x.params.bn_epsilon, y.params.bn_epsilon);
    EXPECT_EQ(x.params.bn_momentum, y.params.bn_momentum);
    EXPECT_EQ(x.cost.forward_flops, y.cost.forward_flops);
    EXPECT_EQ(x.cost.parameters, y.cost.parameters);
    EXPECT_EQ(x.cost.activation_bytes, y.cost.activation_bytes);
  }
}

TEST(NetworkJson, RoundTripsEveryNetwork) {
  for (const std::string& name : network_names()) {
    SCOPED_TRACE(name);
    const Network network = make_network(name);
    const nlohmann::json document = to_json(network);
    const Network back = network_from_json(nlohmann::json::parse(document.dump()));
    expect_same_network(network, back);
    EXPECT_EQ(to_json(back).dump(), document.dump());
  }
}

TEST(NetworkJson, DocumentsFormatTotalsAndOnlyTheParamsOfEachKind) {
  const Network network = make_network("googlenet");
  const nlohmann::json document = to_json(network);
  EXPECT_EQ(document["format"], "crossbench-network/1");
  EXPECT_EQ(document["input"], (nlohmann::json{{"channels", 3}, {"height", 224}, {"width", 224}}));
  EXPECT_EQ(document["classes"], 1000);
  EXPECT_EQ(document["totals"]["parameters"], network.parameters());
  EXPECT_DOUBLE_EQ(document["totals"]["forward_flops"].get<double>(), network.forward_flops_per_image());
  const nlohmann::json& conv = document["layers"][1];
  EXPECT_EQ(conv["kind"], "convolution");
  EXPECT_EQ(conv["params"], (nlohmann::json{{"out_channels", 64}, {"kernel", 7}, {"stride", 2}, {"padding", 3},
                                            {"bias", true}}));
  EXPECT_EQ(conv["output"], nlohmann::json::array({64, 112, 112}));
  for (const nlohmann::json& layer : document["layers"])
    if (layer["kind"] == "relu" || layer["kind"] == "concat") EXPECT_TRUE(layer["params"].empty());
    else if (layer["kind"] == "lrn") EXPECT_EQ(layer["params"].size(), 4u);
}

Network network_from_patched(const std::string& name, const std::function<void(nlohmann::json&)>& patch) {
  nlohmann::json document = to_json(make_network(name));
  patch(document);
  return network_from_json(document);
}

void expect_rejected(const std::function<void(nlohmann::json&)>& patch, const std::string& message_part) {
  try {
    network_from_patched("alexnet", patch);
    FAIL() << "expected Error mentioning '" << message_part << "'";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(message_part), std::string::npos) << error.what();
  }
}

TEST(NetworkJson, RejectsMalformedDocuments) {
  expect_rejected([](nlohmann::json& d) { d["format"] = "crossbench-network/0"; }, "\"format\"");
  expect_rejected([](nlohmann::json& d) { d.erase("layers"); }, "missing \"layers\"");
  expect_rejected([](nlohmann::json& d) { d["layers"][1]["kind"] = "deconvolution"; }, "unknown kind \"deconvolution\"");
  expect_rejected([](nlohmann::json& d) { d["layers"][3]["inputs"] = {7}; }, "input index 7 is out of range");
  expect_rejected([](nlohmann::json& d) { d["layers"][3]["inputs"] = {-1}; }, "input index -1 is out of range");
  expect_rejected([](nlohmann::json& d) { d["layers"][1]["params"].erase("kernel"); }, "missing \"kernel\"");
  expect_rejected([](nlohmann::json& d) { d["layers"][1]["params"]["stide"] = 2; }, "unexpected parameter \"stide\"");
  expect_rejected([](nlohmann::json& d) { d["layers"][1]["params"]["kernel"] = "11"; }, "must be an integer");
  expect_rejected([](nlohmann::json& d) { d["layers"][1]["output"] = {64, 56, 56}; }, "disagrees with the inferred shape");
  expect_rejected([](nlohmann::json& d) { d["layers"][2]["index"] = 7; }, "\"index\" is 7");
  expect_rejected([](nlohmann::json& d) { d["layers"].erase(d["layers"].size() - 1); }, "softmax_cross_entropy");
  expect_rejected([](nlohmann::json& d) { d["layers"][0]["kind"] = "relu"; }, "layer 0 must be the input");
  expect_rejected([](nlohmann::json& d) { d["classes"] = 10; }, "\"classes\"");
  expect_rejected([](nlohmann::json& d) { d["layers"][2]["name"] = "conv1"; }, "two layers are named 'conv1'");
  EXPECT_THROW(network_from_json(nlohmann::json::array()), Error);
}

TEST(NetworkJson, KeepsBatchNormSettingsAndNamesTheBuilderDoesNotTake) {
  const Network network = network_from_patched("resnet50", [](nlohmann::json& d) {
    d["layers"][2]["params"]["epsilon"] = 1e-3;  // bn1
    d["layers"][0]["name"] = "data";
    d["layers"].back()["name"] = "cross_entropy";
  });
  EXPECT_EQ(network.layers()[2].params.bn_epsilon, 1e-3);
  EXPECT_EQ(network.layers().front().name, "data");
  EXPECT_EQ(network.layers().back().name, "cross_entropy");
}

}  // namespace
}  // namespace crossbench
