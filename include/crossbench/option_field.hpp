// Where a row of the options schema puts its value (OptionSpec::field), and
// the one generic conversion between a row's canonical text and the typed
// field it names (DESIGN.md "Options"). A row names either a typed field (a
// pointer to a member of the options structs of include/crossbench/options.hpp),
// filled by one loop (src/app/options.cpp fill_fields), or the one place that
// reads a value that is not a single typed field.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

#include "crossbench/error.hpp"
#include "crossbench/options.hpp"

namespace crossbench {

// A row that names no place: a schema mistake (a test refuses it). First, so
// that a row written without its field column is this, not a silent binding.
struct Unbound {};
// A [matrix] list: JobOptions::matrix, by the matrix reader (src/app/options.cpp
// read_matrix), which knows the networks, engines, precisions and phases it names.
struct MatrixAxis {};
// Text in EngineConfig::settings only: each engine parses the keys it uses into
// its own settings type (src/engines/cudnn/cudnn_settings.hpp, worker_settings.hpp).
struct EngineSetting {};
// A value computed from its row and others (a path resolved, a unit converted,
// an environment fallback): in one place, src/app/options.cpp derive_compound_values.
struct DerivedValue {};
// --set: it assigns other rows' keys.
struct AssignsKeys {};

using OptionField =
    std::variant<Unbound, MatrixAxis, EngineSetting, DerivedValue, AssignsKeys,                      //
                 int MeasureOptions::*, double MeasureOptions::*,                                     //
                 std::uint64_t EngineConfig::*, double EngineConfig::*, Update EngineConfig::*,       //
                 int JobOptions::*, std::string JobOptions::*,                                        //
                 bool RunOptions::*, double RunOptions::*, std::filesystem::path RunOptions::*,       //
                 bool PlanOptions::*, int PlanOptions::*, std::string PlanOptions::*,                 //
                 bool CheckOptions::*,                                                                 //
                 std::filesystem::path MergeOptions::*, std::string MergeOptions::*, bool MergeOptions::*,  //
                 bool ListOptions::*,                                                                  //
                 std::filesystem::path ExportNetworkOptions::*, bool ExportNetworkOptions::*>;

// A real number as canonical text ("%.15g": 0.01, 600), as the schema writes numbers.
[[nodiscard]] std::string canonical_number(double value);

namespace option_field_detail {

template <typename Value>
[[nodiscard]] Value from_canonical(const std::string& text) {
  if constexpr (std::is_same_v<Value, bool>) return text == "true";
  else if constexpr (std::is_same_v<Value, Update>) return text == "sgd" ? Update::sgd : Update::none;
  else if constexpr (std::is_same_v<Value, double>) return std::stod(text);
  else if constexpr (std::is_same_v<Value, std::uint64_t>) return static_cast<std::uint64_t>(std::stoull(text));
  else if constexpr (std::is_integral_v<Value>) return static_cast<Value>(std::stoll(text));
  else return Value(text);  // std::string, std::filesystem::path: verbatim
}

template <typename Value>
[[nodiscard]] std::string to_canonical(const Value& value) {
  if constexpr (std::is_same_v<Value, bool>) return value ? "true" : "false";
  else if constexpr (std::is_same_v<Value, Update>) return value == Update::sgd ? "sgd" : "none";
  else if constexpr (std::is_same_v<Value, double>) return canonical_number(value);
  else if constexpr (std::is_integral_v<Value>) return std::to_string(value);
  else if constexpr (std::is_same_v<Value, std::filesystem::path>) return value.string();
  else return value;
}

// The object within a command's options (const or not) that holds members of
// Owner: its MeasureOptions, its EngineConfig, or itself; nullptr when Owner is
// another command's options (or a job's, in those of the commands that read no job).
template <typename Owner, typename Command>
[[nodiscard]] auto* owner_in(Command& options) {
  using Target = std::conditional_t<std::is_const_v<Command>, const Owner, Owner>;
  constexpr bool reads_a_job = std::is_base_of_v<JobOptions, std::remove_const_t<Command>>;
  if constexpr (std::is_same_v<Owner, MeasureOptions> && reads_a_job) return static_cast<Target*>(&options.measure);
  else if constexpr (std::is_same_v<Owner, EngineConfig> && reads_a_job) return static_cast<Target*>(&options.engine);
  else if constexpr (std::is_base_of_v<Owner, std::remove_const_t<Command>>) return static_cast<Target*>(&options);
  else return static_cast<Target*>(nullptr);
}

// Whether an alternative of OptionField is a typed field, and its owner and value types.
template <typename Alternative>
struct member_traits {
  static constexpr bool is_field = false;
};
template <typename Owner, typename Value>
struct member_traits<Value Owner::*> {
  static constexpr bool is_field = true;
  using owner_type = Owner;
  using value_type = Value;
};

}  // namespace option_field_detail

// Whether a row names a typed field (rather than the place that reads it).
[[nodiscard]] inline bool is_typed_field(const OptionField& field) {
  return std::visit([](const auto& alternative) { return option_field_detail::member_traits<std::decay_t<decltype(alternative)>>::is_field; },
                    field);
}

// Stores a row's canonical text (validated_setting's) in the typed field the
// row names, within a command's options (RunOptions, PlanOptions,
// CheckOptions, MergeOptions, ListOptions, ExportNetworkOptions); false when the row names no typed field. Throws Error when the
// field is another command's: the schema's `commands` and its field disagree.
template <typename Command>
bool store_field(const OptionField& field, const std::string& canonical, Command& options) {
  return std::visit(
      [&](const auto& alternative) {
        using Traits = option_field_detail::member_traits<std::decay_t<decltype(alternative)>>;
        if constexpr (!Traits::is_field) {
          return false;
        } else {
          auto* owner = option_field_detail::owner_in<typename Traits::owner_type>(options);
          if (owner == nullptr) throw Error("options schema: a row of this command fills another command's options");
          owner->*alternative = option_field_detail::from_canonical<typename Traits::value_type>(canonical);
          return true;
        }
      },
      field);
}

// The canonical text of the typed field a row names, read from a command's
// options; nullopt when the row names no typed field or another command's.
template <typename Command>
[[nodiscard]] std::optional<std::string> field_text(const OptionField& field, const Command& options) {
  return std::visit(
      [&](const auto& alternative) -> std::optional<std::string> {
        using Traits = option_field_detail::member_traits<std::decay_t<decltype(alternative)>>;
        if constexpr (!Traits::is_field) {
          return std::nullopt;
        } else {
          const auto* owner = option_field_detail::owner_in<typename Traits::owner_type>(options);
          if (owner == nullptr) return std::nullopt;
          return option_field_detail::to_canonical(owner->*alternative);
        }
      },
      field);
}

}  // namespace crossbench
