// The kit's buffer planner (src/engines/kit/buffer_plan.*): every plan is
// valid (buffers alive at the same time never share a byte, offsets aligned),
// its peak is the exact extent of the placement, never below the largest live
// set, never above either gap rule alone, and on small graphs it is held to
// the brute-force optimum.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "engines/kit/buffer_plan.hpp"

namespace crossbench::kit {
namespace {

struct Request {
  std::int64_t bytes;
  bool persistent;
  std::size_t first, last;  // op indices
};

constexpr Alignment kCacheLine{64, 4096, 4 * 4096};

std::int64_t round_up(std::int64_t value, std::int64_t to) { return (value + to - 1) / to * to; }
std::int64_t reserved(const Request& r) {
  return round_up(std::max<std::int64_t>(r.bytes, 1), kCacheLine.of(r.bytes));
}
bool alive_together(const Request& a, const Request& b) {
  return a.persistent || b.persistent || (a.first <= b.last && b.first <= a.last);
}

BufferPlan make_plan(const std::vector<Request>& requests) {
  BufferPlan plan(kCacheLine);
  for (const Request& r : requests) {
    const int buffer = plan.request(r.bytes, r.persistent, "b");
    if (!r.persistent) {
      plan.use(buffer, r.first);
      plan.use(buffer, r.last);
    }
  }
  return plan;
}

// Any placement can be pushed down, buffer by buffer in order of offset, to
// the lowest aligned offset free of the buffers already pushed, without
// raising its peak: so the optimum is the best "lowest offset" placement over
// all orders.
std::int64_t brute_force_optimum(const std::vector<Request>& requests) {
  std::vector<std::size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::int64_t best = std::numeric_limits<std::int64_t>::max();
  std::vector<std::int64_t> offset(requests.size());
  do {
    std::int64_t peak = 0;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const Request& r = requests[order[k]];
      const std::int64_t size = reserved(r), align = kCacheLine.of(r.bytes);
      std::int64_t candidate = 0;
      for (bool moved = true; moved;) {  // raise past every clash until none is left
        moved = false;
        for (std::size_t j = 0; j < k; ++j) {
          const Request& other = requests[order[j]];
          const std::int64_t begin = offset[order[j]], end = begin + reserved(other);
          if (alive_together(r, other) && begin < candidate + size && candidate < end) {
            candidate = round_up(end, align);
            moved = true;
          }
        }
      }
      offset[order[k]] = candidate;
      peak = std::max(peak, candidate + size);
    }
    best = std::min(best, peak);
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

void expect_valid(const BufferPlan& plan, const std::vector<Request>& requests) {
  std::int64_t extent = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const std::int64_t begin_i = plan.offset(static_cast<int>(i)), end_i = begin_i + reserved(requests[i]);
    EXPECT_EQ(begin_i % kCacheLine.of(requests[i].bytes), 0) << "buffer " << i << " is aligned";
    extent = std::max(extent, end_i);
    for (std::size_t j = 0; j < i; ++j) {
      if (!alive_together(requests[i], requests[j])) continue;
      const std::int64_t begin_j = plan.offset(static_cast<int>(j)), end_j = begin_j + reserved(requests[j]);
      EXPECT_TRUE(end_i <= begin_j || end_j <= begin_i) << "buffers " << i << " and " << j << " overlap";
    }
  }
  EXPECT_EQ(plan.planned_bytes(), extent) << "the peak is the exact extent of the placement";
}

std::int64_t largest_live_set(const std::vector<Request>& requests) {
  std::size_t ops = 0;
  for (const Request& r : requests) ops = std::max(ops, r.last + 1);
  std::int64_t largest = 0;
  for (std::size_t op = 0; op < ops; ++op) {
    std::int64_t live = 0;
    for (const Request& r : requests)
      if (r.persistent || (r.first <= op && op <= r.last)) live += reserved(r);
    largest = std::max(largest, live);
  }
  return largest;
}

std::vector<Request> random_requests(std::mt19937_64& random, std::size_t count) {
  std::uniform_int_distribution<std::int64_t> bytes(1, 40000);
  std::uniform_int_distribution<std::size_t> op(0, 9), length(0, 4);
  std::uniform_int_distribution<int> percent(0, 99);
  std::vector<Request> requests;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t first = op(random);
    requests.push_back({bytes(random), percent(random) < 10, first, first + length(random)});
  }
  return requests;
}

TEST(BufferPlan, SmallGraphsAreHeldToTheBruteForceOptimum) {
  std::mt19937_64 random(2017);
  int optimal = 0, cases = 0;
  double worst_ratio = 1.0;
  for (std::size_t count = 1; count <= 7; ++count)
    for (int trial = 0; trial < 40; ++trial) {
      const std::vector<Request> requests = random_requests(random, count);
      BufferPlan plan = make_plan(requests);
      const std::int64_t peak = plan.plan();
      expect_valid(plan, requests);
      const std::int64_t optimum = brute_force_optimum(requests);
      EXPECT_GE(peak, optimum);
      EXPECT_GE(optimum, largest_live_set(requests));
      if (count <= 3) EXPECT_EQ(peak, optimum) << "up to three buffers the greedy plan is optimal";
      EXPECT_LE(peak, optimum * 5 / 4) << count << " buffers, trial " << trial;
      optimal += peak == optimum;
      ++cases;
      worst_ratio = std::max(worst_ratio, static_cast<double>(peak) / static_cast<double>(optimum));
    }
  std::cerr << optimal << " of " << cases << " plans optimal; worst peak / optimum " << worst_ratio << "\n";
  EXPECT_GE(optimal * 10, cases * 9) << "nine in ten small plans are optimal";
}

TEST(BufferPlan, KeepsTheBetterOfTheTwoGapRules) {
  std::mt19937_64 random(64);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<Request> requests = random_requests(random, 12);
    BufferPlan plan = make_plan(requests);
    const std::int64_t lowest = plan.plan_with(GapRule::lowest);
    const std::int64_t tightest = plan.plan_with(GapRule::tightest);
    const std::int64_t peak = plan.plan();
    EXPECT_EQ(peak, std::min(lowest, tightest));
    expect_valid(plan, requests);
    EXPECT_GE(peak, largest_live_set(requests));
  }
}

TEST(BufferPlan, DeadBuffersShareBytesAndPersistentOnesDoNot) {
  // a: ops 0-1, b: ops 1-2, c: ops 3-4 (can take a's and b's bytes), w: persistent.
  const std::vector<Request> requests = {
      {1000, false, 0, 1}, {1000, false, 1, 2}, {3000, false, 3, 4}, {500, true, 0, 0}};
  BufferPlan plan = make_plan(requests);
  EXPECT_EQ(plan.plan(), 3008 + 512);  // c over a and b, w beside it
  expect_valid(plan, requests);
  EXPECT_EQ(plan.unshared_bytes(), 1024 + 1024 + 3008 + 512);
  EXPECT_EQ(plan.plan(false), plan.unshared_bytes()) << "without reuse every buffer has its own bytes";
  const int grown = 0;
  plan.grow(grown, 5000);
  EXPECT_EQ(plan.size(grown), 5000);
  plan.grow(grown, 10);
  EXPECT_EQ(plan.size(grown), 5000) << "grow never shrinks";
}

TEST(BufferPlan, NegativeSizesAreRefused) {
  BufferPlan plan(kCacheLine);
  EXPECT_THROW(plan.request(-1, false, "broken"), std::exception);
}

TEST(BufferPlan, FormatsBytesWithUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(3.0 * (1 << 30), 1), "3.0 GiB");
}

}  // namespace
}  // namespace crossbench::kit
