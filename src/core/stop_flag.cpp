#include "crossbench/stop_flag.hpp"

#include <time.h>

#include <atomic>
#include <cmath>
#include <cstring>

namespace crossbench::stop_flag {
namespace {

// Lock-free atomics: safe to touch from a signal handler.
std::atomic<int> raised{0};
std::atomic<int> first_signal{0};
std::atomic<long long> level_one_at_ns{0};  // CLOCK_MONOTONIC when level 1 was raised
std::atomic<long long> grace_ns{120'000'000'000LL};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<long long>::is_always_lock_free);

long long monotonic_ns() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return static_cast<long long>(now.tv_sec) * 1'000'000'000LL + now.tv_nsec;
}

std::function<void()>& poller() {
  static std::function<void()> installed;
  return installed;
}

}  // namespace

void raise(int signal_number, int new_level) noexcept {
  int expected = 0;
  if (signal_number != 0) first_signal.compare_exchange_strong(expected, signal_number);
  long long unset = 0;
  level_one_at_ns.compare_exchange_strong(unset, monotonic_ns());
  int current = raised.load();
  while (current < new_level && !raised.compare_exchange_weak(current, new_level)) {
  }
}

int raised_level() noexcept { return raised.load(); }

int level() noexcept {
  const int current = raised.load();
  if (current == 1 && monotonic_ns() - level_one_at_ns.load() >= grace_ns.load()) return 2;
  return current;
}

int signal_number() noexcept { return first_signal.load(); }

void set_grace_seconds(double seconds) noexcept {
  grace_ns.store(static_cast<long long>(std::fmax(seconds, 0.0) * 1e9));
}

void reset() noexcept {
  raised.store(0);
  first_signal.store(0);
  level_one_at_ns.store(0);
}

bool cell_must_end() {
  if (poller()) poller()();
  return level() >= 2;
}

std::string reason() {
  const int number = signal_number();
  std::string text = number > 0 ? "interrupted by signal " + std::to_string(number) + " (" + strsignal(number) + ")"
                                : "interrupted by a stop request";
  text += raised_level() >= 2 ? " (a second stop request)" : " (the stop grace time ran out)";
  return text + "; not measured: it runs again on --resume";
}

PollerGuard::PollerGuard(std::function<void()> installed) { poller() = std::move(installed); }
PollerGuard::~PollerGuard() { poller() = nullptr; }

}  // namespace crossbench::stop_flag
