#include "cube/cube_merge.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "crossbench/error.hpp"
#include "crossbench/options_schema.hpp"

namespace crossbench {
namespace {

template <typename T>
void add_unique(std::vector<T>& axis, const T& value) {
  if (std::find(axis.begin(), axis.end(), value) == axis.end()) axis.push_back(value);
}

std::string cell_name(const CellResult& result) { return result.device_key + " | " + describe(result.cell); }

// The input whose cell wins among `holders` (indices of inputs, ascending).
std::size_t winner(const std::vector<MergeInput>& inputs, const std::vector<std::size_t>& holders,
                   const MergePreference& preference, const std::string& name) {
  switch (preference.rule) {
    case MergePreference::Rule::first: return holders.front();
    case MergePreference::Rule::last: return holders.back();
    case MergePreference::Rule::file:
      for (const std::size_t holder : holders)
        if (std::filesystem::weakly_canonical(inputs[holder].path) == std::filesystem::weakly_canonical(preference.preferred_path))
          return holder;
      [[fallthrough]];
    case MergePreference::Rule::refuse: break;
  }
  std::string files;
  for (const std::size_t holder : holders) files += (files.empty() ? "" : ", ") + inputs[holder].path.string();
  throw UsageError("cell '" + name + "' is in " + files + "; say which wins with --prefer first, --prefer last or --prefer FILE");
}

}  // namespace

CubeContents merge_cubes(const std::vector<MergeInput>& inputs, const MergePreference& preference) {
  if (inputs.empty()) throw UsageError("merge: no input cubes");
  CubeContents merged;
  // Cells: which inputs hold each one, in input order.
  std::map<std::string, std::vector<std::size_t>> holders;
  std::vector<std::string> order;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    for (const CellResult& cell : inputs[i].contents.cells) {
      auto& list = holders[cell_name(cell)];
      if (list.empty()) order.push_back(cell_name(cell));
      if (list.empty() || list.back() != i) list.push_back(i);
    }
  std::vector<std::string> refused;
  std::map<std::string, std::size_t> chosen;
  for (const auto& name : order) {
    const auto& list = holders.at(name);
    if (list.size() == 1) {
      chosen[name] = list.front();
      continue;
    }
    try {
      chosen[name] = winner(inputs, list, preference, name);
    } catch (const UsageError& error) {
      refused.push_back(error.what());
    }
  }
  if (!refused.empty()) {
    std::string text = std::to_string(refused.size()) + " cell(s) are in more than one input: " + refused.front();
    if (refused.size() > 1) text += " (and " + std::to_string(refused.size() - 1) + " more)";
    throw UsageError(text);
  }

  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const CubeContents& input = inputs[i].contents;
    for (const auto& device : input.axes.devices) add_unique(merged.axes.devices, device);
    for (const auto& engine : input.axes.engines) add_unique(merged.axes.engines, engine);
    for (const auto& network : input.axes.networks) add_unique(merged.axes.networks, network);
    for (const auto& precision : input.axes.precisions) add_unique(merged.axes.precisions, precision);
    for (const auto& phase : input.axes.phases) add_unique(merged.axes.phases, phase);
    for (const auto batch : input.axes.batches) add_unique(merged.axes.batches, batch);
    for (const auto gpus : input.axes.gpus) add_unique(merged.axes.gpus, gpus);
    for (const auto replica : input.axes.replicas) add_unique(merged.axes.replicas, replica);
    // Run segments and sources are renumbered into the merged cube's: every cell and
    // every ranks row keeps naming the run that measured it and the input it came from.
    const auto segment_offset = static_cast<std::int32_t>(merged.segments.size());
    const auto source_offset = static_cast<std::int32_t>(merged.sources.size());
    const bool was_merged = !input.sources.empty();
    // An input older than run segments (schema 2, 3) is one segment: its root attributes.
    std::vector<CubeSegment> segments = input.segments;
    if (segments.empty()) segments.push_back({input.attributes});
    const bool synthetic_segment = input.segments.empty();
    const auto new_segment = [&](std::int32_t segment) -> std::int32_t {
      if (synthetic_segment) return segment_offset;
      return segment < 0 ? -1 : segment + segment_offset;
    };
    const auto new_source = [&](std::int32_t source) -> std::int32_t {
      if (!was_merged) return source_offset;
      return source < 0 ? -1 : source + source_offset;
    };
    for (CubeSegment segment : segments) {
      if (!was_merged) segment.attributes["source"] = std::to_string(source_offset);
      else if (segment.attributes.count("source"))
        segment.attributes["source"] = std::to_string(std::stoi(segment.attributes["source"]) + source_offset);
      merged.segments.push_back(std::move(segment));
    }
    for (const CellResult& cell : input.cells)
      if (chosen.at(cell_name(cell)) == i) {
        CellResult kept = cell;
        kept.segment = new_segment(cell.segment);
        kept.source = new_source(cell.source);
        merged.cells.push_back(std::move(kept));
      }
    for (RankRecord row : input.ranks) {
      row.segment = new_segment(row.segment);
      row.source = new_source(row.source);
      merged.ranks.push_back(std::move(row));
    }
    if (was_merged) {
      merged.sources.insert(merged.sources.end(), input.sources.begin(), input.sources.end());
    } else {
      // Everything the input's root said (settings, revision, run_state, ...) stays here.
      CubeSource source{input.attributes, input.ranks};
      source.attributes["schema"] = input.schema;
      source.attributes["path"] = inputs[i].path.string();
      merged.sources.push_back(std::move(source));
    }
  }
  std::sort(merged.axes.batches.begin(), merged.axes.batches.end());
  std::sort(merged.axes.gpus.begin(), merged.axes.gpus.end());
  std::sort(merged.axes.replicas.begin(), merged.axes.replicas.end());

  // The root keeps what every input agrees on; the rest is in /sources.
  merged.attributes = inputs.front().contents.attributes;
  for (const MergeInput& input : inputs)
    std::erase_if(merged.attributes, [&](const auto& entry) {
      const auto found = input.contents.attributes.find(entry.first);
      return found == input.contents.attributes.end() || found->second != entry.second;
    });
  merged.attributes.erase("hdf5_version");  // the writer's own fact
  // A run's root facts that no longer describe the merged whole.
  for (const char* key : {"segments", "segments_differ", "run_state"}) merged.attributes.erase(key);
  merged.attributes["segments"] = std::to_string(merged.segments.size());
  return merged;
}

std::vector<std::string> merge_warnings(const std::vector<MergeInput>& inputs) {
  std::vector<std::string> warnings;
  for (const MergeInput& input : inputs) {
    const auto& attributes = input.contents.attributes;
    const auto state = attributes.find("run_state");
    if (state != attributes.end() && state->second != "complete")
      warnings.push_back(input.path.string() + " is incomplete (run_state: " + state->second + ")");
  }
  // The settings that change the numbers (the options schema's recorded names), compared over the inputs.
  std::vector<std::string> differing;
  for (const OptionSpec& option : options_schema()) {
    if (!option.changes_numbers || option.recorded_as.empty()) continue;
    std::set<std::string> values;
    std::string shown;
    // A setting an input does not record was added to the schema after that cube was written; its default
    // is the behaviour that build had (a new key's default keeps the old behaviour: resume's rule too).
    for (const MergeInput& input : inputs) {
      const auto found = input.contents.attributes.find(option.recorded_as);
      const bool recorded = found != input.contents.attributes.end();
      const std::string value = recorded ? found->second : option.default_value;
      if (values.insert(value).second)
        shown += (shown.empty() ? "" : ", ") + ("'" + value + "'") + (recorded ? "" : " (not recorded: the default)");
    }
    if (values.size() > 1) differing.push_back(option.recorded_as + " (" + shown + ")");
  }
  if (!differing.empty()) {
    std::string text;
    for (const auto& item : differing) text += (text.empty() ? "" : "; ") + item;
    warnings.push_back("the inputs were measured with different settings: " + text);
  }
  return warnings;
}

}  // namespace crossbench
