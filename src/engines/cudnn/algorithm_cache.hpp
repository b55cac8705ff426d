// The cuDNN engine's measured choices, made robust, saved and replayed
// (DESIGN.md "Measurement": choices made by measurement are reproducible).
//
// A measured search times its candidates several times in the context the
// step runs in and compares their MEDIANS; candidates within kTieFraction of
// the fastest are a tie, broken deterministically (the heuristic's order,
// then the smaller workspace, then the library's enum), so run-to-run noise
// cannot flip the choice (order_by_median).
//
// Every measurement is a record keyed by a signature: the op and everything
// that decides its speed (shapes, strides, data type, layout, math mode,
// workspace limit). The AlgorithmCache holds them for one measurement context
// (device: name, compute capability, SMs; libraries: cuDNN, cuBLAS, CUDA
// runtime). The engine keeps one for its whole life, so identical layers are
// measured once per process (within a network and across cells); with
// `--algo-cache FILE` it is also read from and appended to a JSON file, so a
// run with a warm cache does no search and replays the same plan.
//
// Plain C++ (no CUDA): the file format, keys and the choice are tested on the CPU.
#pragma once

#include <array>
#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace crossbench::cudnn {

// Candidates whose medians lie within this fraction of the fastest are a tie: the default of
// engine.search_tie, which a run may set. 0.001 takes the fastest median but for equal ones: three cold
// processes agreed within 1.5% on OverFeat and AlexNet tf32 with it, against 5.4% with 0.03, whose edge flipped
// near-tied choices by the whole margin (bench/results/2026-12-03/call37).
inline constexpr double kTieFraction = 0.001;

// Who measured: a record applies only to the same device and libraries.
struct MeasurementContext {
  std::string device;     // "NVIDIA H200 cc=9.0 sms=132"
  std::string libraries;  // "cudnn=9.19.0 cublas=12.9.1 cudart=12.9"
  bool operator==(const MeasurementContext&) const = default;
  [[nodiscard]] std::string text() const { return device + " | " + libraries; }  // one line, as files key it
};

// What decides a convolution's speed, as its descriptors say: the cache key
// (with the op's direction in front). Built from the descriptors by
// algorithms.cpp; `text()` is the signature, readable in the cache file.
struct ConvolutionSignature {
  struct Tensor {
    std::string type;                 // "f32", "bf16", ...
    std::array<int, 4> dims{};        // N, C, H, W
    std::array<int, 4> strides{};     // [elements]: the layout (NCHW, NHWC, a concat slice)
  };
  Tensor x, y;                        // input and output (backward data: dx and dy; backward filter: x and dy)
  std::string filter_type, filter_format;  // "f32", "nchw" / "nhwc"
  std::array<int, 4> filter_dims{};   // K, C, R, S
  std::array<int, 2> padding{}, stride{}, dilation{};
  int groups = 1;
  std::string mode, compute_type, math;  // "xcorr", "f32", "fma" / "default" / "tc"
  std::size_t workspace_limit_bytes = 0;
  std::string text() const;
};

// One measured candidate of one op.
struct MeasuredCandidate {
  std::string name;                 // "IMPLICIT_GEMM/tc", "im2col_gemm", "kernel"
  int algorithm = -1;               // the library's enum value; -1 for a candidate of our own
  int math = 0;                     // cudnnMathType_t of a cuDNN candidate
  std::size_t workspace_bytes = 0;
  int heuristic_rank = -1;          // position in the library's heuristic order; -1: not listed there
  double median_ms = 0;             // NaN: the candidate failed or was not timed [ms]
  int repetitions = 0;              // timed runs the median is over
};

// What one op's measurement found, in order of preference: front() is the choice.
struct MeasuredChoice {
  std::vector<MeasuredCandidate> candidates;
};

// The median of samples [ms]; NaN when there are none (NaN samples are dropped).
double median_ms(std::vector<double> samples);

// Orders candidates for choice: failed ones (NaN) dropped; the fastest median
// first, except that every candidate within `tie_fraction` of the fastest is
// a tie, ordered by heuristic rank (unlisted last), smaller workspace, then
// algorithm and name. The rest follow by median, ties broken the same way.
void order_by_median(std::vector<MeasuredCandidate>& candidates, double tie_fraction);

// Whether a challenger beats the incumbent by more than the tie margin (NaN
// on either side: no). Near-ties keep the incumbent, so noise cannot flip a choice.
[[nodiscard]] bool clearly_faster(double challenger_ms, double incumbent_ms, double tie_fraction);

class AlgorithmCache {
 public:
  struct Counts {
    int hits = 0;    // records found (in the file, or measured earlier in this process)
    int misses = 0;  // records measured now
  };

  // In memory only (`path` empty), or backed by a JSON file: a missing file is
  // an empty cache; a file that is not a cache of this format throws
  // UsageError naming the file and the problem. Records of other measurement
  // contexts are kept (and written back) but never used.
  AlgorithmCache(std::filesystem::path path, MeasurementContext context);

  const MeasurementContext& context() const { return context_; }
  const std::filesystem::path& path() const { return path_; }
  bool file_backed() const { return !path_.empty(); }

  // The record of `signature` in this context, or nullptr; counts a hit or a miss.
  const MeasuredChoice* find(const std::string& signature);
  // The same record, counting nothing: for a caller that uses it only where it can, and else goes on to
  // find() it as usual (engine.graph_from_cache); count_hit() where it used it.
  [[nodiscard]] const MeasuredChoice* peek(const std::string& signature) const;
  void count_hit() { ++counts_.hits; }
  // Adds (or replaces) this context's record of `signature`.
  void insert(const std::string& signature, MeasuredChoice choice);
  std::size_t size() const { return records_.size(); }
  Counts counts() const { return counts_; }

  // File-backed and with new records: merges them with what the file holds now
  // (another process may have appended), under an exclusive lock on FILE.lock,
  // and writes the result atomically (a temporary file, fsync'd, renamed over it).
  void save();

  // The file's JSON text of records (every context), and its inverse (throws UsageError).
  nlohmann::json to_json() const;
  void merge_json(const nlohmann::json& document, const std::string& source);

 private:
  std::filesystem::path path_;
  MeasurementContext context_;
  std::map<std::string, MeasuredChoice> records_;      // this context's, by signature
  std::map<std::string, nlohmann::json> foreign_;      // other contexts' records, verbatim, by context and signature
  Counts counts_;
  bool unsaved_ = false;
};

}  // namespace crossbench::cudnn
