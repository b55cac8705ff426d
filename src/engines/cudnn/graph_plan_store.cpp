// graph_plan_store.hpp: the store and its file.
#include "engines/cudnn/graph_plan_store.hpp"

#include <cstring>
#include <utility>

#include "crossbench/error.hpp"
#include "engines/cudnn/cache_file.hpp"

namespace crossbench::cudnn {
namespace {

constexpr const char* kMagic = "crossbench-graph-plans/1\n";

[[noreturn]] void corrupt(const std::string& source, const std::string& what) {
  throw UsageError("graph plan file " + source + ": " + what +
                   " (it is not a crossbench graph plan file of format crossbench-graph-plans/1; remove it, and the "
                   "next run compiles its plans again)");
}

void put_length(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void put_field(std::string& out, const std::string& field) {
  put_length(out, field.size(), 4);
  out += field;
}

// Reads the records of a file's bytes in order.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& source) : bytes_(bytes), source_(source) {}
  bool done() const { return at_ == bytes_.size(); }
  std::uint64_t length(int width, const std::string& where) {
    if (bytes_.size() - at_ < static_cast<std::size_t>(width)) corrupt(source_, where + " is cut short");
    std::uint64_t value = 0;
    for (int i = 0; i < width; ++i) value |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes_[at_ + i])) << (8 * i);
    at_ += static_cast<std::size_t>(width);
    return value;
  }
  std::string field(int width, const std::string& where) {
    const std::uint64_t n = length(width, where);
    if (n > bytes_.size() - at_) corrupt(source_, where + " claims " + std::to_string(n) + " bytes, the file holds " +
                                                      std::to_string(bytes_.size() - at_) + " more");
    std::string value = bytes_.substr(at_, static_cast<std::size_t>(n));
    at_ += static_cast<std::size_t>(n);
    return value;
  }
  void skip_magic() {
    const std::size_t n = std::strlen(kMagic);
    if (bytes_.compare(0, n, kMagic) != 0) corrupt(source_, "it does not begin with the format's line");
    at_ = n;
  }

 private:
  const std::string& bytes_;
  const std::string& source_;
  std::size_t at_ = 0;
};

}  // namespace

GraphPlanStore::GraphPlanStore(std::filesystem::path path, std::string context)
    : path_(std::move(path)), context_(std::move(context)) {
  if (!file_backed()) return;
  std::error_code error;
  if (!std::filesystem::exists(path_, error)) return;  // nothing compiled yet: the first save() creates it
  if (std::filesystem::is_directory(path_, error))
    throw UsageError("graph plan file " + path_.string() + " is a directory (it is --algo-cache's file + .plans)");
  std::string bytes;
  try {
    bytes = cache_file::read_all(path_);
  } catch (const Error& e) {
    throw UsageError("graph plan file " + path_.string() + " cannot be read: " + e.what());
  }
  merge(bytes, path_.string());
  loaded_ = plans();
  unsaved_ = false;
}

void GraphPlanStore::keep(const std::string& key, std::vector<std::uint8_t> bytes) {
  if (bytes.empty() || plans_.count(key) != 0) return;  // the first kept stays
  plans_.emplace(key, std::move(bytes));
  unsaved_ = true;
}

const std::vector<std::uint8_t>* GraphPlanStore::find(const std::string& key) const {
  const auto found = plans_.find(key);
  return found == plans_.end() ? nullptr : &found->second;
}

std::string GraphPlanStore::serialized() const {
  std::string out = kMagic;
  const auto put = [&](const std::string& context, const std::string& key, const std::vector<std::uint8_t>& plan) {
    put_field(out, context);
    put_field(out, key);
    put_length(out, plan.size(), 8);
    out.append(reinterpret_cast<const char*>(plan.data()), plan.size());
  };
  for (const auto& [key, plan] : plans_) put(context_, key, plan);
  for (const auto& [where, plan] : foreign_) put(where.first, where.second, plan);
  return out;
}

void GraphPlanStore::merge(const std::string& bytes, const std::string& source) {
  Reader reader(bytes, source);
  reader.skip_magic();
  for (std::size_t record = 0; !reader.done(); ++record) {
    const std::string where = "record " + std::to_string(record);
    std::string context = reader.field(4, where + "'s context");
    std::string key = reader.field(4, where + "'s key");
    const std::string plan = reader.field(8, where + "'s plan");
    if (plan.empty()) corrupt(source, where + " (" + key + ") holds no plan");
    std::vector<std::uint8_t> plan_bytes(plan.begin(), plan.end());
    if (context == context_) {
      plans_.emplace(std::move(key), std::move(plan_bytes));  // this process's own stay
    } else {
      foreign_.emplace(std::make_pair(std::move(context), std::move(key)), std::move(plan_bytes));
    }
  }
}

void GraphPlanStore::save() {
  if (!file_backed() || !unsaved_) return;
  const cache_file::FileLock lock(path_);
  std::error_code error;
  if (std::filesystem::exists(path_, error)) merge(cache_file::read_all(path_), path_.string());
  cache_file::write_atomically(path_, serialized());
  unsaved_ = false;
}

}  // namespace crossbench::cudnn
