// The buffer planner both native engines place their memory with (DESIGN.md:
// peak memory is exact). Every tensor, weight, gradient, workspace and
// scratchpad of a session is a buffer of one plan. Buffers are requested while
// the graph is built (sizes only), each op records the buffers it touches, and
// plan() places buffers whose lifetimes (first to last op index) overlap at
// disjoint offsets, so a dead activation's bytes are reused as a framework's
// allocator would. The engine then allocates planned_bytes() in one piece:
// that number is the session's peak.
//
// Placement (one algorithm): buffers largest first, each at an aligned offset
// in a gap between the already placed buffers that are alive at the same time.
// The plan is made twice, once taking the lowest gap that fits and once the
// tightest, and the one with the smaller peak is kept (ties: the lowest gap).
// Neither gap rule is better on every graph; keeping the smaller makes the
// peak no larger than either (tests/engines/buffer_plan_test.cpp holds it to
// the brute-force optimum on small graphs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace crossbench::kit {

// Where buffers may start: every buffer on `base` bytes; a buffer of at least
// `large_from` bytes on `large` bytes (e.g. a page).
struct Alignment {
  std::int64_t base = 256;        // [bytes]
  std::int64_t large = 256;       // [bytes]
  std::int64_t large_from = std::numeric_limits<std::int64_t>::max();  // [bytes]
  std::int64_t of(std::int64_t bytes) const { return bytes >= large_from ? large : base; }
};

// Which gap a buffer goes into; plan() tries both.
enum class GapRule { lowest, tightest };

class BufferPlan {
 public:
  explicit BufferPlan(Alignment alignment) : alignment_(alignment) {}

  // A new buffer of `bytes`; a persistent one lives for the whole session
  // (weights, gradients, statistics, the input batch); others live from the
  // first to the last op that uses them. `label` names it in messages.
  int request(std::int64_t bytes, bool persistent, std::string label);
  void grow(int buffer, std::int64_t bytes);     // size = max(size, bytes); before plan()
  void use(int buffer, std::size_t op_index);     // op `op_index` reads or writes the buffer
  void make_persistent(int buffer) { at(buffer).persistent = true; }
  std::int64_t size(int buffer) const { return at(buffer).bytes; }
  std::size_t buffer_count() const { return buffers_.size(); }

  // Places every buffer; with `reuse` false every buffer lives throughout.
  // Returns the planned size [bytes]. May be called again after buffers grew
  // (workspaces are known only after algorithm selection).
  std::int64_t plan(bool reuse = true);
  // One placement with one gap rule; plan() keeps the better of the two.
  std::int64_t plan_with(GapRule rule, bool reuse = true);

  std::int64_t planned_bytes() const { return planned_; }
  std::int64_t offset(int buffer) const { return at(buffer).offset; }
  // The sum of all buffer sizes on the base alignment: what no reuse would take [bytes].
  std::int64_t unshared_bytes() const;

 private:
  struct Buffer {
    std::int64_t bytes = 0;
    bool persistent = false;
    std::string label;
    std::size_t first = std::numeric_limits<std::size_t>::max();
    std::size_t last = 0;
    std::int64_t offset = 0;
  };
  Buffer& at(int buffer) { return buffers_.at(static_cast<std::size_t>(buffer)); }
  const Buffer& at(int buffer) const { return buffers_.at(static_cast<std::size_t>(buffer)); }

  Alignment alignment_;
  std::vector<Buffer> buffers_;
  std::int64_t planned_ = 0;
};

// "1.23 GiB" with `decimals` digits after the point (bytes as a whole number).
std::string format_bytes(double bytes, int decimals = 2);

}  // namespace crossbench::kit
