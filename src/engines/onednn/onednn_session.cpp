// Running a built Graph: step() executes its ops in order on one stream and
// waits (the Runner's steady-clock timer brackets a finished step); check()
// runs a deterministic forward (+ backward) and summarises the results.
#include "engines/onednn/onednn_session.hpp"

#include <omp.h>

#include <cmath>

#include "crossbench/error.hpp"

namespace crossbench::onednn {

OnednnSession::OnednnSession(const Network& network, const CellSpec& cell, const EngineConfig& config,
                             const GraphOptions& options, Communicator* communicator)
    : config_(config) {
  if (config_.threads > 0) omp_set_num_threads(config_.threads);
  graph_ = build_graph(network, cell, config, options, communicator);
  for (const Layer& layer : network.layers()) network_layers_.emplace_back(layer.name, std::string(to_string(layer.kind)));
  record_.decisions = recipe_of(graph_->data_type == dt::bf16 ? Precision::bf16 : Precision::fp32);  // all it runs
  record_.decisions += ' ';  // appended apart: GCC 12 warns (-Wrestrict, a false positive) on " " + std::string&&
  record_.decisions += graph_->fusions.decisions(network);
  if (graph_->sums_into_residual + graph_->sums_into_copy > 0)
    record_.decisions += " sum_post_op=into_residual:" + std::to_string(graph_->sums_into_residual) +
                         ",into_copy:" + std::to_string(graph_->sums_into_copy);
  if (graph_->data_parallel) {
    record_.decisions += "; gradients averaged in " + graph_->data_parallel->buckets->description() + "; images " +
                         std::to_string(graph_->first_image) + ".. of the global batch";
    timer_.time_exposed_communication(&graph_->data_parallel->last_exposed_ms);
  }
}

void OnednnSession::run(std::size_t begin, std::size_t end) {
  std::size_t i = begin;
  try {
    for (; i < end; ++i) {
      Op& op = graph_->ops[i];
      if (op.host) {
        op.host();  // CPU streams run primitives synchronously: the inputs are ready
      } else {
        op.primitive.execute(graph_->stream, op.bound);
      }
    }
    graph_->stream.wait();
  } catch (const dnnl::error& e) {
    throw_library_error("oneDNN", i < end ? graph_->ops[i].label : "stream wait", __FILE__, __LINE__, e.what(),
                        e.status == dnnl_out_of_memory);
  }
}

void OnednnSession::step() {
  // OpenMP's thread count is per calling thread: set it where steps run. No allocation here.
  if (config_.threads > 0 && omp_get_max_threads() != config_.threads) omp_set_num_threads(config_.threads);
  graph_->state->dropout_step = steps_++;
  graph_->state->update_running_stats = true;
  run(0, graph_->training ? graph_->ops.size() : graph_->forward_end);
}

std::vector<float> OnednnSession::to_canonical(const Tensor& tensor, const md& canonical) {
  std::vector<float> values(static_cast<std::size_t>(elements_of(canonical)));
  dnnl::memory from(tensor.desc, graph_->engine, graph_->pool.address(tensor.buffer, tensor.offset));
  dnnl::memory to(canonical, graph_->engine, values.data());
  CB_CHECK_DNNL(dnnl::reorder(from, to).execute(graph_->stream, from, to));
  graph_->stream.wait();
  return values;
}

OutputCheck OnednnSession::check() {
  if (config_.threads > 0) omp_set_num_threads(config_.threads);
  RunState& state = *graph_->state;
  state.dropout_step = 0;
  state.update_running_stats = false;  // check() leaves the model as it found it
  OutputCheck result;
  bool finite = true;

  run(0, graph_->forward_end);
  const std::vector<float> logits = to_canonical(graph_->logits, plain_like(graph_->logits.desc, dt::f32));
  for (float v : logits) {
    result.logits_checksum += v;
    finite = finite && std::isfinite(v);
  }
  run(graph_->forward_end, graph_->loss_end);
  result.loss = state.loss;
  finite = finite && std::isfinite(result.loss);

  if (graph_->training) {
    run(graph_->loss_end, graph_->backward_end);
    double total = 0;
    for (const Parameter& p : graph_->parameters) {
      double sum = 0;
      for (float v : to_canonical(p.gradient, p.canonical)) sum += static_cast<double>(v) * v;
      finite = finite && std::isfinite(sum);
      result.gradient_norms.push_back(std::sqrt(sum));
      total += sum;
    }
    result.gradient_norm = std::sqrt(total);
  } else {
    result.gradient_norm = std::numeric_limits<double>::quiet_NaN();
  }
  state.update_running_stats = true;
  result.finite = finite;
  return result;
}

const Parameter& OnednnSession::find(int layer, synthetic::Slot slot) const {
  for (const Parameter& p : graph_->parameters)
    if (p.layer == layer && p.slot == slot) return p;
  throw Error("oneDNN session: layer " + std::to_string(layer) + " has no such parameter");
}

std::vector<float> OnednnSession::parameter(int layer, synthetic::Slot slot) {
  const Parameter& p = find(layer, slot);
  return to_canonical(p.value, p.canonical);
}

std::vector<float> OnednnSession::parameter_gradient(int layer, synthetic::Slot slot) {
  const Parameter& p = find(layer, slot);
  if (!p.gradient.valid()) throw Error("oneDNN session: no gradients outside training");
  return to_canonical(p.gradient, p.canonical);
}

std::vector<float> OnednnSession::output(int layer) {
  const Tensor& t = graph_->outputs.at(static_cast<std::size_t>(layer));
  if (!t.valid()) throw Error("oneDNN session: layer " + std::to_string(layer) + "'s output is fused away");
  return to_canonical(t, plain_like(t.desc, dt::f32));
}

std::vector<float> OnednnSession::output_gradient(int layer) {
  const Tensor& t = graph_->gradients.at(static_cast<std::size_t>(layer));
  if (!t.valid()) throw Error("oneDNN session: layer " + std::to_string(layer) + " has no gradient");
  return to_canonical(t, plain_like(t.desc, dt::f32));
}

std::vector<float> OnednnSession::logits() { return to_canonical(graph_->logits, plain_like(graph_->logits.desc, dt::f32)); }

}  // namespace crossbench::onednn
