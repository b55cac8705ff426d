// The synthetic-data generator: deterministic, order-independent, in range, He-scaled,
// and bit-exact against reference values that a Python port checks too.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "crossbench/error.hpp"
#include "crossbench/synthetic.hpp"

namespace crossbench::synthetic {
namespace {

struct HashReference {
  std::uint64_t seed, tensor_id, index, hash;
};

// Computed once from the formula in synthetic.hpp (C++ and a pure-Python port agree);
// the same triples are listed there. (0, 0, 0) is splitmix64's first output from state 0.
constexpr HashReference kHashReferences[] = {
    {0, 0, 0, 0xE220A8397B1DCDAFULL},
    {42, 1, 0, 0x57E1FABA65107204ULL},
    {42, 1, 1, 0xF4ABD143FEB24055ULL},
    {42, 2, 7, 0x3E3E0F26E4519090ULL},
    {42, 32, 12345, 0x12942C75268F5C0EULL},
    {7, 21474836548ULL, 999999, 0x26AE80A0805402C2ULL},  // tensor_id(3, dropout_mask) + (5 << 32)
    {0xFFFFFFFFFFFFFFFFULL, 123456789, 1ULL << 40, 0xFFC0BD699750FDE5ULL},
};

TEST(Synthetic, HashMatchesTheReferenceValues) {
  for (const HashReference& r : kHashReferences) {
    EXPECT_EQ(hash(r.seed, r.tensor_id, r.index), r.hash) << r.seed << " " << r.tensor_id << " " << r.index;
    EXPECT_EQ(uniform01(r.seed, r.tensor_id, r.index), static_cast<float>(r.hash >> 40) / 16777216.0f);
  }
}

TEST(Synthetic, TensorIds) {
  EXPECT_EQ(tensor_id(0, Slot::weight), 16u);
  EXPECT_EQ(tensor_id(1, Slot::weight), 32u);
  EXPECT_EQ(tensor_id(3, Slot::dropout_mask), 68u);
  EXPECT_THROW(tensor_id(-1, Slot::weight), Error);
}

TEST(Synthetic, AlexNetConv1WeightsAreBitExact) {
  const Network alexnet = make_network("alexnet");
  const std::vector<float> weights = parameter(alexnet, 1, Slot::weight, 42);
  ASSERT_EQ(weights.size(), 64u * 3 * 11 * 11);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(weights[0]), 0x3ADEAE2Du);      // 0.00169891643
  EXPECT_EQ(std::bit_cast<std::uint32_t>(weights[1]), 0x3D77DE0Au);      // 0.0605144873
  EXPECT_EQ(std::bit_cast<std::uint32_t>(weights[2]), 0x3D11A220u);      // 0.0355550051
  EXPECT_EQ(std::bit_cast<std::uint32_t>(weights[23231]), 0xBDC24908u);  // -0.0948658586

  const std::vector<float> images = input(alexnet, 2, 42);
  EXPECT_FLOAT_EQ(images[0], -0.313416243f);
  EXPECT_FLOAT_EQ(images[1], 0.911493421f);
  EXPECT_EQ(labels(alexnet, 4, 42), (std::vector<std::int32_t>{931, 375, 603, 663}));
}

TEST(Synthetic, Deterministic) {
  const Network resnet = make_network("resnet50");
  EXPECT_EQ(parameter(resnet, 1, Slot::weight, 7), parameter(resnet, 1, Slot::weight, 7));
  EXPECT_NE(parameter(resnet, 1, Slot::weight, 7), parameter(resnet, 1, Slot::weight, 8));
  EXPECT_EQ(input(resnet, 2, 7), input(resnet, 2, 7));
  EXPECT_EQ(labels(resnet, 64, 7), labels(resnet, 64, 7));
}

TEST(Synthetic, OrderIndependentAndPrefixStable) {
  std::vector<float> all(1000);
  fill_uniform(all, 3, 99, 0.5f);
  for (std::uint64_t i : {999u, 0u, 500u, 17u})  // any element, in any order, from the scalar function
    EXPECT_EQ(all[i], 0.5f * (2.0f * uniform01(3, 99, i) - 1.0f));
  std::vector<float> prefix(10);
  fill_uniform(prefix, 3, 99, 0.5f);
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), all.begin()));

  const Network alexnet = make_network("alexnet");
  const std::vector<float> small = input(alexnet, 1, 5);
  const std::vector<float> large = input(alexnet, 3, 5);  // image 0 is the same at any batch
  EXPECT_TRUE(std::equal(small.begin(), small.end(), large.begin()));
}

TEST(Synthetic, RangeAndMoments) {
  constexpr std::size_t kCount = 1 << 16;
  double sum = 0, sum_of_squares = 0;
  for (std::uint64_t i = 0; i < kCount; ++i) {
    const float u = uniform01(11, 5, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    sum_of_squares += static_cast<double>(u) * u;
  }
  const double mean = sum / kCount;
  EXPECT_NEAR(mean, 0.5, 0.01);
  EXPECT_NEAR(sum_of_squares / kCount - mean * mean, 1.0 / 12, 0.005);

  const Network vgg = make_network("vgg11");
  for (float x : input(vgg, 1, 11)) {
    ASSERT_GE(x, -1.0f);
    ASSERT_LT(x, 1.0f);
  }
  for (std::int32_t label : labels(vgg, 256, 11)) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 1000);
  }
}

TEST(Synthetic, HeScaleForConvolutionAndFullyConnectedWeights) {
  const Network alexnet = make_network("alexnet");
  for (const auto& [layer_index, fan_in] : {std::pair{1, 3 * 11 * 11}, std::pair{4, 64 * 5 * 5}}) {
    const std::vector<float> weights = parameter(alexnet, layer_index, Slot::weight, 1);
    const float scale = static_cast<float>(std::sqrt(6.0 / fan_in));
    float largest = 0;
    for (float w : weights) largest = std::max(largest, std::abs(w));
    EXPECT_LE(largest, scale);
    EXPECT_GT(largest, 0.99f * scale);  // thousands of draws reach close to the bound
  }
  int fc6 = -1;
  for (std::size_t i = 0; i < alexnet.layers().size(); ++i)
    if (alexnet.layers()[i].name == "fc6") fc6 = static_cast<int>(i);
  ASSERT_GE(fc6, 0);
  EXPECT_EQ(parameter_elements(alexnet, fc6, Slot::weight), 4096 * 9216);
  const std::vector<float> fc_weights = parameter(alexnet, fc6, Slot::weight, 1);
  double sum_of_squares = 0;
  for (float w : fc_weights) sum_of_squares += static_cast<double>(w) * w;
  // Uniform in [-a, a) has variance a^2 / 3 = 2 / fan_in (He).
  EXPECT_NEAR(sum_of_squares / static_cast<double>(fc_weights.size()), 2.0 / 9216, 0.01 * 2.0 / 9216);
}

TEST(Synthetic, BiasesAndBatchNorm) {
  const Network resnet = make_network("resnet50");
  // Layer 1 is conv1 (no bias), layer 2 bn1 (64 channels).
  EXPECT_EQ(parameter_elements(resnet, 1, Slot::bias), 0);
  EXPECT_TRUE(parameter(resnet, 1, Slot::bias, 1).empty());
  EXPECT_EQ(parameter(resnet, 2, Slot::bn_gamma, 1), std::vector<float>(64, 1.0f));
  EXPECT_EQ(parameter(resnet, 2, Slot::bn_beta, 1), std::vector<float>(64, 0.0f));
  EXPECT_EQ(parameter_elements(resnet, 2, Slot::weight), 0);
  const Network alexnet = make_network("alexnet");
  EXPECT_EQ(parameter(alexnet, 1, Slot::bias, 1), std::vector<float>(64, 0.0f));
  EXPECT_THROW(parameter(alexnet, 1000, Slot::weight, 1), Error);
}

TEST(Synthetic, DropoutKeepsAboutOneMinusRateAndChangesWithTheStep) {
  constexpr std::uint64_t kCount = 20000;
  int kept = 0, same_as_next_step = 0;
  for (std::uint64_t i = 0; i < kCount; ++i) {
    const bool keep = dropout_keep(42, 15, 0, i, 0.4);
    kept += keep;
    same_as_next_step += keep == dropout_keep(42, 15, 1, i, 0.4);
    ASSERT_EQ(keep, static_cast<double>(uniform01(42, tensor_id(15, Slot::dropout_mask), i)) >= 0.4);
  }
  EXPECT_NEAR(static_cast<double>(kept) / kCount, 0.6, 0.02);
  EXPECT_LT(same_as_next_step, static_cast<int>(0.6 * kCount));  // independent masks agree ~52%
  EXPECT_TRUE(dropout_keep(1, 3, 0, 0, 0.0));
}

}  // namespace
}  // namespace crossbench::synthetic
