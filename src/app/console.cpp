#include "app/console.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "crossbench/data_paths.hpp"
#include "crossbench/engine.hpp"

namespace crossbench {
namespace {

std::string shorten(const std::string& text, std::size_t width) {
  return text.size() <= width ? text : text.substr(0, width - 1) + "~";
}

std::string number(double value, const char* pattern) {
  if (!std::isfinite(value)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

void add_unique(std::vector<std::string>& list, const std::string& item) {
  if (!item.empty() && std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

}  // namespace

DeviceLegend::DeviceLegend(const std::vector<Device>& rank_devices) {
  for (std::size_t rank = 0; rank < rank_devices.size(); ++rank) {
    const Device& device = rank_devices[rank];
    const std::string key = device.key();
    auto [entry, added] = entries_.try_emplace(key);
    if (added) {
      entry->second.label = "D" + std::to_string(order_.size());
      entry->second.device = &device;
      order_.push_back(key);
    }
    entry->second.ranks.push_back(static_cast<int>(rank));
    add_unique(entry->second.hosts, device.host);
    add_unique(entry->second.uuids, device.uuid);
  }
}

std::string DeviceLegend::label(const std::string& device_key) {
  auto [entry, added] = entries_.try_emplace(device_key);
  if (added) {
    entry->second.label = "D" + std::to_string(order_.size());
    order_.push_back(device_key);
  }
  return entry->second.label;
}

void DeviceLegend::print(std::ostream& out) const {
  for (const auto& key : order_) {
    const Entry& entry = entries_.at(key);
    out << entry.label << " = " << key << "\n";
    if (entry.device == nullptr) {
      out << "     (from the journal of an earlier run; no rank of this run has it)\n";
      continue;
    }
    std::vector<std::string> ranks;
    for (const int rank : entry.ranks) ranks.push_back(std::to_string(rank));
    out << "     hosts " << joined(entry.hosts) << "; ranks " << joined(ranks) << "\n";
    if (!entry.uuids.empty()) out << "     uuids " << joined(entry.uuids) << "\n";
    const Device& device = *entry.device;
    out << "     " << device.driver;
    if (device.power_limit_w > 0) out << "; power limit " << number(device.power_limit_w, "%.0f") << " W";
    if (!device.ecc.empty()) out << "; ECC " << device.ecc;
    out << "\n     " << device.cpu_model << "; " << device.os << "; " << device.kernel
        << (device.container.empty() ? "" : "; container " + device.container) << "\n";
  }
  // The native engines' libraries, the same for every device of this binary.
  std::vector<std::string> versions;
  for (const auto& [name, version] : engine_library_versions()) versions.push_back(name + " " + version);
  if (!versions.empty()) out << "libraries: " << joined(versions) << "\n";
  out << std::flush;
}

std::string result_header() {
  char line[256];
  std::snprintf(line, sizeof line, "%-6s %-8s %-10s %-5s %6s %4s %-9s %-11s %10s %8s %10s %6s %7s %7s", "device",
                "engine", "network", "prec", "batch", "gpus", "phase", "status", "median_ms", "±ci%", "images/s", "steps",
                "comm_ms", "scaling");
  return line;
}

std::string ci_text(const CellResult& result, double target_ci) {
  if (result.status != Status::ok) return "";
  const double half = relative_ci_half_width(result.statistics);
  if (!std::isfinite(half)) return "?";
  // "*": the stopping rule never reached measure.target_ci (max_steps or the time limit ended the cell).
  return number(100.0 * half, "%.1f") + (half > target_ci ? "*" : "");
}

std::string result_row(const CellResult& result, const std::string& device_label, double target_ci) {
  char line[512];
  // ±ci%: the half-width of the median's 95% CI as a percentage of the median (the quantity
  // measure.target_ci bounds); comm_ms: exposed all-reduce time per step; scaling: efficiency
  // against gpus = 1 (data parallel only).
  std::snprintf(line, sizeof line, "%-6s %-8s %-10s %-5s %6lld %4d %-9s %-11s %10s %8s %10s %6d %7s %7s",
                device_label.c_str(), result.cell.engine.c_str(), result.cell.network.c_str(),
                std::string(to_string(result.cell.precision)).c_str(), static_cast<long long>(result.cell.batch),
                result.cell.gpus, std::string(to_string(result.cell.phase)).c_str(),
                std::string(to_string(result.status)).c_str(), number(result.statistics.median_ms, "%.3f").c_str(),
                ci_text(result, target_ci).c_str(), number(result.images_per_s, "%.1f").c_str(), result.steps,
                result.cell.gpus > 1 ? number(result.exposed_communication_ms, "%.2f").c_str() : "",
                result.cell.gpus > 1 ? number(result.scaling_efficiency, "%.3f").c_str() : "");
  return line;
}

std::string report_command() {
  const std::filesystem::path command = data_paths().report_command;
  std::error_code error;
  const auto here = std::filesystem::current_path(error);
  if (!error) {
    const auto relative = command.lexically_relative(here);
    if (!relative.empty() && *relative.begin() != "..") return relative.string();
  }
  return command.string();
}

Heartbeat::Heartbeat(double period_s, int rank, std::string cell) {
  if (period_s <= 0) return;
  thread_ = std::thread([this, period_s, rank, cell = std::move(cell)] {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_.wait_for(lock, std::chrono::duration<double>(period_s), [this] { return finished_; })) {
      const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // One write per line: under mpirun several ranks share the terminal.
      const std::string line = "crossbench: rank " + std::to_string(rank) + " still running " + cell + " (" +
                               format_duration(elapsed_s) + ")\n";
      std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
      std::cerr.flush();
    }
  });
}

Heartbeat::~Heartbeat() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  done_.notify_all();
  thread_.join();
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long total = std::lround(seconds);
  char text[32];
  if (total >= 3600) std::snprintf(text, sizeof text, "%ldh%02ldm", total / 3600, total % 3600 / 60);
  else if (total >= 60) std::snprintf(text, sizeof text, "%ldm%02lds", total / 60, total % 60);
  else std::snprintf(text, sizeof text, "%lds", total);
  return text;
}

Progress::Progress(std::ostream& out, DeviceLegend& legend, std::size_t total_cells, double estimated_total_s, bool quiet,
                   double target_ci)
    : out_(out), legend_(legend), total_cells_(total_cells), estimated_total_s_(estimated_total_s), quiet_(quiet),
      target_ci_(target_ci) {
  if (!quiet_) out_ << "      " << result_header() << "\n" << std::flush;
}

void Progress::finished(const CellResult& result, double estimated_s) {
  ++done_cells_;
  estimated_done_s_ += estimated_s;
  if (quiet_) return;
  // ETA: the measured pace of the plan's estimates so far, applied to what remains.
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double fraction = estimated_total_s_ > 0 ? estimated_done_s_ / estimated_total_s_ : 1.0;
  const double eta_s = fraction > 0 ? elapsed_s * (1.0 - fraction) / fraction : NAN;
  char prefix[32];
  const int width = static_cast<int>(std::to_string(total_cells_).size());
  std::snprintf(prefix, sizeof prefix, "[%*zu/%zu]", width, done_cells_, total_cells_);
  out_ << prefix << " " << result_row(result, legend_.label(result.device_key), target_ci_) << "  ETA " << (done_cells_ == total_cells_ ? "0s" : format_duration(eta_s));
  if (result.status != Status::ok && !result.message.empty()) out_ << "\n      " << result.message;
  out_ << "\n" << std::flush;
}

void print_table(std::ostream& out, DeviceLegend& legend, const std::vector<CellResult>& results, double target_ci) {
  out << result_header() << "\n";
  std::size_t missed = 0;
  for (const auto& result : results) {
    out << result_row(result, legend.label(result.device_key), target_ci) << "\n";
    missed += result.status == Status::ok && !(relative_ci_half_width(result.statistics) <= target_ci);
  }
  if (missed > 0)
    out << "* " << missed << " ok cell(s) missed measure.target_ci = " << number(100.0 * target_ci, "%g")
        << "%: their median's 95% CI is wider (max_steps or the cell time limit ended them); a difference smaller "
           "than their ±ci% is noise\n";
  out << std::flush;
}

namespace {

// "  by kind: convolution 5.570+10.760 ms (49.8%); batch_norm ...": the cell's layer times summed per layer
// kind, largest first (where a step goes, e.g. a batch-norm pass against the convolutions), over every layer
// (the table above may list only the slowest).
void print_kind_sums(std::ostream& out, const std::vector<LayerTime>& layers, double step_ms) {
  struct KindSum {
    std::string kind;
    double forward_ms = 0, backward_ms = 0;
  };
  std::vector<KindSum> sums;
  for (const LayerTime& t : layers) {
    const std::string kind = t.kind.empty() ? "?" : t.kind;
    auto it = std::find_if(sums.begin(), sums.end(), [&](const KindSum& k) { return k.kind == kind; });
    if (it == sums.end()) it = sums.insert(sums.end(), KindSum{kind});
    it->forward_ms += t.forward_ms;
    it->backward_ms += t.backward_ms;
  }
  std::stable_sort(sums.begin(), sums.end(), [](const KindSum& a, const KindSum& b) {
    return a.forward_ms + a.backward_ms > b.forward_ms + b.backward_ms;
  });
  out << "  by kind:";
  for (std::size_t i = 0; i < sums.size(); ++i) {
    const KindSum& k = sums[i];
    out << (i == 0 ? " " : "; ") << k.kind << " " << number(k.forward_ms, "%.3f") << "+" << number(k.backward_ms, "%.3f")
        << " ms (" << number(step_ms > 0 ? 100.0 * (k.forward_ms + k.backward_ms) / step_ms : NAN, "%.1f") << "%)";
  }
  out << "\n";
}

}  // namespace

void print_layer_times(std::ostream& out, const std::vector<CellResult>& results, int repetitions, int shown) {
  out << "\nLayer times (--layer-times): each layer's median over " << repetitions
      << " profiled steps, run after the timed steps (never part of the headline);\n"
         "sorted by forward + backward; % of step = share of the sum over the cell's layers; "
      << (shown > 0 ? "the " + std::to_string(shown) + " slowest layers per cell (--layer-times=all: every layer; "
                      "the cube has them all)\n"
                    : "every layer\n");
  for (const CellResult& result : results) {
    out << "\n" << result.device_key << " | " << result.cell.engine << " " << result.cell.network << " "
        << to_string(result.cell.precision) << " batch " << result.cell.batch << " " << to_string(result.cell.phase);
    if (result.status != Status::ok) {
      out << ": no layer times (the cell is " << to_string(result.status) << ")\n";
      continue;
    }
    if (result.layer_times.empty()) {
      const auto why = result.message.find("layer times not measured");
      out << ": no layer times ("
          << (why != std::string::npos ? result.message.substr(why) : "engine '" + result.cell.engine + "' does not profile layers")
          << ")\n";
      continue;
    }
    std::vector<LayerTime> sorted = result.layer_times;
    const auto total = [](const LayerTime& t) { return t.forward_ms + t.backward_ms; };
    std::stable_sort(sorted.begin(), sorted.end(),
                     [&](const LayerTime& a, const LayerTime& b) { return total(a) > total(b); });
    double step_ms = 0;
    std::size_t name_width = 5, kind_width = 4;
    for (const LayerTime& t : sorted) {
      step_ms += total(t);
      name_width = std::max(name_width, t.layer.size());
      kind_width = std::max(kind_width, t.kind.size());
    }
    out << ": layers sum " << number(step_ms, "%.3f") << " ms, headline median "
        << number(result.statistics.median_ms, "%.3f") << " ms\n";
    char line[512];
    const int nw = static_cast<int>(std::min<std::size_t>(name_width, 60));
    const int kw = static_cast<int>(kind_width);
    std::snprintf(line, sizeof line, "  %-*s %-*s %12s %12s %10s", nw, "layer", kw, "kind", "forward_ms", "backward_ms",
                  "% of step");
    out << line << "\n";
    const std::size_t listed = shown > 0 ? std::min(sorted.size(), static_cast<std::size_t>(shown)) : sorted.size();
    for (std::size_t i = 0; i < listed; ++i) {
      const LayerTime& t = sorted[i];
      std::snprintf(line, sizeof line, "  %-*s %-*s %12s %12s %10s", nw, shorten(t.layer, 60).c_str(), kw,
                    t.kind.c_str(), number(t.forward_ms, "%.3f").c_str(), number(t.backward_ms, "%.3f").c_str(),
                    number(step_ms > 0 ? 100.0 * total(t) / step_ms : NAN, "%.1f").c_str());
      out << line << "\n";
    }
    if (listed < sorted.size()) {
      double rest_forward = 0, rest_backward = 0;
      for (std::size_t i = listed; i < sorted.size(); ++i) {
        rest_forward += sorted[i].forward_ms;
        rest_backward += sorted[i].backward_ms;
      }
      const std::string rest = "(" + std::to_string(sorted.size() - listed) + " more layers)";
      std::snprintf(line, sizeof line, "  %-*s %-*s %12s %12s %10s", nw, rest.c_str(), kw, "", number(rest_forward, "%.3f").c_str(),
                    number(rest_backward, "%.3f").c_str(),
                    number(step_ms > 0 ? 100.0 * (rest_forward + rest_backward) / step_ms : NAN, "%.1f").c_str());
      out << line << "\n";
    }
    print_kind_sums(out, sorted, step_ms);
  }
  out << std::flush;
}

}  // namespace crossbench
