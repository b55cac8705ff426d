// The journal: rank 0's append-only record of every finished cell, written
// before anything else is done with the result (DESIGN.md "Distribution").
//
// `<cube>.journal` is text, one record per line: `<crc32 as 8 hex digits> <JSON>`.
// The first record is the header (schema, job, matrix); every other one is a
// CellResult (the same JSON rank 0 receives over MPI). Each line is flushed
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

inline constexpr const char* journal_schema = "crossbench-journal/1";

// What a journal was written for: a resumed run must match it.
struct JournalHeader {
  std::string schema = journal_schema;
  std::string cube_schema;
  std::string job_name;
  nlohmann::json matrix;    // networks, engines, precisions, batches, phases, replicas
  nlohmann::json measure;   // warm-up, steps, CI target, time limit, seed, update

  static JournalHeader for_run(const Options& options);
  // Empty when the two match; else a sentence naming what differs.
  std::string mismatch(const JournalHeader& other) const;
};

std::filesystem::path journal_path(const std::filesystem::path& cube);

struct JournalContents {
  JournalHeader header;
  std::vector<CellResult> results;   // in the order written; a cell appears at most once
  std::vector<std::string> warnings; // dropped lines, with line numbers and why
};

// Reads a journal; throws Error when the file cannot be read or has no valid header.
JournalContents read_journal(const std::filesystem::path& path);

class JournalWriter {
 public:
  // Creates (truncating) a journal with its header, or opens an existing one to append.
  static JournalWriter create(const std::filesystem::path& path, const JournalHeader& header);
  static JournalWriter append_to(const std::filesystem::path& path);
  JournalWriter(JournalWriter&& other) noexcept;
  JournalWriter& operator=(JournalWriter&&) = delete;
  JournalWriter(const JournalWriter&) = delete;
  ~JournalWriter();

  void append(const CellResult& result);  // write, then fsync: durable when this returns

 private:
  JournalWriter(std::filesystem::path path, int descriptor) : path_(std::move(path)), descriptor_(descriptor) {}
  void write_record(const nlohmann::json& record);
  std::filesystem::path path_;
  int descriptor_ = -1;
};

// The key of a cell within a run: device key + describe(cell).
std::string cell_key(const std::string& device_key, const CellSpec& cell);

}  // namespace crossbench
