// gpu_genstats_forms: which forms of "a convolution that also writes its output's per-channel sums" (cuDNN's
// genstats) this GPU's cuDNN can run. The engine's statistics graph (conv -> y, genstats(y)) was refused on an
// H100 in tf32, bf16 and fp32 (bench/results/2026-12-12/call70h): the runtime fusion engine said
// "mathPrec != CUDNN_DATA_FLOAT" of the genstats node, whose math precision the frontend takes from its input's
// type, and the pre-compiled one "!isTypeSupported". So this asks, for one ResNet-50 shape in NHWC, each form:
//   plain     conv -> y (output, io type) ; genstats(y)                     (the engine's graph today)
//   virtual   conv -> y32 (fp32, virtual) ; genstats(y32) ; y = identity(y32) (output, io type)
//   sbr       relu(x * scale + bias) -> conv -> y (output) ; genstats(y)    (cudnn-frontend's own test's form)
// in fp16, bf16 and fp32 io (fp32: tf32 math allowed), with intermediates in fp32 or in the io type, and
// prints for each whether cuDNN lists and builds a plan, how many it lists, and where not, the first reasons.
// Plain frontend calls, no crossbench type: what is probed is cuDNN itself.
//   gpu_genstats_forms [--batch 32]
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cudnn_forms_probe.hpp"

namespace fe = cudnn_frontend;
using namespace cudnn_forms_probe;  // NOLINT: the probes' shared vocabulary

namespace {

std::string probe(cudnnHandle_t handle, const std::string& shape, const Form& form, std::int64_t n) {
  const std::int64_t c = 64, k = 64, h = 56, w = 56;  // ResNet-50's conv2_x 3x3
  fe::graph::Graph g;
  g.set_io_data_type(form.io).set_intermediate_data_type(form.intermediate).set_compute_data_type(fe::DataType_t::FLOAT);
  auto x = g.tensor(fe::graph::Tensor_attributes().set_name("x").set_uid(1).set_dim({n, c, h, w}).set_stride(
      {c * h * w, 1, c * w, c}));
  auto filter = g.tensor(fe::graph::Tensor_attributes().set_name("w").set_uid(2).set_dim({k, c, 3, 3}).set_stride(
      {c * 9, 1, c * 3, c}));
  auto input = x;
  if (shape == "sbr") {
    auto scale = g.tensor(fe::graph::Tensor_attributes().set_name("scale").set_uid(6).set_dim({1, c, 1, 1}).set_stride(
        {c, 1, c, c}));
    auto bias = g.tensor(fe::graph::Tensor_attributes().set_name("bias").set_uid(7).set_dim({1, c, 1, 1}).set_stride(
        {c, 1, c, c}));
    auto scaled = g.pointwise(x, scale, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::MUL));
    auto biased = g.pointwise(scaled, bias, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
    input = g.pointwise(biased, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD));
  }
  auto y = g.conv_fprop(input, filter,
                        fe::graph::Conv_fprop_attributes().set_padding({1, 1}).set_stride({1, 1}).set_dilation({1, 1}));
  auto statistics_input = y;
  if (shape == "virtual") {
    y->set_data_type(fe::DataType_t::FLOAT);
    statistics_input = y;
    y = g.pointwise(y, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::IDENTITY));
  }
  y->set_output(true).set_uid(3).set_data_type(form.io);
  auto [sum, squares] =
      g.genstats(statistics_input, fe::graph::Genstats_attributes().set_name("genstats").set_compute_data_type(
                                       fe::DataType_t::FLOAT));
  sum->set_output(true).set_uid(4).set_data_type(fe::DataType_t::FLOAT);
  squares->set_output(true).set_uid(5).set_data_type(fe::DataType_t::FLOAT);
  return plans_text(handle, g);
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t batch = batch_argument(argc, argv, "gpu_genstats_forms");
  if (batch < 0) return 2;
  const Handle handle = make_handle("gpu_genstats_forms");
  if (!handle) return 1;
  std::printf("cuDNN %zu, batch %lld, conv 3x3 64->64 at 56x56, NHWC\n", cudnnGetVersion(),
              static_cast<long long>(batch));
  const std::vector<Form> forms{
      {fe::DataType_t::HALF, fe::DataType_t::FLOAT, "fp16", "fp32"},
      {fe::DataType_t::HALF, fe::DataType_t::HALF, "fp16", "fp16"},
      {fe::DataType_t::BFLOAT16, fe::DataType_t::FLOAT, "bf16", "fp32"},
      {fe::DataType_t::BFLOAT16, fe::DataType_t::BFLOAT16, "bf16", "bf16"},
      {fe::DataType_t::FLOAT, fe::DataType_t::FLOAT, "fp32", "fp32"},
  };
  for (const char* shape : {"plain", "virtual", "sbr"})
    for (const Form& form : forms)
      std::printf("%-8s io=%s intermediate=%s: %s\n", shape, form.io_name, form.intermediate_name,
                  probe(handle.get(), shape, form, batch).c_str());
  return 0;
}
