#include "engines/cudnn/graph_refusal.hpp"

#include <sstream>
#include <vector>

namespace crossbench::cudnn {

namespace {

// " at FILE:LINE on rank N on host H" (or "on process N"): where the check fired, which the error for a
// person names and a layer's decisions need not repeat.
std::string without_location(const std::string& line) {
  const std::size_t failed = line.find(" failed at ");
  if (failed == std::string::npos) return line;
  const std::size_t host = line.find(" on host ", failed);
  if (host == std::string::npos) return line;
  const std::size_t colon = line.find(':', host);
  if (colon == std::string::npos) return line;
  return line.substr(0, failed) + " failed" + line.substr(colon);
}

// The engine a block of cuDNN's log is about: {"engineId":3,...} -> "3"; empty where the line is no header.
std::string engine_of(const std::string& line) {
  const std::string key = "\"engineId\":";
  const std::size_t at = line.find(key);
  if (line.empty() || line[0] != '{' || at == std::string::npos) return "";
  std::size_t end = at + key.size();
  while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
  return line.substr(at + key.size(), end - at - key.size());
}

}  // namespace

std::string graph_refusal_summary(const std::string& refusal) {
  std::istringstream lines(refusal);
  std::string first;
  std::getline(lines, first);
  std::string summary = without_location(first);
  // Each engine's first reason: the most specific of its stack (the rest are the calls that passed it up).
  std::vector<std::string> reasons;
  std::string line, engine;
  bool reason_taken = true;
  while (std::getline(lines, line)) {
    if (const std::string id = engine_of(line); !id.empty()) {
      engine = id;
      reason_taken = false;
      continue;
    }
    const std::size_t at = line.find("Reason: ");
    if (reason_taken || at == std::string::npos) continue;
    std::string reason = "engine " + engine + ": " + line.substr(at + 8);
    bool seen = false;
    for (const std::string& r : reasons) seen = seen || r == reason;
    if (!seen) reasons.push_back(std::move(reason));
    reason_taken = true;
  }
  if (!reasons.empty()) {
    summary += " [";
    for (std::size_t i = 0; i < reasons.size(); ++i) summary += (i == 0 ? "" : "; ") + reasons[i];
    summary += "]";
  }
  if (summary.size() > kRefusalSummaryLimit) summary = summary.substr(0, kRefusalSummaryLimit - 3) + "...";
  return summary;
}

}  // namespace crossbench::cudnn
