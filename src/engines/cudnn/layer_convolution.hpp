// The cuDNN engine's convolution layer: what one convolution holds from build to run, and the
// choices its setup makes. Its jobs, one file each:
// - layer_convolution.cpp: the build (forward_convolution, backward_convolution), setup's order of
//   choices, decisions and the run of each direction;
// - layer_convolution_graph_search.cpp: the Graph API plans timed against the legacy choice, the
//   agreement checks every measured candidate passes, and the near-tied plans timed again in the step;
// - layer_convolution_gemm_search.cpp: the GEMM-based candidates (im2col + GEMM, the 1x1 weight
//   gradient as one cuBLAS GEMM) and the bias gradient's kernel against cuDNN's.
// Only these three files include it (the engine reaches a convolution through its builders, graph.hpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engines/cudnn/algorithms.hpp"
#include "engines/cudnn/cublaslt_matmul.hpp"
#include "engines/cudnn/gemm_weight_gradient.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/graph_convolution_cache.hpp"
#include "engines/cudnn/im2col_gemm.hpp"

namespace crossbench::cudnn {

class Convolution final : public LayerImpl {
 public:
  static constexpr double kMemoryBandwidth = 3.0e12;  // [bytes/s] a conservative HBM figure for the fusion estimate
  // Graph API engine configurations timed per direction: the heuristics' first ones (each needs a plan build).
  static constexpr int kGraphCandidates = 6;
  // The residual graph's engines compile at runtime (seconds each, in every cold process): its first two.
  static constexpr int kResidualGraphCandidates = 2;
  // engine.search_in_step: the Graph API plans timed within this fraction of the chosen one are its near
  // ties, timed again inside the step; at most kInStepOptions plans a choice (the chosen one included).
  // The H200's OverFeat tf32 conv5: two configurations 0.6% apart in the search, 3% apart in the step
  // (bench/results/2026-12-05/call52).
  static constexpr double kInStepWindow = 0.02;
  static constexpr std::size_t kInStepOptions = 3;
  // The NHWC im2col + GEMM forward is offered to convolutions of at most this many real input channels (first
  // layers: 3), where the columns stay narrow (C*R*S); their chunks: columns of about these sizes [bytes], which an
  // H100's or H200's L2 cache (50 / 60 MB) can hold between im2col's write and the GEMM's read.
  static constexpr std::int64_t kIm2colNhwcMaxChannels = 4;
  static constexpr std::int64_t kIm2colChunkBytes[] = {std::int64_t{16} << 20, std::int64_t{40} << 20};
  // cuBLASLt heuristic plans timed per chunk size for the NHWC im2col forward's GEMM (with its bias epilogue).
  static constexpr int kIm2colLtCandidates = 4;

  // Build time.
  std::string name;
  Precision precision = Precision::fp32;
  bool nhwc = false;
  std::int64_t kernel = 1, stride = 1, padding = 0;
  std::int64_t channels = 0;  // the input's real channels (x may store more, zero-padded: Builder::input_channels)
  Tensor x, y, w, bias;
  bool has_bias = false;          // a bias is added (the layer's own, or a folded batch-norm's shift)
  bool folds_batch_norm = false;  // inference: the batch-norm after it is folded in (bias = its shift)
  bool fusion_candidate = false;
  bool training = false;
  // Inference conv_bn_add_relu: y = relu(conv + bias + residual); the relu after the add is always ours.
  Tensor residual;
  bool adds_residual = false;
  bool residual_graph = false;  // graph_forward is the fused graph (conv + bias + residual + relu)
  std::string residual_note;    // why the residual add runs unfused (our add+relu kernel after the bias)
  // Backward (training).
  Tensor dy, dw, db;
  // kernels::channel_sum instead of cudnnConvolutionBackwardBias for bf16 (which
  // cuDNN refuses) and for NHWC gradients (cuDNN 9.19 took 11 ms for VGG's
  // conv1_1 at batch 64 in fp16 NHWC, against 0.6 ms for the whole bf16
  // backward of that layer with this kernel).
  Tensor bias_accumulator;
  bool bias_gradient_kernel = false;  // kernels::channel_sum, else cudnnConvolutionBackwardBias
  float bias_kernel_ms = NAN, bias_cudnn_ms = NAN;  // measured (exhaustive, where both apply) [ms]
  bool data_gradient = false;
  Tensor dx;
  float dx_beta = 0;

  // Setup time.
  TensorDesc xd, yd, bd, dyd, dxd;
  FilterDesc wd;
  ConvDesc forward_cd, data_cd, filter_cd;
  AlgorithmChoice forward, data, filter;
  bool filter_gemm = false;      // the weight gradient as one cuBLAS GEMM (1x1, NHWC)
  float filter_gemm_ms = NAN;    // its measured time on the search arena [ms]
  bool forward_im2col = false;   // the forward as im2col + GEMM (fp32 NCHW, or NHWC: forward_nhwc_chunk)
  float forward_im2col_ms = NAN; // [ms] on the search arena (NHWC: its fastest chunk's)
  std::int64_t forward_nhwc_chunk = 0;  // NHWC im2col + GEMM: images per chunk (the search's fastest)
  // NHWC im2col + GEMM through a cuBLASLt plan, its epilogue adding the bias (and the relu of a group).
  std::optional<LtMatmul> nhwc_matmul;
  std::optional<LtPlan> nhwc_plan;
  cublasLtEpilogue_t nhwc_epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  std::string nhwc_note;  // why the cuBLASLt plan was dropped at run time
  bool filter_im2col = false;    // the weight gradient as im2col + GEMM (fp32 NCHW)
  float filter_im2col_ms = NAN;  // [ms] on the search arena
  std::string forward_times, filter_times, data_times;  // exhaustive: the re-timed candidates [ms]
  // exhaustive: the faster candidates refused for disagreeing with the reference algorithm (agreeing_candidates)
  std::string forward_refused, filter_refused, data_refused;
  // The Graph API's measured plan of each direction, where it won (else null: the legacy choice).
  struct GraphPlan {
    std::shared_ptr<GraphConvolution> graph;  // shared by the session's identical convolutions
    int plan = -1;
    float time_ms = NAN;  // [ms] median in context
    // [ms] what it was clearly faster than: the legacy choice's median, plus, for a graph that fuses
    // the epilogue, the bias and add+relu passes it saves (modelled from y's bytes, not measured)
    double incumbent_ms = NAN;
    std::string name, note;  // the plan; why none was taken (refused graph, slower: its best time)
    bool unchecked = false;  // taken with nothing to hold its output to (its reference did not run): decisions say so
    // engine.search_in_step: [0] the plan above, then the plans the search timed within kInStepWindow of
    // it that agree with the reference; `signature` keys the choice (the graph's problem and direction).
    struct Option {
      int plan = -1;
      std::string name;
      float time_ms = NAN;  // [ms] the search's median
    };
    std::vector<Option> options;
    std::string signature;
    std::string in_step;  // decisions: the step's choice where it replaced the search's
  };
  GraphPlan graph_forward, graph_data, graph_filter;
  // engine.conv_statistics (training): the statistics of the fused batch-norm after it (null: none asked
  // for); whether graph_forward is the statistics graph (conv → y, Σy, Σy²: the batch-norm then skips its
  // own pass), and why not; the batch-norm's name; the search's sums (2 C floats, then 2 C doubles: the
  // reference of its own output, kernels::channel_sums), held for the search only.
  std::shared_ptr<ConvolutionStatistics> statistics;
  bool statistics_graph = false;
  std::string statistics_note, statistics_for;
  DeviceBuffer search_sums;
  bool fused = false;            // cudnnConvolutionBiasActivationForward
  bool kernel_epilogue = false;  // unfused: bias (+ relu) in one kernels::bias_activation pass
  std::string fallback;  // why a fused forward fell back, if it did

  // layer_convolution.cpp: the build's plan of the search arena, setup, decisions, the run.
  void plan_search(SetupContext& ctx) override;
  ConvDesc make_conv(Precision p) const;
  void adopt(cudnnConvolutionDescriptor_t cd, const AlgorithmChoice& c) const;
  void setup(SetupContext& ctx) override;
  void epilogue_on(cudnnHandle_t dnn, cudaStream_t stream, void* py, const void* pbias) const;
  bool relu_fused() const override;
  const char* math(const AlgorithmChoice& c) const;
  std::string decisions() const override;
  void run_forward(const Exec& e);
  void run_epilogue(const Exec& e);
  void run_backward_filter(const Exec& e);
  void run_backward_data(const Exec& e);

  // layer_convolution_graph_search.cpp: Graph API plans, agreement checks, the in-step choices.
  void choose_residual_graph(SetupContext& ctx, const std::string& forward_signature);
  void choose_statistics_graph(SetupContext& ctx, const std::string& forward_signature);
  void choose_graph_plan(SetupContext& ctx, GraphDirection direction, bool bias_relu, const std::string& signature,
                         double incumbent_ms, GraphPlan& out, bool with_residual = false, bool with_statistics = false);
  bool replay_graph_plan(SetupContext& ctx, const GraphConvolutionProblem& problem, const std::string& signature,
                         double incumbent_ms, GraphPlan& out);
  bool plan_agrees(SetupContext& ctx, const GraphConvolutionProblem& problem, const GraphConvolution& graph, int plan,
                   const std::string& name, const std::string& signature, const std::string& why, GraphPlan& out);
  bool run_graph_on_arena(SetupContext& ctx, const GraphConvolution& graph, int plan, const GraphConvolutionProblem& problem);
  float* arena_sums();
  double statistics_difference(SetupContext& ctx, const GraphConvolution& graph, int plan,
                               const GraphConvolutionProblem& problem);
  void add_step_options(SetupContext& ctx, const GraphConvolutionProblem& problem, const std::string& signature,
                        const std::vector<std::string>& names, const std::vector<float>& times, GraphPlan& out);
  static void add_step_choice(std::vector<StepChoice>& choices, GraphPlan& plan, const std::string& what);
  std::vector<StepChoice> step_choices() override;
  std::vector<AlgorithmChoice> agreeing_candidates(SetupContext& ctx, std::vector<AlgorithmChoice> candidates,
                                                   GraphDirection direction, const std::string& signature,
                                                   std::string& refused);
  cudnnStatus_t run_legacy_on_arena(SetupContext& ctx, GraphDirection direction, const AlgorithmChoice& c);
  double graph_plan_difference(SetupContext& ctx, const GraphConvolution& graph, int plan,
                               const GraphConvolutionProblem& problem);
  std::string legacy_choice_name(GraphDirection direction) const;
  void refill_check_inputs(SetupContext& ctx, GraphDirection direction);
  AlgorithmChoice reference_choice(GraphDirection direction) const;

  // layer_convolution_gemm_search.cpp: the GEMM-based candidates and the bias gradient.
  static bool uniform_rows(const Tensor& t);
  bool gemm_weight_gradient_applies() const;
  GemmWeightGradient gemm_shape() const;
  bool im2col_gemm_applies(const SetupContext& ctx, const Tensor& output) const;
  Im2colGemm im2col_shape(const Tensor& output) const;
  bool im2col_nhwc_applies(const SetupContext& ctx) const;
  Im2colGemmNhwc im2col_nhwc_shape(std::int64_t chunk_images) const;
  void choose_im2col_nhwc(SetupContext& ctx, const std::string& forward_signature);
  float time_gemm_weight_gradient(SetupContext& ctx) const;
  void choose_bias_gradient(SetupContext& ctx, const std::string& filter_signature);
  // Whether the cuBLASLt forward's epilogue adds the bias (else, with a bias, our epilogue runs after it:
  // a bias of another type than y, or a residual add after it).
  bool lt_adds_bias() const { return nhwc_epilogue != CUBLASLT_EPILOGUE_DEFAULT; }
  // A cuBLAS-based candidate's median on the search arena (algorithms.hpp).
  template <typename Candidate>
  float time_on_arena(SetupContext& ctx, std::size_t scratch_bytes, Candidate&& run) const {
    return time_cublas_on_arena(ctx, scratch_bytes, run);
  }

  static std::int64_t round_up_256(std::int64_t bytes) { return (bytes + 255) / 256 * 256; }
};

}  // namespace crossbench::cudnn
