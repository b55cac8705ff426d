#include "core/device_health.hpp"

#include <mutex>

namespace crossbench::device_health {
namespace {

std::mutex mutex;
std::string first_error;  // guarded by mutex

}  // namespace

void mark_lost(const std::string& why) {
  const std::lock_guard lock(mutex);
  if (first_error.empty()) first_error = why.empty() ? "a sticky device error" : why;
}

std::string lost() {
  const std::lock_guard lock(mutex);
  return first_error;
}

}  // namespace crossbench::device_health
