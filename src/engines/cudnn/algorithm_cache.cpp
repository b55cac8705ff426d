// The measured choices' ordering rule and the algorithm cache file.
//
// The file (human-readable JSON, one record per op signature and context):
//   {"format": "crossbench-algorithm-cache/1",
//    "records": [{"device": "...", "libraries": "...", "signature": "...",
//                 "candidates": [{"name": "IMPLICIT_GEMM/tc", "algorithm": 1, "math": 1,
//                                 "workspace_bytes": 0, "heuristic_rank": 0,
//                                 "median_ms": 0.101, "repetitions": 7}, ...]}, ...]}
// A candidate that failed has "median_ms": null.
#include "engines/cudnn/algorithm_cache.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>

#include "crossbench/error.hpp"
#include "crossbench/statistics.hpp"
#include "engines/cudnn/cache_file.hpp"

namespace crossbench::cudnn {
namespace {

using cache_file::FileLock;
using cache_file::read_all;
using cache_file::write_atomically;

constexpr const char* kFormat = "crossbench-algorithm-cache/1";

// Deterministic order among tied candidates.
bool preferred(const MeasuredCandidate& a, const MeasuredCandidate& b) {
  const auto rank = [](const MeasuredCandidate& c) {
    return c.heuristic_rank < 0 ? std::numeric_limits<int>::max() : c.heuristic_rank;
  };
  return std::forward_as_tuple(rank(a), a.workspace_bytes, a.algorithm, a.name) <
         std::forward_as_tuple(rank(b), b.workspace_bytes, b.algorithm, b.name);
}


nlohmann::json candidate_json(const MeasuredCandidate& c) {
  nlohmann::json j = {{"name", c.name},
                      {"algorithm", c.algorithm},
                      {"math", c.math},
                      {"workspace_bytes", c.workspace_bytes},
                      {"heuristic_rank", c.heuristic_rank},
                      {"repetitions", c.repetitions}};
  if (std::isfinite(c.median_ms)) j["median_ms"] = c.median_ms;
  else j["median_ms"] = nullptr;
  return j;
}

[[noreturn]] void corrupt(const std::string& source, const std::string& what) {
  throw UsageError("algorithm cache " + source + ": " + what +
                   " (it is not a crossbench algorithm cache of format " + kFormat +
                   "; remove it, or name another file with --algo-cache)");
}

// A field of a JSON object, checked for its type.
const nlohmann::json& field(const nlohmann::json& object, const char* name, nlohmann::json::value_t type,
                            const std::string& source, const std::string& where) {
  const auto found = object.find(name);
  if (found == object.end()) corrupt(source, where + " has no '" + name + "'");
  const bool number_ok = type == nlohmann::json::value_t::number_integer && found->is_number_integer();
  if (found->type() != type && !number_ok) corrupt(source, where + ": '" + name + "' has the wrong type");
  return *found;
}

MeasuredCandidate candidate_from(const nlohmann::json& j, const std::string& source, const std::string& where) {
  using T = nlohmann::json::value_t;
  if (!j.is_object()) corrupt(source, where + " is not an object");
  MeasuredCandidate c;
  c.name = field(j, "name", T::string, source, where).get<std::string>();
  c.algorithm = field(j, "algorithm", T::number_integer, source, where).get<int>();
  c.math = field(j, "math", T::number_integer, source, where).get<int>();
  const nlohmann::json& workspace = field(j, "workspace_bytes", T::number_integer, source, where);
  if (workspace.get<std::int64_t>() < 0) corrupt(source, where + ": negative workspace_bytes");
  c.workspace_bytes = workspace.get<std::size_t>();
  c.heuristic_rank = field(j, "heuristic_rank", T::number_integer, source, where).get<int>();
  c.repetitions = field(j, "repetitions", T::number_integer, source, where).get<int>();
  const auto median = j.find("median_ms");
  if (median == j.end()) corrupt(source, where + " has no 'median_ms'");
  if (median->is_null()) c.median_ms = not_a_number;
  else if (median->is_number()) c.median_ms = median->get<double>();
  else corrupt(source, where + ": 'median_ms' is neither a number nor null");
  return c;
}

nlohmann::json parse(const std::string& text, const std::string& source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    corrupt(source, std::string("not valid JSON: ") + error.what());
  }
}

}  // namespace

std::string ConvolutionSignature::text() const {
  std::ostringstream out;
  const auto list = [&](const auto& values) {
    for (std::size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  };
  const auto tensor = [&](const char* name, const Tensor& t) {
    out << name << "=" << t.type << "[";
    list(t.dims);
    out << "/";
    list(t.strides);
    out << "] ";
  };
  tensor("x", x);
  out << "w=" << filter_type << ":" << filter_format << "[";
  list(filter_dims);
  out << "] ";
  tensor("y", y);
  out << "pad=";
  list(padding);
  out << " stride=";
  list(stride);
  out << " dilation=";
  list(dilation);
  out << " groups=" << groups << " mode=" << mode << " compute=" << compute_type << " math=" << math
      << " workspace_limit=" << workspace_limit_bytes;
  return out.str();
}

double median_ms(std::vector<double> samples) {
  samples.erase(std::remove_if(samples.begin(), samples.end(), [](double v) { return std::isnan(v); }),
                samples.end());
  if (samples.empty()) return not_a_number;
  std::sort(samples.begin(), samples.end());
  return percentile_of_sorted(samples, 0.5);
}

void order_by_median(std::vector<MeasuredCandidate>& candidates, double tie_fraction) {
  candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                  [](const MeasuredCandidate& c) { return !std::isfinite(c.median_ms); }),
                   candidates.end());
  std::vector<MeasuredCandidate> ordered;
  while (!candidates.empty()) {
    // The fastest remaining median, and every candidate tied with it, in preferred order.
    double fastest = candidates.front().median_ms;
    for (const MeasuredCandidate& c : candidates) fastest = std::min(fastest, c.median_ms);
    const auto tied = std::stable_partition(candidates.begin(), candidates.end(), [&](const MeasuredCandidate& c) {
      return c.median_ms <= fastest * (1.0 + tie_fraction);
    });
    std::sort(candidates.begin(), tied, preferred);
    ordered.insert(ordered.end(), candidates.begin(), tied);
    candidates.erase(candidates.begin(), tied);
  }
  candidates = std::move(ordered);
}

bool clearly_faster(double challenger_ms, double incumbent_ms, double tie_fraction) {
  return challenger_ms < incumbent_ms * (1.0 - tie_fraction);  // false when either is NaN
}

AlgorithmCache::AlgorithmCache(std::filesystem::path path, MeasurementContext context)
    : path_(std::move(path)), context_(std::move(context)) {
  if (!file_backed()) return;
  std::error_code error;
  if (!std::filesystem::exists(path_, error)) return;  // a cold cache: created by the first save()
  if (std::filesystem::is_directory(path_, error))
    throw UsageError("algorithm cache " + path_.string() + " is a directory; --algo-cache names a file");
  std::string text;
  try {
    text = read_all(path_);
  } catch (const Error& error) {
    throw UsageError("algorithm cache " + path_.string() + " cannot be read: " + error.what());
  }
  merge_json(parse(text, path_.string()), path_.string());
  unsaved_ = false;
}

const MeasuredChoice* AlgorithmCache::find(const std::string& signature) {
  const auto found = records_.find(signature);
  if (found == records_.end()) {
    ++counts_.misses;
    return nullptr;
  }
  ++counts_.hits;
  return &found->second;
}

const MeasuredChoice* AlgorithmCache::peek(const std::string& signature) const {
  const auto found = records_.find(signature);
  return found == records_.end() ? nullptr : &found->second;
}

void AlgorithmCache::insert(const std::string& signature, MeasuredChoice choice) {
  records_[signature] = std::move(choice);
  unsaved_ = true;
}

nlohmann::json AlgorithmCache::to_json() const {
  nlohmann::json records = nlohmann::json::array();
  for (const auto& [signature, choice] : records_) {
    nlohmann::json candidates = nlohmann::json::array();
    for (const MeasuredCandidate& c : choice.candidates) candidates.push_back(candidate_json(c));
    records.push_back({{"device", context_.device},
                       {"libraries", context_.libraries},
                       {"signature", signature},
                       {"candidates", std::move(candidates)}});
  }
  for (const auto& [key, record] : foreign_) records.push_back(record);
  return {{"format", kFormat}, {"records", std::move(records)}};
}

void AlgorithmCache::merge_json(const nlohmann::json& document, const std::string& source) {
  using T = nlohmann::json::value_t;
  if (!document.is_object()) corrupt(source, "the top level is not a JSON object");
  const std::string format = field(document, "format", T::string, source, "the top level").get<std::string>();
  if (format != kFormat) corrupt(source, "format '" + format + "'");
  const nlohmann::json& records = field(document, "records", T::array, source, "the top level");
  for (std::size_t i = 0; i < records.size(); ++i) {
    const nlohmann::json& record = records[i];
    const std::string where = "record " + std::to_string(i);
    if (!record.is_object()) corrupt(source, where + " is not an object");
    const std::string device = field(record, "device", T::string, source, where).get<std::string>();
    const std::string libraries = field(record, "libraries", T::string, source, where).get<std::string>();
    const std::string signature = field(record, "signature", T::string, source, where).get<std::string>();
    const nlohmann::json& candidates = field(record, "candidates", T::array, source, where);
    MeasuredChoice choice;
    for (std::size_t k = 0; k < candidates.size(); ++k)
      choice.candidates.push_back(
          candidate_from(candidates[k], source, where + " (" + signature + ") candidate " + std::to_string(k)));
    if (MeasurementContext{device, libraries} == context_) {
      // Ours measured in this process win over the file's: they are what this run chose.
      if (!records_.count(signature)) records_.emplace(signature, std::move(choice));
    } else {
      foreign_.emplace(MeasurementContext{device, libraries}.text() + " | " + signature, record);
    }
  }
}

void AlgorithmCache::save() {
  if (!file_backed() || !unsaved_) return;
  const FileLock lock(path_);
  std::error_code error;
  if (std::filesystem::exists(path_, error)) merge_json(parse(read_all(path_), path_.string()), path_.string());
  write_atomically(path_, to_json().dump(1) + "\n");
  unsaved_ = false;
}

}  // namespace crossbench::cudnn
