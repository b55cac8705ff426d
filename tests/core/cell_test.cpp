// The precision vocabulary: every precision names its recipe once (core), and
// the native engines' refusal of the frameworks' amp-* recipes says why.
#include <gtest/gtest.h>

#include <string>

#include "crossbench/cell.hpp"

namespace crossbench {
namespace {

TEST(Recipes, EveryPrecisionNamesItsRecipe) {
  for (const std::string& name : precision_names()) {
    const Precision precision = *precision_from_string(name);
    const std::string recipe(recipe_of(precision));
    EXPECT_EQ(recipe.rfind("recipe=", 0), 0u) << recipe;
    EXPECT_NE(recipe.find(" ("), std::string::npos) << recipe;  // the name, then what it means
  }
  EXPECT_EQ(recipe_of(Precision::fp32).substr(0, 19), "recipe=fp32-strict ");
  EXPECT_NE(recipe_of(Precision::tf32).find("TF32 tensor-core math"), std::string::npos);
  EXPECT_EQ(recipe_of(Precision::bf16),
            "recipe=pure-bf16 (bf16 weights, activations, gradients; fp32 accumulation, loss and batch-norm statistics)");
  EXPECT_NE(recipe_of(Precision::amp_bf16).find("fp32 master weights"), std::string::npos);
  EXPECT_NE(recipe_of(Precision::amp_fp16), recipe_of(Precision::amp_bf16));
}

TEST(Recipes, MixedPrecisionRefusalNamesTheEngineAndWhatItRunsInstead) {
  const std::string why = mixed_precision_refusal(Precision::amp_bf16, "cudnn", "bf16");
  EXPECT_EQ(why.rfind("amp-bf16 is the frameworks' mixed-precision recipe", 0), 0u) << why;
  EXPECT_NE(why.find("cudnn engine keeps no fp32 master copy"), std::string::npos) << why;
  EXPECT_NE(why.find("precision bf16"), std::string::npos) << why;
}

}  // namespace
}  // namespace crossbench
