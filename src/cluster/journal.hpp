// The journal: rank 0's append-only record of every finished cell, written
// before anything else is done with the result (DESIGN.md "Distribution").
//
// `<cube>.journal` is text, one record per line: `<crc32 as 8 hex digits> <JSON>`.
// The first record is the header (schema, job, matrix, the settings that
// change the numbers, the worker commands, the device keys); every other one
// is a CellResult (the same JSON rank 0 receives over MPI), or a `devices`
// record naming device keys that a resume with --allow-new-devices added. Each line is flushed
// and fsync'd. A line whose checksum does not match, or that does not end in
// a newline (the process died mid-write), is dropped with a warning: a cell
// in it simply runs again on --resume.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "crossbench/options.hpp"
#include "crossbench/result.hpp"

namespace crossbench {

// 2 added the settings, worker commands and device keys that --resume compares;
// 3 added the run segment records (cluster/run_segment.hpp).
inline constexpr const char* journal_schema = "crossbench-journal/3";

// A difference between a journal and this run that changes only some engines'
// numbers: a setting whose schema row names its engines (OptionSpec::engines),
// or a framework's worker command (`workers.<engine>`).
struct EngineScopedChange {
  std::string text;                  // "setting engine.jax_timing is 'device-paced' in the journal, 'events' in this run"
  std::vector<std::string> engines;  // the engines whose cells it changes
};

// What a journal was written for: a resumed run must match it.
struct JournalHeader {
  std::string schema = journal_schema;
  std::string cube_schema;
  std::string job_name;
  nlohmann::json matrix;    // networks, engines, precisions, batches, phases, replicas
  nlohmann::json settings;  // resume_settings(): every setting that changes the numbers
  nlohmann::json workers;   // resume_worker_commands()
  std::vector<std::string> device_keys;  // sorted; a `devices` record adds to them

  [[nodiscard]] static JournalHeader for_run(const JobOptions& options, std::vector<std::string> device_keys);
  // Empty when the two match; else a sentence naming what differs. `other` is
  // the journal's; device keys new in this run are accepted when `allow_new_devices`.
  // With `engine_scoped`, a difference that changes only some engines' numbers
  // goes there instead of into the sentence (--allow-setting-change decides).
  [[nodiscard]] std::string mismatch(const JournalHeader& other, bool allow_new_devices,
                                     std::vector<EngineScopedChange>* engine_scoped = nullptr) const;
  // The device keys of this run that the journal `other` does not have.
  [[nodiscard]] std::vector<std::string> new_device_keys(const JournalHeader& other) const;
};

[[nodiscard]] std::filesystem::path journal_path(const std::filesystem::path& cube);

struct JournalContents {
  JournalHeader header;
  std::vector<CellResult> results;   // in the order written; a cell appears at most once
  std::vector<std::string> warnings; // dropped lines, with line numbers and why
  std::vector<nlohmann::json> segment_records;  // `segment` and `segment_end` records, in order
  bool header_damaged = false;       // line 1 failed its checksum (only with allow_damaged_header)
  std::vector<std::string> intact_records;  // every line after line 1 that passed its checksum, as written
};

// Reads a journal; throws Error when the file cannot be read or has no valid
// header. A header that fails its checksum (one flipped byte) is named as
// such, with the intact records after it counted; with `allow_damaged_header`
// (--resume --salvage) the records are read anyway and header_damaged is set.
[[nodiscard]] JournalContents read_journal(const std::filesystem::path& path, bool allow_damaged_header = false);

class JournalWriter {
 public:
  // Creates a journal with its header, exclusively (an existing file or a
  // symbolic link at `path` is an error: --overwrite removes the old one
  // first), or opens an existing regular file, never through a symlink, to append.
  [[nodiscard]] static JournalWriter create(const std::filesystem::path& path, const JournalHeader& header);
  [[nodiscard]] static JournalWriter append_to(const std::filesystem::path& path);
  // Replaces the journal at `path` by `header` followed by `records` as they
  // were written (temporary file, fsync, rename); the file as it was stays
  // beside it as `<path><kept_suffix>` (--salvage: ".damaged"; an allowed
  // setting change: ".superseded"; ".1", ".2", ... after it where that name
  // is taken). Returns that path.
  static std::filesystem::path rewrite_header(const std::filesystem::path& path, const JournalHeader& header,
                                              const std::vector<std::string>& records,
                                              const std::string& kept_suffix = ".damaged");
  JournalWriter(JournalWriter&& other) noexcept;
  JournalWriter& operator=(JournalWriter&&) = delete;
  JournalWriter(const JournalWriter&) = delete;
  ~JournalWriter();

  void append(const CellResult& result);  // write, then fsync: durable when this returns
  void append_devices(const std::vector<std::string>& device_keys);  // keys a resume added
  void append_segment(const nlohmann::json& record);  // a run segment's start or end (cluster/run_segment.hpp)

 private:
  JournalWriter(std::filesystem::path path, int descriptor) : path_(std::move(path)), descriptor_(descriptor) {}
  void write_record(const nlohmann::json& record);
  void write_line(const std::string& line);  // one whole line (newline added), then fsync
  std::filesystem::path path_;
  int descriptor_ = -1;
};

}  // namespace crossbench
