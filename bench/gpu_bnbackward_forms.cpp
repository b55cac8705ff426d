// gpu_bnbackward_forms: which cuDNN Graph API forms of the batch-norm BACKWARD this GPU's cuDNN can run. The
// engine's ResNet-50 fp16 step at batch 256 spends 12.6 of 37.6 ms in its own relu-backward + batch-norm-backward
// kernels (two passes over y and dy); before building anything this asks cuDNN, for ResNet-50's conv2_x shape in
// NHWC (N x 64 x 56 x 56, 3x3 conv 64->64, pad 1, stride 1), each form, written as cudnn-frontend's samples write it
// (samples/cpp/norm/batchnorm.cpp, samples/cpp/convolution/dgrads.cpp and wgrads.cpp):
//   dbn                    batchnorm_backward(dy, x, scale; mean, inv_variance) -> dx, dscale, dbias
//   drelu_dbn              dz = RELU_BWD(dy, y_bn) (virtual, io type as in the sample) ; batchnorm_backward(dz, x, ..)
//                          (what the engine's bn_relu backward computes)
//   dgrad_drelu            conv_dgrad(dy, w) (virtual) ; dz = RELU_BWD(dgrad, y_bn) (output)   (MLPerf's dgrad+drelu)
//   dgrad_drelu_dbnweight  conv_dgrad(dy, w) ; dz = RELU_BWD(dgrad, relu((x - mean) * inv_variance * scale + bias))
//                          (output) ; dbn_weight(dz, x, mean, inv_variance, scale) -> dscale, dbias, eq_scale_dy,
//                          eq_scale_x, eq_bias   (the sample's "Dgrad Drelu DBNweight" graph)
//   wgrad_sbr              conv_wgrad(dy, relu(x * scale + bias)) -> dw   (the sample's "scale-bias-relu-wgrad")
// in fp16, bf16 and fp32 io with fp32 intermediates and fp32 compute (wgrad_sbr also with the io type as
// intermediate, as its sample has it), and prints for each whether cuDNN lists and builds a plan, how many it
// lists, and where not, the first reasons. Lists and builds plans only: nothing is allocated or run.
// Plain frontend calls, no crossbench type: what is probed is cuDNN itself.
//   gpu_bnbackward_forms [--batch 32]
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cudnn_forms_probe.hpp"

namespace fe = cudnn_frontend;
using namespace cudnn_forms_probe;  // NOLINT: the probes' shared vocabulary

namespace {

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

std::string probe(cudnnHandle_t handle, const std::string& shape, const Form& form, std::int64_t n) {
  const std::int64_t c = 64, k = 64, h = 56, w = 56;  // ResNet-50's conv2_x 3x3
  fe::graph::Graph g;
  g.set_io_data_type(form.io).set_intermediate_data_type(form.intermediate).set_compute_data_type(fe::DataType_t::FLOAT);
  // An activation [N, channels, H, W] in NHWC, of the io type.
  const auto activation = [&](const char* name, std::int64_t uid, std::int64_t channels) {
    return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({n, channels, h, w}).set_stride(
        {channels * h * w, 1, channels * w, channels}));
  };
  // A per-channel tensor [1, C, 1, 1]; fp32 where the sample says so, else of the io type.
  const auto per_channel = [&](const char* name, std::int64_t uid, bool fp32) {
    auto attributes = fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({1, c, 1, 1}).set_stride(
        {c, 1, c, c});
    if (fp32) attributes.set_data_type(fe::DataType_t::FLOAT);
    return g.tensor(attributes);
  };
  const auto filter = [&](std::int64_t uid) {
    return g.tensor(fe::graph::Tensor_attributes().set_name("w").set_uid(uid).set_dim({k, c, 3, 3}).set_stride(
        {c * 9, 1, c * 3, c}));
  };
  const auto pointwise = [&](TensorPtr a, TensorPtr b, fe::PointwiseMode_t mode) {
    return g.pointwise(a, b, fe::graph::Pointwise_attributes().set_mode(mode));
  };
  const auto output = [](const TensorPtr& t, std::int64_t uid, fe::DataType_t type) {
    t->set_output(true).set_uid(uid).set_data_type(type);
  };

  if (shape == "dbn" || shape == "drelu_dbn") {
    auto dy = activation("dy", 1, c);
    auto x = activation("x", 2, c);
    auto scale = per_channel("scale", 3, true);
    auto mean = per_channel("mean", 4, true);
    auto inv_variance = per_channel("inv_variance", 5, true);
    auto gradient = dy;
    if (shape == "drelu_dbn") {
      auto y_bn = activation("y_bn", 6, c);  // the batch-norm's output, the relu's input
      gradient = pointwise(dy, y_bn, fe::PointwiseMode_t::RELU_BWD);
      gradient->set_data_type(form.io);  // virtual, of the io type, as "BN_inference DRelu DBN Graph" has it
    }
    auto [dx, dscale, dbias] = g.batchnorm_backward(
        gradient, x, scale, fe::graph::Batchnorm_backward_attributes().set_name("dbn").set_saved_mean_and_inv_variance(
                                mean, inv_variance));
    output(dx, 7, form.io);
    output(dscale, 8, fe::DataType_t::FLOAT);
    output(dbias, 9, fe::DataType_t::FLOAT);
  } else if (shape == "dgrad_drelu" || shape == "dgrad_drelu_dbnweight") {
    auto dy = activation("dy", 1, k);  // the gradient of the NEXT conv's output
    auto weights = filter(2);
    auto dgrad = g.conv_dgrad(
        dy, weights, fe::graph::Conv_dgrad_attributes().set_padding({1, 1}).set_stride({1, 1}).set_dilation({1, 1}));
    dgrad->set_dim({n, c, h, w});  // virtual, of the intermediate type
    if (shape == "dgrad_drelu") {
      auto y_bn = activation("y_bn", 3, c);
      output(pointwise(dgrad, y_bn, fe::PointwiseMode_t::RELU_BWD), 4, form.io);
    } else {
      // As the sample: the relu's input recomputed from the batch-norm's input x and its statistics.
      auto x = activation("x", 3, c);
      auto mean = per_channel("mean", 4, true);
      auto inv_variance = per_channel("inv_variance", 5, true);
      auto scale = per_channel("scale", 6, true);
      auto bias = per_channel("bias", 7, true);
      auto centred = pointwise(x, mean, fe::PointwiseMode_t::SUB);
      auto normalized = pointwise(centred, inv_variance, fe::PointwiseMode_t::MUL);
      auto scaled = pointwise(normalized, scale, fe::PointwiseMode_t::MUL);
      auto y_bn = pointwise(scaled, bias, fe::PointwiseMode_t::ADD);
      auto dz = pointwise(dgrad, y_bn, fe::PointwiseMode_t::RELU_BWD);
      dz->set_output(true).set_uid(8);  // the sample leaves its type to the graph (io)
      auto [dscale, dbias, eq_scale_dy, eq_scale_x, eq_bias] =
          g.dbn_weight(dz, x, mean, inv_variance, scale, fe::graph::DBN_weight_attributes().set_name("dbn_weight"));
      // The sample leaves these per-channel outputs' types to the graph too (io); so does this.
      dscale->set_output(true).set_uid(9);
      dbias->set_output(true).set_uid(10);
      eq_scale_dy->set_output(true).set_uid(11);
      eq_scale_x->set_output(true).set_uid(12);
      eq_bias->set_output(true).set_uid(13);
    }
  } else if (shape == "wgrad_sbr") {
    auto x = activation("x", 1, c);
    auto scale = per_channel("scale", 2, false);  // the sample's scale and bias are of the io type
    auto bias = per_channel("bias", 3, false);
    auto scaled = pointwise(x, scale, fe::PointwiseMode_t::MUL);
    auto biased = pointwise(scaled, bias, fe::PointwiseMode_t::ADD);
    auto relu = g.pointwise(biased, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD));
    auto dy = activation("dy", 4, k);
    auto dw = g.conv_wgrad(
        dy, relu, fe::graph::Conv_wgrad_attributes().set_padding({1, 1}).set_stride({1, 1}).set_dilation({1, 1}));
    dw->set_dim({k, c, 3, 3});
    output(dw, 5, form.io);
  } else {
    return "unknown form";
  }

  return plans_text(handle, g);
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t batch = batch_argument(argc, argv, "gpu_bnbackward_forms");
  if (batch < 0) return 2;
  const Handle handle = make_handle("gpu_bnbackward_forms");
  if (!handle) return 1;
  std::printf("cuDNN %zu, frontend %d, batch %lld, conv2_x 64x56x56, conv 3x3 64->64 pad 1 stride 1, NHWC\n",
              cudnnGetVersion(), CUDNN_FRONTEND_VERSION, static_cast<long long>(batch));
  const std::vector<Form> forms{
      {fe::DataType_t::HALF, fe::DataType_t::FLOAT, "fp16", "fp32"},
      {fe::DataType_t::BFLOAT16, fe::DataType_t::FLOAT, "bf16", "fp32"},
      {fe::DataType_t::FLOAT, fe::DataType_t::FLOAT, "fp32", "fp32"},
  };
  // wgrad_sbr's sample has the io type as intermediate: that too.
  const std::vector<Form> io_intermediate{
      {fe::DataType_t::HALF, fe::DataType_t::HALF, "fp16", "fp16"},
      {fe::DataType_t::BFLOAT16, fe::DataType_t::BFLOAT16, "bf16", "bf16"},
  };
  const auto line = [&](const char* shape, const Form& form) {
    std::string result;
    try {
      result = probe(handle.get(), shape, form, batch);
    } catch (const std::exception& error) {
      result = std::string("refused (exception): ") + reasons(error.what());
    }
    std::printf("%-22s io=%s intermediate=%s: %s\n", shape, form.io_name, form.intermediate_name, result.c_str());
    std::fflush(stdout);
  };
  for (const char* shape : {"dbn", "drelu_dbn", "dgrad_drelu", "dgrad_drelu_dbnweight", "wgrad_sbr"})
    for (const Form& form : forms) line(shape, form);
  for (const Form& form : io_intermediate) line("wgrad_sbr", form);
  return 0;
}
