// The stop request's levels: a first request stops after the running cell,
// a second one or the grace time ends the cell; the first signal is kept.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "crossbench/stop_flag.hpp"

namespace crossbench {
namespace {

struct StopFlagTest : ::testing::Test {
  void SetUp() override {
    stop_flag::reset();
    stop_flag::set_grace_seconds(120);
  }
  void TearDown() override { stop_flag::reset(); }
};

TEST_F(StopFlagTest, NoRequest) {
  EXPECT_EQ(stop_flag::level(), 0);
  EXPECT_EQ(stop_flag::signal_number(), 0);
  EXPECT_FALSE(stop_flag::cell_must_end());
}

TEST_F(StopFlagTest, FirstRequestStopsAfterTheCellSecondEndsIt) {
  stop_flag::raise(SIGUSR1, 1);
  EXPECT_EQ(stop_flag::level(), 1);
  EXPECT_FALSE(stop_flag::cell_must_end());
  stop_flag::raise(SIGTERM, 2);
  EXPECT_EQ(stop_flag::level(), 2);
  EXPECT_TRUE(stop_flag::cell_must_end());
  EXPECT_EQ(stop_flag::signal_number(), SIGUSR1);  // the first signal received is the one recorded
  EXPECT_NE(stop_flag::reason().find("a second stop request"), std::string::npos);
  stop_flag::raise(SIGINT, 1);  // never lowers
  EXPECT_EQ(stop_flag::raised_level(), 2);
}

TEST_F(StopFlagTest, TheGraceTimeEndsTheCell) {
  stop_flag::set_grace_seconds(0.05);
  stop_flag::raise(SIGTERM, 1);
  EXPECT_FALSE(stop_flag::cell_must_end());
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_TRUE(stop_flag::cell_must_end());
  EXPECT_EQ(stop_flag::raised_level(), 1);  // raised once; the deadline made it 2
  EXPECT_NE(stop_flag::reason().find("grace time"), std::string::npos);
}

TEST_F(StopFlagTest, ThePollerRunsOnEveryLook) {
  int polls = 0;
  {
    const stop_flag::PollerGuard guard([&] {
      if (++polls == 2) stop_flag::raise(SIGUSR1, 2);  // another rank's stop arriving
    });
    EXPECT_FALSE(stop_flag::cell_must_end());
    EXPECT_TRUE(stop_flag::cell_must_end());
  }
  EXPECT_EQ(polls, 2);
  EXPECT_TRUE(stop_flag::cell_must_end());
  EXPECT_EQ(polls, 2);  // the guard removed it
}

}  // namespace
}  // namespace crossbench
