// A worker's reply is checked field by field before the engine reads it.
#include <gtest/gtest.h>

#include "engines/worker/reply_validation.hpp"

namespace crossbench {
namespace {

using nlohmann::json;

TEST(ReplyValidation, AWellFormedReplyPasses) {
  const json reply{{"protocol", 1}, {"type", "measured"}, {"status", "ok"}, {"samples_ms", {1.0, 2.5}},
                   {"peak_memory_bytes", nullptr}, {"decisions", "x"}};
  EXPECT_EQ(reply_problem(reply), "");
  EXPECT_EQ(samples_problem(reply, 2), "");
}

TEST(ReplyValidation, AMalformedFieldIsNamed) {
  EXPECT_EQ(reply_problem(json{{"status", 5}}), "field 'status' is a number, not a string");
  EXPECT_EQ(reply_problem(json{{"finite", "yes"}}), "field 'finite' is a string, not true or false");
  EXPECT_EQ(reply_problem(json{{"gradient_norms", {1.0, "x"}}}), "gradient_norms[1] is a string, not a number");
  EXPECT_EQ(reply_problem(json::array()), "the reply is a list, not a JSON object");
  EXPECT_EQ(reply_problem(json{{"decisions", std::string(kMaxWorkerTextBytes + 1, 'd')}}),
            "field 'decisions' is a string of 1048577 bytes; at most 1048576 are accepted");
}

TEST(ReplyValidation, SamplesBeyondMaxStepsAreRefused) {
  const json reply{{"samples_ms", json(std::vector<double>(6, 1.0))}};
  EXPECT_EQ(samples_problem(reply, 6), "");
  EXPECT_EQ(samples_problem(reply, 5), "field 'samples_ms' holds 6 step times; 5 were asked for");
  EXPECT_EQ(samples_problem(json{{"samples_ms", {1.0, -2.0}}}, 5), "samples_ms[1] = -2.0 is not a finite step time >= 0 ms");
  EXPECT_EQ(samples_problem(json{{"samples_ms", {1.0, nullptr}}}, 5), "samples_ms[1] is null, not a number");
  EXPECT_EQ(samples_problem(json::object(), 5), "field 'samples_ms' is missing");
}

TEST(ReplyValidation, StepsPerSampleIsAnOptionalCountOfSteps) {
  EXPECT_EQ(steps_per_sample_problem(json{{"samples_ms", {1.0}}}), "");  // absent: one step per sample
  EXPECT_EQ(steps_per_sample_problem(json{{"steps_per_sample", 36}}), "");
  EXPECT_EQ(steps_per_sample_problem(json{{"steps_per_sample", 0}}),
            "field 'steps_per_sample' = 0 is not a step count from 1 to 1000000");
  EXPECT_EQ(steps_per_sample_problem(json{{"steps_per_sample", 2.5}}),
            "field 'steps_per_sample' is a number, not an integer");
  EXPECT_EQ(steps_per_sample_problem(json{{"steps_per_sample", "4"}}),
            "field 'steps_per_sample' is a string, not an integer");
}

TEST(ReplyValidation, ALongMessageIsCut) {
  const std::string long_text(kWorkerMessageBytes + 10, 'm');
  const std::string message = bounded_message(json{{"message", long_text}});
  EXPECT_EQ(message, std::string(kWorkerMessageBytes, 'm') + " [... 10 more bytes]");
  EXPECT_EQ(bounded_message(json{{"message", "short"}}), "short");
  EXPECT_EQ(bounded_message(json{{"message", 3}}), "");
}

}  // namespace
}  // namespace crossbench
