#include "cluster/resume.hpp"

#include <algorithm>
#include <iostream>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "crossbench/error.hpp"
#include "cluster/journal.hpp"
#include "cluster/plan.hpp"

namespace crossbench {

std::vector<std::string> device_keys_of(const std::vector<Device>& devices) {
  std::vector<std::string> keys;
  for (const auto& device : devices) keys.push_back(device.key());
  return keys;
}

namespace {

// Rewriting the journal failed: an Error (exit 1), not a refusal.
struct WriteFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --salvage: why the intact records of a journal with a damaged header do
// not all agree with this run (empty when they do). A record is a cell and a
// device key; one that this run's plan does not hold was written by another
// job, and this run's header would mix the two.
std::string salvage_refusal(const JobOptions& options, const std::vector<Device>& devices, const JournalHeader& header,
                            const JournalContents& journal) {
  std::set<std::string> planned;
  for (const auto& cell : make_plan(options, devices).cells) planned.insert(cell_key(cell.device_key, cell.cell));
  for (const auto& result : journal.results)
    if (!planned.count(cell_key(result.device_key, result.cell)))
      return "its record of " + describe(result.cell) + " on '" + result.device_key + "' is not a cell of this run, so " +
             "the damaged header was another job's; nothing was changed";
  for (const auto& key : journal.header.device_keys)  // from its `devices` records
    if (std::find(header.device_keys.begin(), header.device_keys.end(), key) == header.device_keys.end())
      return "it names device key '" + key + "', which has no rank in this run; nothing was changed";
  return {};
}

// The sentence a refusal or the cube gives an engine-scoped change: what
// differs, and the engines whose cells it changes.
std::string describe_changes(const std::vector<EngineScopedChange>& changes, std::set<std::string>& engines) {
  std::string text;
  for (const auto& change : changes) {
    text += (text.empty() ? "" : "; ") + change.text;
    engines.insert(change.engines.begin(), change.engines.end());
  }
  return text;
}

std::string quoted_list(const std::set<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "'" : ", '") + item + "'";
  return text;
}

// --allow-setting-change: the journal rewritten under this run's header,
// without the results of `engines` (they run again under this run's
// settings); every other record as it was written. Returns the kept path.
std::filesystem::path supersede(const std::filesystem::path& path, const JournalHeader& header,
                                const std::vector<std::string>& records, const std::set<std::string>& engines) {
  std::vector<std::string> kept;
  for (const auto& line : records) {
    const auto record = nlohmann::json::parse(line.substr(9), nullptr, false);
    const bool dropped = !record.is_discarded() && record.is_object() && record.contains("result") &&
                         record["result"].is_object() && engines.count(record["result"].value("engine", ""));
    if (!dropped) kept.push_back(line);
  }
  try {
    return JournalWriter::rewrite_header(path, header, kept, ".superseded");
  } catch (const Error& error) {
    throw WriteFailure(error.what());
  }
}

}  // namespace

ResumeState agree_on_resume(const RunOptions& options, const MpiSession& mpi, const std::vector<Device>& devices,
                            const RunSegment& now) {
  ResumeState state;
  if (!options.resume) return state;
  nlohmann::json verdict;
  if (mpi.rank() == 0) {
    try {
      const auto path = journal_path(options.output);
      JournalContents journal = read_journal(path, options.salvage);
      const JournalHeader header = JournalHeader::for_run(options, device_keys_of(devices));
      const std::string refused_salvage = journal.header_damaged ? salvage_refusal(options, devices, header, journal) : "";
      if (journal.header_damaged && refused_salvage.empty()) {
        // Every intact record agrees with this run: its header stands for the damaged one.
        std::filesystem::path kept_as;
        try {
          kept_as = JournalWriter::rewrite_header(path, header, journal.intact_records);
        } catch (const Error& error) {
          throw WriteFailure(error.what());
        }
        std::cerr << "crossbench: warning: rebuilt the damaged header of journal '" << path.string()
                  << "' from this run's job (" << journal.results.size() << " intact cell record(s) agree with it); "
                  << "the damaged file is kept as '" << kept_as.string() << "'\n";
        journal.header = header;
      }
      std::vector<EngineScopedChange> scoped;
      const std::string mismatch =
          refused_salvage.empty() ? header.mismatch(journal.header, options.allow_new_devices, &scoped) : "";
      // A change that scopes only engines this run's matrix does not name (a JAX setting in a run of
      // the native engines) changes none of its numbers: no difference at all.
      std::erase_if(scoped, [&](const EngineScopedChange& change) {
        return std::none_of(change.engines.begin(), change.engines.end(), [&](const std::string& engine) {
          return std::find(options.matrix.engines.begin(), options.matrix.engines.end(), engine) !=
                 options.matrix.engines.end();
        });
      });
      std::set<std::string> rerun_engines;
      const std::string scoped_text = describe_changes(scoped, rerun_engines);
      std::vector<RunSegment> segments = segments_from_records(journal.segment_records);
      std::vector<std::string> changes;
      if (mismatch.empty() && refused_salvage.empty() && segments.empty())
        throw Error("journal '" + path.string() + "' records no run segment");
      if (mismatch.empty() && refused_salvage.empty())
        changes = build_differences(segments.back(), static_cast<int>(segments.size()) - 1, now);
      std::string change_text;
      for (const auto& change : changes) change_text += (change_text.empty() ? "" : "; ") + change;
      if (!refused_salvage.empty()) {
        verdict = {{"error", "--resume --salvage refused: journal '" + path.string() + "': " + refused_salvage}};
      } else if (!mismatch.empty()) {
        verdict = {{"error", "--resume refused: journal '" + path.string() + "' does not belong to this run: " + mismatch +
                                 (scoped_text.empty() ? "" : "; " + scoped_text)}};
      } else if (!scoped.empty() && !options.allow_setting_change) {
        verdict = {{"error", "--resume refused: journal '" + path.string() + "' was measured with other settings: " +
                                 scoped_text + " (they change only the numbers of engine(s) " + quoted_list(rerun_engines) +
                                 ": --allow-setting-change resumes, running the journal's cells of those engines again "
                                 "and keeping every other cell)"}};
      } else if (!changes.empty() && !options.allow_build_change) {
        verdict = {{"error", "--resume refused: this build differs from the one that measured the journal's cells: " +
                                 change_text + " (cells of two builds in one cube are not comparable without saying so; "
                                 "--allow-build-change resumes anyway and the cube records the change)"}};
      } else {
        if (!changes.empty()) std::cerr << "crossbench: warning: --allow-build-change: " << change_text << "\n";
        if (!scoped.empty()) {
          std::size_t rerun = 0;
          for (const auto& result : journal.results) rerun += rerun_engines.count(result.cell.engine);
          const auto kept_as = supersede(path, header, journal.intact_records, rerun_engines);
          std::erase_if(journal.results, [&](const CellResult& result) { return rerun_engines.count(result.cell.engine) > 0; });
          const std::string what = scoped_text + "; the journal's " + std::to_string(rerun) + " cell(s) of engine(s) " +
                                   quoted_list(rerun_engines) + " run again under this run's value (the journal as it was: '" +
                                   kept_as.string() + "')";
          std::cerr << "crossbench: warning: --allow-setting-change: " << what << "\n";
          state.setting_changes.push_back(what);
        }
        state.segments = std::move(segments);
        state.build_changes = changes;
        // A record of a cell this run's plan does not hold (forged, or from a
        // bug) would make the cube unwritable: it is dropped, with a warning.
        std::set<std::string> planned;
        for (const auto& cell : make_plan(options, devices).cells) planned.insert(cell_key(cell.device_key, cell.cell));
        std::vector<CellResult> kept;
        for (auto& result : journal.results) {
          const std::string key = cell_key(result.device_key, result.cell);
          if (planned.count(key)) {
            kept.push_back(std::move(result));
          } else {
            journal.warnings.push_back(path.string() + ": dropped a record outside this run's plan: " + describe(result.cell) +
                                       " on '" + result.device_key + "'");
          }
        }
        for (const auto& warning : journal.warnings) std::cerr << "crossbench: warning: " << warning << "\n";
        verdict = {{"done", nlohmann::json::array()}, {"new_devices", header.new_device_keys(journal.header)}};
        for (const auto& result : kept) verdict["done"].push_back(cell_key(result.device_key, result.cell));
        state.earlier = std::move(kept);
        state.new_devices = verdict["new_devices"].get<std::vector<std::string>>();
      }
    } catch (const WriteFailure& error) {
      verdict = {{"failure", error.what()}};  // the disk's fault, not the input's: exit 1
    } catch (const Error& error) {
      verdict = {{"error", std::string("--resume refused: ") + error.what()}};
    }
  }
  const nlohmann::json agreed = nlohmann::json::parse(mpi.broadcast_from_root(verdict.dump()));
  if (agreed.contains("error")) throw UsageError(agreed["error"].get<std::string>());
  if (agreed.contains("failure")) throw Error(agreed["failure"].get<std::string>());
  for (const auto& key : agreed["done"]) state.done.insert(key.get<std::string>());
  return state;
}

}  // namespace crossbench
