#include "cluster/journal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "crossbench/cube.hpp"
#include "crossbench/error.hpp"
#include "crossbench/options_schema.hpp"
#include "cluster/resume_settings.hpp"

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

std::filesystem::path journal_path(const std::filesystem::path& cube) {
  return std::filesystem::path(cube.string() + ".journal");
}

JournalHeader JournalHeader::for_run(const JobOptions& options, std::vector<std::string> device_keys) {
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
  header.settings = resume_settings(options);
  header.workers = resume_worker_commands(options);
  std::sort(device_keys.begin(), device_keys.end());
  device_keys.erase(std::unique(device_keys.begin(), device_keys.end()), device_keys.end());
  header.device_keys = std::move(device_keys);
  return header;
}

namespace {

// "a = 1 in the journal, 2 now" for each key of two flat objects that differs;
// a key that `engines_of` scopes to some engines goes to `engine_scoped` when given.
void compare_flat(const std::string& what, const nlohmann::json& journal, const nlohmann::json& now,
                  std::vector<std::string>& differences,
                  const std::function<std::vector<std::string>(const std::string&)>& engines_of,
                  std::vector<EngineScopedChange>* engine_scoped) {
  std::set<std::string> keys;
  for (const auto& [key, value] : journal.items()) keys.insert(key);
  for (const auto& [key, value] : now.items()) keys.insert(key);
  const auto shown = [](const nlohmann::json& object, const std::string& key) {
    if (!object.contains(key)) return std::string("(not set)");
    return object[key].is_string() ? "'" + object[key].get<std::string>() + "'" : object[key].dump();
  };
  for (const auto& key : keys) {
    if (journal.contains(key) && now.contains(key) && journal[key] == now[key]) continue;
    std::string text = what + " " + key + " is " + shown(journal, key) + " in the journal, " + shown(now, key) + " in this run";
    std::vector<std::string> engines = engines_of(key);
    if (engine_scoped != nullptr && !engines.empty())
      engine_scoped->push_back({std::move(text), std::move(engines)});
    else
      differences.push_back(std::move(text));
  }
}

// The engines a setting's schema row scopes it to (empty: every engine).
std::vector<std::string> setting_engines(const std::string& key) {
  const OptionSpec* spec = find_option(key);
  return spec == nullptr ? std::vector<std::string>{} : spec->engines;
}

// `workers.<engine>` runs that engine's cells alone.
std::vector<std::string> worker_command_engines(const std::string& key) {
  const std::string prefix = "workers.";
  if (key.rfind(prefix, 0) != 0 || key.size() == prefix.size()) return {};
  return {key.substr(prefix.size())};
}

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "'" : ", '") + item + "'";
  return text;
}

}  // namespace

std::vector<std::string> JournalHeader::new_device_keys(const JournalHeader& other) const {
  std::vector<std::string> added;
  for (const auto& key : device_keys)
    if (std::find(other.device_keys.begin(), other.device_keys.end(), key) == other.device_keys.end()) added.push_back(key);
  return added;
}

std::string JournalHeader::mismatch(const JournalHeader& other, bool allow_new_devices,
                                   std::vector<EngineScopedChange>* engine_scoped) const {
  std::vector<std::string> differences;
  if (schema != other.schema) {
    differences.push_back("it has journal schema '" + other.schema + "', this crossbench writes '" + schema + "'");
    return differences.front();  // the rest of an older header cannot be compared
  }
  if (cube_schema != other.cube_schema)
    differences.push_back("it was written for cube schema '" + other.cube_schema + "', this crossbench writes '" + cube_schema + "'");
  if (job_name != other.job_name) differences.push_back("it was written by job '" + other.job_name + "', this run is job '" + job_name + "'");
  if (matrix != other.matrix) differences.push_back("its matrix " + other.matrix.dump() + " differs from this run's " + matrix.dump());
  // A setting the journal has no value for was added to the schema after the
  // journal was written; its default is the behaviour that build had (a new
  // key's default keeps the old behaviour), so that value is no difference.
  nlohmann::json journal_settings = other.settings;
  for (const auto& [key, value] : settings.items()) {
    const OptionSpec* spec = find_option(key);
    if (!journal_settings.contains(key) && spec != nullptr && value.is_string() &&
        value.get<std::string>() == spec->default_value)
      journal_settings[key] = value;
  }
  compare_flat("setting", journal_settings, settings, differences, setting_engines, engine_scoped);
  compare_flat("worker command", other.workers, workers, differences, worker_command_engines, engine_scoped);
  std::vector<std::string> missing;
  for (const auto& key : other.device_keys)
    if (std::find(device_keys.begin(), device_keys.end(), key) == device_keys.end()) missing.push_back(key);
  if (!missing.empty())
    differences.push_back("the journal's device key(s) " + joined(missing) +
                          " have no rank in this run (launch the same devices, the same --device-tag and, on CPUs, "
                          "the same threads per rank)");
  const auto added = new_device_keys(other);
  if (!added.empty() && !allow_new_devices)
    differences.push_back("this run has device key(s) " + joined(added) + " that the journal does not have "
                          "(--allow-new-devices adds their cells to this cube)");
  std::string text;
  for (const auto& difference : differences) text += (text.empty() ? "" : "; ") + difference;
  return text;
}

JournalContents read_journal(const std::filesystem::path& path, bool allow_damaged_header) {
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
      // The header is line 1: without it nothing can be compared, so it is named, never skipped over.
      if (line_number == 1) contents.header_damaged = true;
      else contents.warnings.push_back(where + ": dropped a line whose checksum does not match (corrupt)");
      continue;
    }
    if (line_number > 1) contents.intact_records.push_back(line);
    try {
      const auto record = nlohmann::json::parse(line.substr(9));
      if (!have_header && !contents.header_damaged) {
        if (record.value("type", "") != "header") throw Error("the first record is not the header");
        contents.header.schema = record.at("schema").get<std::string>();
        contents.header.cube_schema = record.at("cube_schema").get<std::string>();
        contents.header.job_name = record.at("job_name").get<std::string>();
        if (contents.header.schema == journal_schema) {
          contents.header.matrix = record.at("matrix");
          contents.header.settings = record.at("settings");
          contents.header.workers = record.at("workers");
          contents.header.device_keys = record.at("device_keys").get<std::vector<std::string>>();
        }
        have_header = true;
        continue;
      }
      if (record.value("type", "") == "devices") {
        for (const auto& key : record.at("device_keys").get<std::vector<std::string>>())
          if (std::find(contents.header.device_keys.begin(), contents.header.device_keys.end(), key) ==
              contents.header.device_keys.end())
            contents.header.device_keys.push_back(key);
        std::sort(contents.header.device_keys.begin(), contents.header.device_keys.end());
        continue;
      }
      if (record.value("type", "") == "segment" || record.value("type", "") == "segment_end") {
        contents.segment_records.push_back(record);
        continue;
      }
      CellResult result = cell_result_from_json(record.at("result"));
      if (result.status == Status::not_run) continue;  // an interrupted cell: it runs again
      if (!seen.insert(cell_key(result.device_key, result.cell)).second) {
        contents.warnings.push_back(where + ": dropped a second record of " + describe(result.cell));
        continue;
      }
      contents.results.push_back(std::move(result));
    } catch (const std::exception& error) {
      if (!have_header && !contents.header_damaged) throw Error(where + ": not a crossbench journal: " + error.what());
      contents.warnings.push_back(where + ": dropped a malformed record: " + error.what());
    }
  }
  if (contents.header_damaged) {
    if (contents.intact_records.empty()) throw Error(path.string() + ": not a crossbench journal (no valid header line)");
    if (!allow_damaged_header)
      throw Error(path.string() + ":1: the journal's header fails its checksum (damaged); " +
                  std::to_string(contents.results.size()) + " intact cell record(s) follow it. `--resume --salvage` " +
                  "rebuilds the header from this run's job if every intact record agrees with it; nothing was changed");
    return contents;
  }
  if (!have_header) throw Error(path.string() + ": not a crossbench journal (no valid header line)");
  return contents;
}

JournalWriter JournalWriter::create(const std::filesystem::path& path, const JournalHeader& header) {
  // O_EXCL: never truncate a file that is there (--overwrite unlinks the old
  // journal first, which removes a symlink itself, not its target); with
  // O_EXCL a symlink at `path` is an error too, even a dangling one.
  const int descriptor = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, 0644);
  if (descriptor < 0) throw_system_error("creating journal", path);
  JournalWriter writer(path, descriptor);
  try {
    writer.write_record({{"type", "header"},
                         {"schema", header.schema},
                         {"cube_schema", header.cube_schema},
                         {"job_name", header.job_name},
                         {"matrix", header.matrix},
                         {"settings", header.settings},
                         {"workers", header.workers},
                         {"device_keys", header.device_keys}});
  } catch (const Error&) {
    ::unlink(path.c_str());  // ours (O_EXCL) and holding nothing: a journal without a header could not be resumed
    throw;
  }
  return writer;
}

JournalWriter JournalWriter::append_to(const std::filesystem::path& path) {
  // A torn last line (no newline) would glue onto the next record: end it first.
  std::error_code ignored;
  const auto size = std::filesystem::file_size(path, ignored);
  const int descriptor = ::open(path.c_str(), O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (descriptor < 0) throw_system_error("opening journal", path);
  JournalWriter writer(path, descriptor);
  struct stat status {};
  if (::fstat(descriptor, &status) != 0) throw_system_error("fstat of journal", path);
  if (!S_ISREG(status.st_mode)) throw Error("journal '" + path.string() + "' is not a regular file");
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

void JournalWriter::append_devices(const std::vector<std::string>& device_keys) {
  write_record({{"type", "devices"}, {"device_keys", device_keys}});
}

void JournalWriter::append_segment(const nlohmann::json& record) { write_record(record); }
std::filesystem::path JournalWriter::rewrite_header(const std::filesystem::path& path, const JournalHeader& header,
                                                    const std::vector<std::string>& records,
                                                    const std::string& kept_suffix) {
  const std::filesystem::path temporary = path.string() + ".rewrite." + std::to_string(::getpid());
  // The first free name: an earlier kept file (a second salvage, a second
  // setting change) is never overwritten.
  std::filesystem::path kept = path.string() + kept_suffix;
  for (int n = 1; std::filesystem::exists(std::filesystem::symlink_status(kept)); ++n)
    kept = path.string() + kept_suffix + "." + std::to_string(n);
  {
    JournalWriter writer = create(temporary, header);
    try {
      for (const auto& line : records) writer.write_line(line);
    } catch (const Error&) {
      ::unlink(temporary.c_str());
      throw;
    }
  }
  // The old file is kept (a hard link: the journal's path never goes
  // missing); then the rebuilt one replaces it in one rename.
  if (::link(path.c_str(), kept.c_str()) != 0) {
    ::unlink(temporary.c_str());
    throw_system_error("keeping the journal as it was as", kept);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    ::unlink(temporary.c_str());
    throw_system_error("replacing the journal", path);
  }
  return kept;
}

void JournalWriter::write_record(const nlohmann::json& record) {
  const std::string payload = record.dump();
  write_line(crc_hex(payload) + " " + payload);
}

void JournalWriter::write_line(const std::string& text) {
  const std::string line = text + "\n";
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
