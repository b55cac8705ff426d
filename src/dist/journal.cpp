#include "dist/journal.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "crossbench/cube.hpp"
#include "crossbench/error.hpp"

namespace crossbench {
namespace {

std::string crc_hex(const std::string& text) {
  const auto crc = crc32(0L, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size()));
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08lx", static_cast<unsigned long>(crc));
  return hex;
}

[[noreturn]] void throw_system_error(const std::string& what, const std::filesystem::path& path) {
  throw Error(what + " '" + path.string() + "' failed on " + where_am_i() + ": " + std::strerror(errno));
}

}  // namespace

std::string cell_key(const std::string& device_key, const CellSpec& cell) { return device_key + "|" + describe(cell); }

std::filesystem::path journal_path(const std::filesystem::path& cube) {
  return std::filesystem::path(cube.string() + ".journal");
}

JournalHeader JournalHeader::for_run(const Options& options) {
  JournalHeader header;
  header.cube_schema = crossbench::cube_schema;
  header.job_name = options.job_name;
  nlohmann::json precisions = nlohmann::json::array(), phases = nlohmann::json::array();
  for (const auto precision : options.matrix.precisions) precisions.push_back(std::string(to_string(precision)));
  for (const auto phase : options.matrix.phases) phases.push_back(std::string(to_string(phase)));
  header.matrix = {{"networks", options.matrix.networks}, {"engines", options.matrix.engines},
                   {"precisions", precisions},           {"batches", options.matrix.batches},
                   {"phases", phases},                   {"replicas", options.replicas}};
  // Only when set, so that journals of single-device runs keep their header.
  if (options.matrix.gpus != std::vector<int>{1}) header.matrix["gpus"] = options.matrix.gpus;
  header.measure = {{"warmup", options.measure.warmup_steps},
                    {"min_steps", options.measure.min_steps},
                    {"max_steps", options.measure.max_steps},
                    {"target_ci", options.measure.target_ci},
                    {"cell_time_limit_s", options.measure.cell_time_limit_s},
                    {"seed", options.engine.seed},
                    {"update", options.engine.update == Update::sgd ? "sgd" : "none"}};
  return header;
}

std::string JournalHeader::mismatch(const JournalHeader& other) const {
  std::vector<std::string> differences;
  if (schema != other.schema) differences.push_back("it has journal schema '" + other.schema + "', this crossbench writes '" + schema + "'");
  if (cube_schema != other.cube_schema)
    differences.push_back("it was written for cube schema '" + other.cube_schema + "', this crossbench writes '" + cube_schema + "'");
  if (job_name != other.job_name) differences.push_back("it was written by job '" + other.job_name + "', this run is job '" + job_name + "'");
  if (matrix != other.matrix) differences.push_back("its matrix " + other.matrix.dump() + " differs from this run's " + matrix.dump());
  if (measure != other.measure)
    differences.push_back("its measurement settings " + other.measure.dump() + " differ from this run's " + measure.dump());
  std::string text;
  for (const auto& difference : differences) text += (text.empty() ? "" : "; ") + difference;
  return text;
}

JournalContents read_journal(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw_system_error("reading journal", path);
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  JournalContents contents;
  bool have_header = false;
  std::set<std::string> seen;
  std::size_t start = 0;
  for (int line_number = 1; start < text.size(); ++line_number) {
    const auto end = text.find('\n', start);
    const std::string where = path.string() + ":" + std::to_string(line_number);
    if (end == std::string::npos) {
      contents.warnings.push_back(where + ": dropped a truncated last line (no newline: the writer died mid-write)");
      break;
    }
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.size() < 10 || line[8] != ' ' || crc_hex(line.substr(9)) != line.substr(0, 8)) {
      contents.warnings.push_back(where + ": dropped a line whose checksum does not match (corrupt)");
      continue;
    }
    try {
      const auto record = nlohmann::json::parse(line.substr(9));
      if (!have_header) {
        if (record.value("type", "") != "header") throw Error("the first record is not the header");
        contents.header.schema = record.at("schema").get<std::string>();
        contents.header.cube_schema = record.at("cube_schema").get<std::string>();
        contents.header.job_name = record.at("job_name").get<std::string>();
        contents.header.matrix = record.at("matrix");
        contents.header.measure = record.at("measure");
        have_header = true;
        continue;
      }
      CellResult result = cell_result_from_json(record.at("result"));
      if (!seen.insert(cell_key(result.device_key, result.cell)).second) {
        contents.warnings.push_back(where + ": dropped a second record of " + describe(result.cell));
        continue;
      }
      contents.results.push_back(std::move(result));
    } catch (const std::exception& error) {
      if (!have_header) throw Error(where + ": not a crossbench journal: " + error.what());
      contents.warnings.push_back(where + ": dropped a malformed record: " + error.what());
    }
  }
  if (!have_header) throw Error(path.string() + ": not a crossbench journal (no valid header line)");
  return contents;
}

JournalWriter JournalWriter::create(const std::filesystem::path& path, const JournalHeader& header) {
  const int descriptor = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (descriptor < 0) throw_system_error("creating journal", path);
  JournalWriter writer(path, descriptor);
  writer.write_record({{"type", "header"},
                       {"schema", header.schema},
                       {"cube_schema", header.cube_schema},
                       {"job_name", header.job_name},
                       {"matrix", header.matrix},
                       {"measure", header.measure}});
  return writer;
}

JournalWriter JournalWriter::append_to(const std::filesystem::path& path) {
  // A torn last line (no newline) would glue onto the next record: end it first.
  std::error_code ignored;
  const auto size = std::filesystem::file_size(path, ignored);
  const int descriptor = ::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
  if (descriptor < 0) throw_system_error("opening journal", path);
  JournalWriter writer(path, descriptor);
  if (size > 0) {
    char last = '\n';
    if (::pread(descriptor, &last, 1, static_cast<off_t>(size - 1)) == 1 && last != '\n' &&
        ::write(descriptor, "\n", 1) != 1)
      throw_system_error("repairing journal", path);
  }
  return writer;
}

JournalWriter::JournalWriter(JournalWriter&& other) noexcept
    : path_(std::move(other.path_)), descriptor_(other.descriptor_) {
  other.descriptor_ = -1;
}

JournalWriter::~JournalWriter() {
  if (descriptor_ >= 0) ::close(descriptor_);
}

void JournalWriter::append(const CellResult& result) { write_record({{"type", "result"}, {"result", to_json(result)}}); }

void JournalWriter::write_record(const nlohmann::json& record) {
  const std::string payload = record.dump();
  const std::string line = crc_hex(payload) + " " + payload + "\n";
  std::size_t written = 0;
  while (written < line.size()) {
    const auto count = ::write(descriptor_, line.data() + written, line.size() - written);
    if (count < 0) {
      if (errno == EINTR) continue;
      throw_system_error("appending to journal", path_);
    }
    written += static_cast<std::size_t>(count);
  }
  if (::fsync(descriptor_) != 0) throw_system_error("fsync of journal", path_);
}

}  // namespace crossbench
