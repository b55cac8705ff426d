#include "core/utc_time.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <limits>
#include <optional>

namespace crossbench {

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto milliseconds =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[40];
  const std::size_t length = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + length, sizeof text - length, ".%03lldZ", static_cast<long long>(milliseconds));
  return text;
}

namespace {

// "2026-12-01T04:05:06.789Z" as whole seconds since the epoch and the fraction of a second, or
// nothing. Kept apart: a double of ~1.8e9 s holds the milliseconds only to ~1e-7 s.
struct UtcTime {
  std::time_t seconds;
  double fraction;
};

std::optional<UtcTime> parse_utc(const std::string& text) {
  std::tm utc{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &utc.tm_year, &utc.tm_mon, &utc.tm_mday, &utc.tm_hour,
                  &utc.tm_min, &utc.tm_sec, &consumed) != 6 || consumed != 19)
    return std::nullopt;
  if (utc.tm_mon < 1 || utc.tm_mon > 12 || utc.tm_mday < 1 || utc.tm_mday > 31 || utc.tm_hour > 23 || utc.tm_min > 59 ||
      utc.tm_sec > 60)
    return std::nullopt;
  double fraction = 0, scale = 0.1;
  std::size_t at = 19;
  if (at < text.size() && text[at] == '.') {
    for (++at; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at, scale /= 10) fraction += (text[at] - '0') * scale;
  }
  if (at + 1 != text.size() || text[at] != 'Z') return std::nullopt;
  utc.tm_year -= 1900;
  utc.tm_mon -= 1;
  return UtcTime{timegm(&utc), fraction};
}

}  // namespace

double utc_seconds_between(const std::string& started, const std::string& finished) {
  const auto from = parse_utc(started), to = parse_utc(finished);
  if (!from || !to) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(to->seconds - from->seconds) + (to->fraction - from->fraction);
}

}  // namespace crossbench
