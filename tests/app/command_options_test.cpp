// The command lines of `crossbench describe` and `export-network`, parsed by
// the options schema (src/app/options.cpp) into DescribeOptions and
// ExportNetworkOptions, and their --help generated from it (command_help.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "crossbench/error.hpp"
#include "crossbench/options.hpp"

namespace crossbench {
namespace {

template <typename Command>
std::optional<Command> parsed(const std::vector<std::string>& arguments) {
  return command_options_or_help<Command>(CommandContext{arguments, "crossbench test", "quick.ini"});
}

// The UsageError (exit 2) a command line gets; "(accepted)" when none.
template <typename Command>
std::string refusal(const std::vector<std::string>& arguments) {
  try {
    static_cast<void>(parsed<Command>(arguments));
  } catch (const UsageError& error) {
    return error.what();
  }
  return "(accepted)";
}

TEST(CommandOptions, DescribeTakesOneNetwork) {
  const std::optional<DescribeOptions> options = parsed<DescribeOptions>({"resnet50"});
  ASSERT_TRUE(options.has_value());
  EXPECT_EQ(options->network, "resnet50");
}

TEST(CommandOptions, DescribeRefusesWhatIsNotOneNetwork) {
  EXPECT_EQ(refusal<DescribeOptions>({}), "usage: crossbench describe NETWORK");
  EXPECT_EQ(refusal<DescribeOptions>({"alexnet", "vgg16"}), "usage: crossbench describe NETWORK; unexpected 'vgg16'");
  EXPECT_EQ(refusal<DescribeOptions>({"alexnet", "--json"}), "crossbench describe: unknown flag '--json'; valid: --help");
  EXPECT_EQ(refusal<DescribeOptions>({"--network-name", "alexnet"}),
            "crossbench describe: unknown flag '--network-name' (crossbench describe --help lists the flags)");
}

TEST(CommandOptions, ExportNetworkTakesItsFlagsByTheSchema) {
  const std::optional<ExportNetworkOptions> bare = parsed<ExportNetworkOptions>({"alexnet"});
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->network, "alexnet");
  EXPECT_TRUE(bare->output.empty());  // stdout
  EXPECT_FALSE(bare->force);
  for (const std::vector<std::string>& arguments : std::vector<std::vector<std::string>>{
           {"googlenet", "--output", "g.json", "--force"},
           {"--force", "-o", "g.json", "googlenet"},
           {"googlenet", "--output=g.json", "--force"}}) {
    const std::optional<ExportNetworkOptions> options = parsed<ExportNetworkOptions>(arguments);
    ASSERT_TRUE(options.has_value()) << arguments.front();
    EXPECT_EQ(options->network, "googlenet");
    EXPECT_EQ(options->output, std::filesystem::path("g.json"));
    EXPECT_TRUE(options->force);
  }
  const std::optional<ExportNetworkOptions> no_force = parsed<ExportNetworkOptions>({"vgg16", "-o", "v.json"});
  ASSERT_TRUE(no_force.has_value());
  EXPECT_EQ(no_force->output, std::filesystem::path("v.json"));
  EXPECT_FALSE(no_force->force);
}

TEST(CommandOptions, ExportNetworkRefusesBadCommandLines) {
  const std::string usage = "usage: crossbench export-network NETWORK [--output FILE [--force]]";
  EXPECT_EQ(refusal<ExportNetworkOptions>({}), usage);
  EXPECT_EQ(refusal<ExportNetworkOptions>({"--force"}), usage);
  EXPECT_EQ(refusal<ExportNetworkOptions>({"alexnet", "vgg16"}), usage + "; unexpected 'vgg16'");
  EXPECT_EQ(refusal<ExportNetworkOptions>({"alexnet", "--output", ""}), "export-network: --output is empty; " + usage);
  EXPECT_EQ(refusal<ExportNetworkOptions>({"alexnet", "--colour"}),
            "crossbench export-network: unknown flag '--colour'; valid: --output, --force, --help");
  EXPECT_EQ(refusal<ExportNetworkOptions>({"alexnet", "--out", "g.json"}),  // no abbreviations
            "crossbench export-network: unknown flag '--out'; valid: --output, --force, --help");
  EXPECT_NE(refusal<ExportNetworkOptions>({"alexnet", "--output"}).find("--output needs a value"), std::string::npos);
  EXPECT_EQ(refusal<ExportNetworkOptions>({"alexnet", "--force=yes"}), "--force takes no value");
  EXPECT_EQ(refusal<ExportNetworkOptions>({"alexnet", "-o", "a.json", "--output", "b.json"}),
            "--output is given twice; give it once");
}

TEST(CommandOptions, HelpIsAskedForAndGeneratedFromTheSchema) {
  EXPECT_FALSE(parsed<DescribeOptions>({"--help"}).has_value());
  EXPECT_FALSE(parsed<DescribeOptions>({"alexnet", "-h"}).has_value());
  EXPECT_FALSE(parsed<ExportNetworkOptions>({"alexnet", "--output", "g.json", "--help"}).has_value());
  EXPECT_FALSE(parsed<ExportNetworkOptions>({"-h"}).has_value());
  const std::string describe = command_help("describe");
  EXPECT_EQ(describe.rfind("usage: crossbench describe NETWORK\n", 0), 0u) << describe;
  EXPECT_NE(describe.find("  --help\n      this text\n"), std::string::npos) << describe;
  EXPECT_NE(describe.find("Exit codes: 0 done; 2 bad input (an unknown network)"), std::string::npos) << describe;
  EXPECT_NE(describe.find("  crossbench describe resnet50\n"), std::string::npos) << describe;
  const std::string export_network = command_help("export-network");
  EXPECT_EQ(export_network.rfind("usage: crossbench export-network NETWORK [--output FILE [--force]]\n", 0), 0u);
  EXPECT_NE(export_network.find("  -o, --output FILE\n      write the JSON to FILE instead of stdout (an existing FILE "
                                "only with --force) [(stdout)]\n"),
            std::string::npos)
      << export_network;
  EXPECT_NE(export_network.find("  --force\n      replace FILE if it exists [off]\n"), std::string::npos) << export_network;
  EXPECT_NE(export_network.find("Exit codes: 0 done; 1 a failure (I/O); 2 bad input"), std::string::npos);
  EXPECT_NE(export_network.find("  crossbench export-network googlenet --output googlenet.json\n"), std::string::npos);
  EXPECT_EQ(export_network.find("--prefer"), std::string::npos);  // merge's flags are merge's alone
}

}  // namespace
}  // namespace crossbench
