// The one table of options (include/crossbench/options_schema.hpp).
#include "crossbench/options_schema.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "crossbench/error.hpp"

namespace crossbench {
namespace {

constexpr double kLargestBatch = 1 << 20;  // a batch beyond this is a typo, not a benchmark

std::vector<OptionSpec> make_schema() {
  using T = OptionType;
  const std::string all = "run plan check", measured = "run plan";
  const bool to_workers = true;  // the last column: sent_to_workers
  // key, flag, type, default, low, high, choices, help, changes_numbers, recorded_as, commands, field[, sent_to_workers[, short_flag[, engines]]]
  return {
      // [matrix]: the axes of the cube (recorded as the cube's dimension scales).
      {"matrix.networks", "", T::names, "(required)", 0, 0, {}, "networks to run, comma-separated (crossbench list networks)", false, "", all, MatrixAxis{}},
      {"matrix.engines", "", T::names, "(required)", 0, 0, {}, "engines, comma-separated; auto = each device's native engine; a [workers] name = that worker", false, "", all, MatrixAxis{}},
      {"matrix.precisions", "", T::names, "(required)", 0, 0, {}, "fp32, tf32, fp16, bf16, amp-fp16, amp-bf16 (comma-separated; DESIGN.md: one meaning per precision)", false, "", all, MatrixAxis{}},
      {"matrix.batches", "", T::integers, "(required)", 1, kLargestBatch, {}, "batch sizes (images per step per device), comma-separated", false, "", all, MatrixAxis{}},
      {"matrix.phases", "", T::names, "(required)", 0, 0, {}, "inference, training (comma-separated)", false, "", all, MatrixAxis{}},
      {"matrix.gpus", "--gpus", T::integers, "1", 1, 4096, {}, "devices of one key training together, data parallel, comma-separated (batch is per device)", false, "", all, MatrixAxis{}},
      // [measure]
      {"measure.warmup", "", T::integer, "10", 0, 1000000, {}, "untimed warm-up steps", true, "measure_warmup_steps", measured, &MeasureOptions::warmup_steps},
      {"measure.warmup_ms", "", T::integer, "0", 0, 600000, {}, "untimed warm-up of at least this long, after the warm-up steps: more steps until it has lasted that long, so that the device's clocks settle for the cell's own work before the first timed step (0: the steps only) [ms]", true, "measure_warmup_ms", measured, &MeasureOptions::warmup_ms},
      {"measure.cooldown_ms", "", T::integer, "0", 0, 600000, {}, "before each cell's warm-up, the device left idle this long, so that every cell's steps start from a device that rested alike whatever ran before it (a stop request still ends the wait at once) [ms]", true, "measure_cooldown_ms", measured, &MeasureOptions::cooldown_ms},
      {"measure.min_steps", "", T::integer, "100", 1, 10000000, {}, "timed steps before the stopping rule applies", true, "measure_min_steps", measured, &MeasureOptions::min_steps},
      {"measure.max_steps", "", T::integer, "10000", 1, 10000000, {}, "timed steps at most", true, "measure_max_steps", measured, &MeasureOptions::max_steps},
      {"measure.target_ci", "", T::number, "0.01", 0, 1, {}, "stop when the 95% CI half-width of the median is below this fraction of it", true, "measure_target_ci", measured, &MeasureOptions::target_ci},
      {"measure.cell_time_limit_s", "", T::number, "600", 0, 1e7, {}, "wall-clock limit per cell, preparation included [s]", true, "measure_cell_time_limit_s", all, &MeasureOptions::cell_time_limit_s},
      {"measure.seed", "", T::integer, "42", 0, 9.2e18, {}, "seed of the synthetic weights, inputs and labels", true, "seed", all, &EngineConfig::seed, to_workers},
      {"measure.update", "--update", T::choice, "none", 0, 0, {"none", "sgd"}, "training weight update", true, "update", all, &EngineConfig::update, to_workers},
      {"measure.learning_rate", "", T::number, "0.01", 0, 1e3, {}, "learning rate of update = sgd", true, "learning_rate", all, &EngineConfig::learning_rate, to_workers},
      {"measure.repetitions", "--repetitions", T::integer, "1", 1, 1000, {}, "measure each single-device cell this many times on the same device, each in a fresh session (and worker process); the headline is the repetition of the median median, every repetition's median is kept", true, "measure_repetitions", measured, &MeasureOptions::repetitions},
      {"measure.oom_boundary", "", T::choice, "run", 0, 0, {"run", "stop"}, "a batch sweep's cells past memory: run = every cell runs (an oom is one cell's, as a transient allocation failure may be); stop = each rank runs a series (engine, network, precision, phase, gpus) smallest batch first, and once a batch runs out of memory the series' larger batches on that device key are recorded oom at once, each message naming the batch that ran out (rank 0 learns from a resumed journal too)", false, "measure_oom_boundary", measured, DerivedValue{}},
      {"measure.layer_times", "--layer-times", T::choice, "false", 0, 0, {"false", "true", "all"}, "after an ok cell's timed steps, a separate pass times each layer's forward and backward; never changes the headline; after the table each cell's 10 slowest layers are printed (all: every layer)", false, "measure_layer_times", measured, DerivedValue{}},
      {"measure.telemetry_interval_ms", "", T::integer, "10", 0, 60000, {}, "between two NVML samples of the device's clocks, power and temperature during a cell's timed steps [ms]; 0: one sample as they begin and one as they end, no sampling thread beside the steps (the energy counter is read at both ends either way)", false, "measure_telemetry_interval_ms", measured, &MeasureOptions::telemetry_interval_ms},
      {"measure.layer_time_repetitions", "", T::integer, "10", 1, 10000, {}, "profiled steps of layer_times; each layer's time is their median", false, "measure_layer_time_repetitions", measured, &MeasureOptions::layer_time_repetitions},
      // [engine]
      {"engine.algo", "--algo", T::choice, "heuristic", 0, 0, {"heuristic", "exhaustive"}, "GPU convolution algorithms: the library's first choice, or a measured search (untimed)", true, "engine_algorithm_policy", all, EngineSetting{}},
      {"engine.algo_cache", "--algo-cache", T::text, "", 0, 0, {}, "algo = exhaustive: a JSON file of measured algorithm choices, keyed by device, library versions and layer signature; a warm cache replays them with no search, misses are searched and appended (empty: choices kept in memory for the run)", false, "engine_algo_cache", all, DerivedValue{}},
      {"engine.graph_api", "--graph-api", T::boolean, "true", 0, 0, {}, "algo = exhaustive: also time the cuDNN Graph API's engine configurations of every convolution (and a conv+bias+relu group as one graph) and keep the faster; false: the legacy API's algorithms only", true, "engine_graph_api", all, EngineSetting{}},
      {"engine.search_l2", "", T::choice, "warm", 0, 0, {"warm", "cold"}, "algo = exhaustive: the L2 state every timed run of the measured search starts in; warm = back to back, the candidate's operands left in the L2 by its previous run; cold = after a write of twice the device's L2 outside the timed events, as a step finds operands written long before (a separate timing context of the algorithm cache; warm stays the default until measured on the H200)", true, "engine_search_l2", all, EngineSetting{}},
      {"engine.search_warmup_ms", "", T::integer, "0", 0, 1000, {}, "algo = exhaustive: before each candidate's timed runs, run it untimed, back to back, for at least this much GPU time [ms], so that every candidate is timed at the clocks of a busy GPU, not after the host's pause between two searches (a separate timing context of the algorithm cache where above 0); 0 = one untimed run, as before", true, "engine_search_warmup_ms", all, EngineSetting{}, false, "", {"cudnn"}},
      {"engine.search_in_step", "", T::boolean, "false", 0, 0, {}, "algo = exhaustive with cuda_graphs: the Graph API configurations the search timed within 2% of its choice (agreeing with the reference) are timed again inside the graphed step, each a few step replays, and the step's fastest kept where faster by more than 0.5% (a choice per distinct graph problem and direction, the most expensive first, at most 8 a cell; recorded in the algorithm cache and replayed); false: the search's own choice", true, "engine_search_in_step", all, EngineSetting{}, false, "", {"cudnn"}},
      {"engine.search_tie", "", T::number, "0.001", 0, 0.5, {}, "algo = exhaustive: candidates whose search medians lie within this fraction of the fastest are a tie, broken by a fixed order (the heuristic's rank, the smaller workspace, the enum), and a Graph API plan or a kernel of our own replaces cuDNN's choice only when faster by more than it; the default (0.001) takes the fastest median but for equal ones, a wider one (0.03) keeps the heuristic's choice within it (a record in --algo-cache is re-ordered by the run's value when replayed)", true, "engine_search_tie", all, EngineSetting{}, false, "", {"cudnn"}},
      {"engine.graph_plan_reuse", "", T::boolean, "true", 0, 0, {}, "cudnn, algo = exhaustive (no effect otherwise): a runtime-compiled Graph API plan (the residual graph of a conv_bn_add_relu group; NVRTC compiles it in every session) is kept as bytes by the first session of the process that builds it and restored by later sessions (other cells, --repetitions) instead of compiled again, and with --algo-cache FILE saved in FILE.plans for later processes on the same device and libraries; the same plan, so the same step; decisions count the plans restored and kept, and those the file held (graph_api_setup); false: every session compiles its own", false, "engine_graph_plan_reuse", all, EngineSetting{}},
      {"engine.graph_from_cache", "", T::boolean, "true", 0, 0, {}, "cudnn, algo = exhaustive without search_in_step (no effect otherwise: the in-step search times the graph's other plans): where the algorithm cache holds a Graph API graph's measured plans (--algo-cache, or an earlier session of the process), a session creates only the chosen plan's engine configuration (cudnn-frontend's create_execution_plan) instead of asking cuDNN's heuristics for every candidate, and no graph where the legacy choice won; the same plans, so the same step; decisions count the graphs so created (graph_api_setup); false: every session creates every graph whole", false, "engine_graph_from_cache", all, EngineSetting{}},
      {"engine.conv_statistics", "", T::boolean, "false", 0, 0, {}, "cudnn, algo = exhaustive, training over NHWC: a fused batch-norm (bn_relu, bn_add_relu) whose input only a convolution writes takes its batch statistics from that convolution, a Graph API graph that also writes the output's per-channel sum and sum of squares (cuDNN's genstats, runtime-compiled), where measured faster than the plain forward plus our statistics pass and agreeing with the sums of its own output; the batch-norm then finalizes them (E[y^2] - E[y]^2) and applies; decisions say +statistics(...) or why not; false: our statistics pass (Welford)", true, "engine_conv_statistics", all, EngineSetting{}},
      {"engine.pool_spacer_mb", "", T::integer, "0", 0, 65536, {}, "cudnn: before each session's pool, allocate this many MiB times (the session's index among consecutive sessions of the cell, mod 4) and hold it untouched for the session's life, so that the repetitions of a cell (--repetitions) find their pools on other device memory, the same offsets in every process; 0 = none; to test whether a step's time depends on where its memory lies (a spread between processes with identical plans, bench/results/2026-12-10)", true, "engine_pool_spacer_mb", all, EngineSetting{}, false, "", {"cudnn"}},
      {"engine.fuse", "--fuse", T::boolean, "true", 0, 0, {}, "native engines (cudnn, onednn): lower the fusion planner's groups (conv+bias+relu, training batch-norm+add+relu, ...) as fused ops; false: every layer its own ops, for A/B (decisions name every refusal)", true, "engine_fuse", all, EngineSetting{}},
      {"engine.workspace_limit_mb", "", T::integer, "1024", 0, 1 << 24, {}, "GPU convolution workspace limit per convolution [MiB]", true, "engine_workspace_limit_mb", all, EngineSetting{}},
      {"engine.layout", "--layout", T::choice, "auto", 0, 0, {"auto", "nchw", "nhwc"}, "tensor layout; auto = NCHW for fp32, NHWC for tf32, fp16 and bf16 (measured on the H200: bench/results/2026-12-01)", true, "engine_layout", all, EngineSetting{}, to_workers},
      {"engine.cuda_graphs", "--cuda-graphs", T::boolean, "false", 0, 0, {}, "capture each step as a CUDA graph and replay it", true, "engine_cuda_graphs", all, EngineSetting{}},
      {"engine.compile_mode", "", T::choice, "reduce-overhead", 0, 0, {"reduce-overhead", "max-autotune"}, "pytorch-compile: the torch.compile mode (reduce-overhead = CUDA graphs)", true, "engine_compile_mode", all, EngineSetting{}, to_workers, "", {"pytorch-compile"}},
      {"engine.worker_per_cell", "", T::boolean, "true", 0, 0, {}, "framework workers: a fresh worker process for every cell, as a framework's users run one configuration per process (nothing a library keeps for a process's life, e.g. cudnn.benchmark's algorithm choices, the caching allocator's pool or compiled graphs, carries into the next cell); false serves a rank's cells from one process (faster sweeps)", true, "engine_worker_per_cell", all, EngineSetting{}, false, "", {"pytorch", "pytorch-compile", "jax"}},
      {"engine.compile_cache", "--compile-cache", T::text, "<output>.cache", 0, 0, {}, "framework workers: the directory of their persistent compile caches (pytorch-compile: Inductor's FX graph, AOTAutograd, autotuning and Triton caches; jax: its persistent compilation cache), shared by every cell, rank and run that names it; a warm cache shortens a cell's untimed compile, never its timed steps, and each cell's decisions say whether it was cold or warm; <output> stands for the cube's path; none = no persistent cache, every compile cold (check: none unless set)", false, "engine_compile_cache", all, DerivedValue{}, to_workers},
      {"engine.jax_timing", "", T::choice, "events", 0, 0, {"events", "device-paced", "host"}, "jax: how each timed step is timed; events (the default) = marks: a CUDA event on XLA's own stream recorded by the XLA FFI handler of libcrossbench_jax_events.so in a program of its own, dispatched before each sample's steps and after the last, and a sample is the period from its mark to the next over its steps (1, or k consecutive steps where a step is shorter than 20 ms: k chosen in prepare, in decisions), so it includes any gap before the next sample starts; the step's own program is untouched; on the H200 within 0.1-4.5% of an untraced fori_loop of the step (AlexNet, ResNet-50 bf16) and 0.2-3% of device-paced; where events cannot be had (e.g. the CPU) the worker falls back to device-paced and its decisions say why; device-paced = steps k+1..k+3 are dispatched before step k's result is waited for, and a step's time is the interval between consecutive completions (the first from a sync before it); host = perf_counter around the jitted call and block_until_ready (adds the host's dispatch and the wait's wake-up to each step); bench/gpu_jax_clock.py holds them against each other and an untraced device loop", true, "engine_jax_timing", all, EngineSetting{}, to_workers, "", {"jax"}},
      {"engine.bucket_mb", "", T::integer, "25", 1, 1 << 16, {}, "data-parallel gradient all-reduce bucket size [MiB]", true, "data_parallel_bucket_mb", measured, DerivedValue{}},
      // [output]
      {"output.path", "", T::text, "results/<job name>.h5", 0, 0, {}, "the results cube (its directory is created)", false, "", measured, DerivedValue{}},
      // The command line only.
      {"", "--job", T::text, "jobs/quick.ini", 0, 0, {}, "the job file (INI): the keys above", false, "job_path", all, DerivedValue{}},
      {"", "--set", T::text, "", 0, 0, {}, "KEY=VALUE overrides a job-file key, e.g. --set measure.warmup=5 (each key once)", false, "", all, AssignsKeys{}},
      {"", "--output", T::text, "[output] path", 0, 0, {}, "the results cube; its directory must exist", false, "", "run", DerivedValue{}, false, "-o"},
      {"", "--device-tag", T::text, "$CROSSBENCH_DEVICE_TAG", 0, 0, {}, "extends the device key, e.g. power=500W (a separate row of the cube)", false, "device_tag", all, DerivedValue{}},
      {"", "--replicas", T::integer, "1", 1, 4096, {}, "measure every cell on R devices of a key", false, "replicas", measured, &JobOptions::replicas},
      {"", "--filter", T::text, "", 0, 0, {}, "keep only the cells whose name (engine/network/precision/bBATCH/phase/gGPUS) matches this regular expression", false, "cell_filter", all, &JobOptions::cell_filter},
      {"", "--first", T::text, "", 0, 0, {}, "take the cells whose name (as --filter) matches this regular expression first, in the plan's order, then each rank's other cells in the plan's order (under measure.oom_boundary = stop a series still runs its smaller batches first); only the order changes, never what a cell measures: e.g. the cells whose compile a prewarm finished (bench/study_prewarm.py --ready-file)", false, "first_cells", measured, &JobOptions::first_cells},
      {"", "--quiet", T::flag, "off", 0, 0, {}, "print only the final table (no progress, no context)", false, "", "run", &RunOptions::quiet},
      {"", "--resume", T::flag, "off", 0, 0, {}, "continue the journal of an interrupted run", false, "resumed", "run", &RunOptions::resume},
      {"", "--overwrite", T::flag, "off", 0, 0, {}, "replace an existing cube and journal", false, "", "run", &RunOptions::overwrite},
      {"", "--allow-new-devices", T::flag, "off", 0, 0, {}, "with --resume: accept device keys the journal does not have", false, "", "run", &RunOptions::allow_new_devices},
      {"", "--bind-near-gpu", T::flag, "off", 0, 0, {}, "bind each rank's process (all its threads, and its workers) to the cores nearest its GPU (hwloc: the GPU's NUMA node or package); /ranks records every rank's CPU set and GPU NUMA node either way", false, "bind_near_gpu", "run", &RunOptions::bind_near_gpu},
      {"", "--allow-build-change", T::flag, "off", 0, 0, {}, "with --resume: accept another binary revision or library versions than the journal's last run segment (recorded in the cube, flagged by the report)", false, "", "run", &RunOptions::allow_build_change},
      {"", "--allow-setting-change", T::flag, "off", 0, 0, {}, "with --resume: accept a changed setting or worker command that changes only some engines' numbers (engine.jax_timing: jax; engine.compile_mode: pytorch-compile; engine.worker_per_cell and workers.<engine>: those engines): the journal's cells of those engines run again under this run's value, every other cell is kept; the journal as it was stays beside it as <journal>.superseded, and the cube records the change (allowed_setting_change)", false, "", "run", &RunOptions::allow_setting_change},
      {"", "--salvage", T::flag, "off", 0, 0, {}, "with --resume: rebuild a journal header that fails its checksum from this run's job, only if every intact record agrees with it", false, "", "run", &RunOptions::salvage},
      {"", "--stop-grace-s", T::number, "120", 0, 1e6, {}, "after a stop signal, the running cell may finish for this long before it is ended (not_run, re-run on resume) [s]", false, "", "run", &RunOptions::stop_grace_s},
      {"", "--heartbeat-s", T::integer, "30", 0, 1e6, {}, "while a cell runs, its rank prints a line to stderr this often (the cell, the time so far), so that a long cell is seen alive; 0: never [s]", false, "", "run", &RunOptions::heartbeat_s},
      {"", "--checkpoint-s", T::number, "60", 0, 1e9, {}, "rank 0 rewrites the cube this often [s]", false, "", "run", &RunOptions::checkpoint_s},
      {"", "--jsonl", T::text, "", 0, 0, {}, "also append one JSON line per finished cell (with its provenance) to FILE", false, "", "run", &RunOptions::jsonl},
      {"", "--json", T::flag, "off", 0, 0, {}, "print the plan as JSON", false, "", "plan", &PlanOptions::json},
      {"", "--calibrate", T::text, "", 0, 0, {}, "estimate each cell from the wall times these cubes (comma-separated) recorded: a cell a cube holds ok takes its wall seconds there (start to end); the others of its engine and device key take the cost model scaled by the matched cells", false, "", "plan", DerivedValue{}},
      {"", "--ranks", T::integer, "(MPI world)", 1, 1 << 20, {}, "plan for N ranks like this process, without MPI", false, "", "plan", &PlanOptions::simulated_ranks},
      {"", "--device-json", T::text, "", 0, 0, {}, "with --ranks: the ranks' device (crossbench list devices --json)", false, "", "plan", &PlanOptions::device_json},
      {"", "--cpu", T::flag, "off", 0, 0, {}, "run framework workers on the CPU", false, "", "check", &CheckOptions::workers_on_cpu},
      // merge (no job: its input cubes are its positional words, MergeOptions::inputs). A flag
      // another command also has (--output, --overwrite) is its own row: each fills its command's field.
      {"", "--output", T::text, "(required)", 0, 0, {}, "the merged cube; its directory must exist", false, "", "merge", &MergeOptions::output, false, "-o"},
      {"", "--prefer", T::text, "(none: such a cell is refused)", 0, 0, {}, "which input wins a cell that several inputs hold: the first or last on the command line, or the input FILE", false, "", "merge", &MergeOptions::prefer},
      {"", "--strict", T::flag, "off", 0, 0, {}, "refuse (exit 2, nothing written) what would only be warned about: an incomplete input, inputs measured with different settings", false, "", "merge", &MergeOptions::strict},
      {"", "--overwrite", T::flag, "off", 0, 0, {}, "replace an existing output", false, "", "merge", &MergeOptions::overwrite},
      // list (no job: the list it prints is its positional word, ListOptions::topic).
      {"", "--json", T::flag, "off", 0, 0, {}, "print the list as JSON, for scripts", false, "", "list", &ListOptions::json},
      // describe takes no flag but --help (its network is its positional word, DescribeOptions::network).
      // export-network (no job: its network is its positional word, ExportNetworkOptions::network).
      {"", "--output", T::text, "(stdout)", 0, 0, {}, "write the JSON to FILE instead of stdout (an existing FILE only with --force)", false, "", "export-network", &ExportNetworkOptions::output, false, "-o"},
      {"", "--force", T::flag, "off", 0, 0, {}, "replace FILE if it exists", false, "", "export-network", &ExportNetworkOptions::force},
  };
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

}  // namespace

std::string canonical_number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.15g", value);
  return buffer;
}

std::string OptionSpec::id() const { return key.empty() ? flag : key; }
std::string OptionSpec::section() const { return key.empty() ? "" : key.substr(0, key.find('.')); }
std::string OptionSpec::name() const { return key.empty() ? flag : key.substr(key.find('.') + 1); }

std::string OptionSpec::range_text() const {
  switch (type) {
    case OptionType::integer:
    case OptionType::integers: return canonical_number(low) + " to " + canonical_number(high);
    case OptionType::number: return "above " + canonical_number(low) + " up to " + canonical_number(high);
    case OptionType::boolean: return "true, false";
    case OptionType::choice: return join(choices);
    default: return "";
  }
}

bool OptionSpec::for_command(const std::string& command) const {
  std::istringstream words(commands);
  std::string word;
  while (words >> word)
    if (word == command) return true;
  return false;
}

bool OptionSpec::is_switch() const {
  return type == OptionType::boolean ||
         (type == OptionType::choice && std::find(choices.begin(), choices.end(), "true") != choices.end());
}

std::optional<std::string> OptionSpec::default_canonical() const {
  if (type == OptionType::flag) return "false";  // a switch is off unless given
  // "(MPI world)", "(required)": a default in parentheses says what stands in for a value.
  if (default_value.size() >= 2 && default_value.front() == '(' && default_value.back() == ')') return std::nullopt;
  try {
    return validated_setting(*this, default_value, "the options schema");
  } catch (const UsageError&) {
    return std::nullopt;  // a default that is no valid value
  }
}

const std::vector<OptionSpec>& options_schema() {
  static const std::vector<OptionSpec> schema = make_schema();
  return schema;
}

const OptionSpec* find_option(const std::string& flag, const std::string& command) {
  for (const auto& spec : options_schema())
    if (spec.for_command(command) && !spec.flag.empty() && (spec.flag == flag || (!spec.short_flag.empty() && spec.short_flag == flag)))
      return &spec;
  return nullptr;
}

const OptionSpec* find_option(const std::string& key_or_flag) {
  for (const auto& spec : options_schema())
    if ((!spec.key.empty() && spec.key == key_or_flag) || (!spec.flag.empty() && spec.flag == key_or_flag) ||
        (!spec.short_flag.empty() && spec.short_flag == key_or_flag))
      return &spec;
  return nullptr;
}

std::vector<std::string> option_sections() {
  std::vector<std::string> sections;
  for (const auto& spec : options_schema())
    if (!spec.key.empty() && std::find(sections.begin(), sections.end(), spec.section()) == sections.end())
      sections.push_back(spec.section());
  sections.push_back("workers");
  return sections;
}

std::optional<std::int64_t> parse_integer(const std::string& text) {
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size()) return std::nullopt;
  return value;
}

std::string validated_setting(const OptionSpec& spec, const std::string& raw, const std::string& origin) {
  const std::string text = trimmed(raw);
  // A job-file key is named with its section; a command-line-only flag has none.
  const std::string name = spec.key.empty() ? spec.flag : "[" + spec.section() + "] " + spec.name();
  const std::string what = origin + ": " + name + (spec.key.empty() ? " '" : " = '") + text + "'";
  switch (spec.type) {
    case OptionType::integer: {
      const std::optional<std::int64_t> value = parse_integer(text);
      if (!value) throw UsageError(what + " must be an integer");
      if (*value < spec.low || *value > spec.high) throw UsageError(what + " is out of range; valid: " + spec.range_text());
      return std::to_string(*value);
    }
    case OptionType::number: {
      std::size_t used = 0;
      double value = 0;
      try {
        value = std::stod(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != text.size()) throw UsageError(what + " must be a number");
      if (!(value > spec.low && value <= spec.high)) throw UsageError(what + " is out of range; valid: " + spec.range_text());
      return canonical_number(value);
    }
    case OptionType::boolean:
      if (text == "true" || text == "false") return text;
      throw UsageError(what + " must be true or false");
    case OptionType::choice:
      if (std::find(spec.choices.begin(), spec.choices.end(), text) != spec.choices.end()) return text;
      throw UsageError(origin + ": unknown " + name + " '" + text + "'; valid: " + spec.range_text());
    default:
      return text;  // lists: the option parser checks each entry against the names it knows
  }
}

std::string setting_value(const std::map<std::string, std::string>& values, const std::string& key) {
  const auto found = values.find(key);
  if (found != values.end()) return found->second;
  const OptionSpec* spec = find_option(key);
  if (spec == nullptr) throw Error("'" + key + "' is not a key of the options schema");
  return spec->default_value;
}

std::vector<RecordedSetting> recorded_settings(const std::map<std::string, std::string>& values) {
  std::vector<RecordedSetting> settings;
  for (const auto& spec : options_schema()) {
    if (spec.recorded_as.empty()) continue;
    const auto found = values.find(spec.id());
    settings.push_back({spec.id(), found == values.end() ? "" : found->second,
                        spec.changes_numbers, spec.recorded_as});
  }
  return settings;
}

std::vector<RecordedSetting> number_changing_settings(const std::map<std::string, std::string>& values) {
  std::vector<RecordedSetting> settings = recorded_settings(values);
  std::erase_if(settings, [](const RecordedSetting& setting) { return !setting.changes_numbers; });
  return settings;
}

std::vector<std::string> worker_setting_keys() {
  std::vector<std::string> keys;
  for (const auto& spec : options_schema())
    if (spec.sent_to_workers) keys.push_back(spec.key);
  return keys;
}

namespace {

// "yes", or "yes (jax)" for a setting that changes only those engines' numbers.
std::string changes_numbers_text(const OptionSpec& spec) {
  if (!spec.changes_numbers) return "no";
  std::string engines;
  for (const auto& engine : spec.engines) engines += (engines.empty() ? "" : ", ") + engine;
  return engines.empty() ? "yes" : "yes (" + engines + ")";
}

}  // namespace

std::string options_markdown_table() {
  std::ostringstream table;
  table << "| key | flag | default | valid | changes numbers | cube attribute | to workers | meaning |\n"
        << "|---|---|---|---|---|---|---|---|\n";
  for (const auto& spec : options_schema()) {
    if (spec.key.empty()) continue;
    table << "| `" << spec.key << "` | " << (spec.flag.empty() ? "" : "`" + spec.flag + "`") << " | " << spec.default_value
          << " | " << spec.range_text() << " | " << changes_numbers_text(spec) << " | "
          << (spec.recorded_as.empty() ? "" : "`" + spec.recorded_as + "`") << " | " << (spec.sent_to_workers ? "yes" : "")
          << " | " << spec.help << " |\n";
  }
  return table.str();
}

}  // namespace crossbench
