#include "cluster/plan.hpp"
#include "cluster/oom_boundary.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string_view>

#include "crossbench/error.hpp"
#include "crossbench/network.hpp"

namespace crossbench {

std::vector<PlannedCell> Plan::cells_of(int rank) const {
  std::vector<PlannedCell> mine;
  for (const auto& planned : cells) {
    const bool member = planned.data_parallel()
                            ? std::find(planned.group_ranks.begin(), planned.group_ranks.end(), rank) != planned.group_ranks.end()
                            : planned.rank == rank;
    if (member) mine.push_back(planned);
  }
  return mine;
}

std::vector<std::string> resolve_engines(const std::vector<std::string>& engines, DeviceKind kind) {
  std::vector<std::string> resolved;
  for (const auto& engine : engines) {
    const std::string name = engine == "auto" ? std::string(native_engine(kind)) : engine;
    if (std::find(resolved.begin(), resolved.end(), name) == resolved.end()) resolved.push_back(name);
  }
  return resolved;
}

Assignment assign_longest_first(const std::vector<double>& costs, const std::vector<std::string>& conflict_classes,
                                const std::vector<int>& ranks, std::vector<double>& rank_load) {
  return assign_longest_first(costs, costs, conflict_classes, ranks, rank_load);
}

Assignment assign_longest_first(const std::vector<double>& costs, const std::vector<double>& priorities,
                                const std::vector<std::string>& conflict_classes, const std::vector<int>& ranks,
                                std::vector<double>& rank_load) {
  Assignment assignment;
  assignment.order.resize(costs.size());
  std::iota(assignment.order.begin(), assignment.order.end(), 0);
  std::stable_sort(assignment.order.begin(), assignment.order.end(),
                   [&](std::size_t a, std::size_t b) { return priorities[a] > priorities[b]; });
  assignment.rank_of_item.assign(costs.size(), -1);
  std::map<std::string, std::vector<int>> ranks_holding;
  for (const std::size_t item : assignment.order) {
    auto& taken = ranks_holding[conflict_classes[item]];
    int best = -1;
    for (const int rank : ranks) {
      if (std::find(taken.begin(), taken.end(), rank) != taken.end()) continue;
      if (best < 0 || rank_load[static_cast<std::size_t>(rank)] < rank_load[static_cast<std::size_t>(best)]) best = rank;
    }
    assignment.rank_of_item[item] = best;
    if (best < 0) continue;
    taken.push_back(best);
    rank_load[static_cast<std::size_t>(best)] += costs[item];
  }
  return assignment;
}

namespace {

// The ranks grouped by device key, in order of their first rank.
std::vector<DeviceGroup> group_ranks_by_device(const std::vector<Device>& rank_devices) {
  std::vector<DeviceGroup> groups;
  for (int rank = 0; rank < static_cast<int>(rank_devices.size()); ++rank) {
    const std::string key = rank_devices[static_cast<std::size_t>(rank)].key();
    auto group = std::find_if(groups.begin(), groups.end(), [&](const DeviceGroup& g) { return g.key == key; });
    if (group == groups.end()) {
      groups.push_back({key, rank_devices[static_cast<std::size_t>(rank)], {}});
      group = std::prev(groups.end());
    }
    group->ranks.push_back(rank);
  }
  return groups;
}

// A group's cells in matrix order, each with the cost model's estimate;
// those in `done` or not selected by --filter left out.
// What --filter selected over every group: whether any cell of the matrix (a
// done cell of a resumed run counts as selected), and a cell name for the message.
struct FilterTally {
  bool selected_any = false;
  bool first_matched_any = false;  // --first: whether it names any selected cell (done ones included)
  std::string example_cell;
};

std::vector<PlannedCell> group_cells(const JobOptions& options, const DeviceGroup& group, const std::set<std::string>& done,
                                     const std::map<std::string, Network>& networks, const CompileCacheState& cache,
                                     const AlgorithmCacheState& algorithms, FilterTally& tally) {
  std::vector<PlannedCell> cells;
  for (const CellSpec& cell : expand_matrix(options.matrix, resolve_engines(options.matrix.engines, group.device.kind),
                                            options.replicas)) {
    if (tally.example_cell.empty()) tally.example_cell = describe(cell);
    if (!cell_selected(options.cell_filter, cell)) continue;
    tally.selected_any = true;
    const bool first = !options.first_cells.empty() && cell_selected(options.first_cells, cell);
    tally.first_matched_any = tally.first_matched_any || first;
    if (done.count(cell_key(group.key, cell))) continue;
    PlannedCell planned;
    planned.device_key = group.key;
    planned.cell = cell;
    planned.rank = -1;
    planned.taken_first = first;
    planned.model = model_cell_estimate(networks.at(cell.network), cell, group.device, options.measure, options.engine,
                                        cache, algorithms);
    planned.cold_cache_s =
        model_cell_estimate(networks.at(cell.network), cell, group.device, options.measure, options.engine).total_s();
    if (cell.gpus > static_cast<int>(group.ranks.size()) && cell.phase == Phase::training) {
      planned.unrunnable_reason = "data parallel over " + std::to_string(cell.gpus) + " devices needs " +
                                  std::to_string(cell.gpus) + " ranks bound to devices of key '" + group.key +
                                  "'; this run has " + std::to_string(group.ranks.size());
      planned.model = CellEstimate{};
      planned.model.steps_s = kUnsupportedCellSeconds;
      planned.cold_cache_s = kUnsupportedCellSeconds;
    }
    planned.estimated_s = planned.model.total_s();
    cells.push_back(planned);
  }
  return cells;
}

// The key the run orders its cells by: the model's estimate with empty caches (cold_cache_s). The order
// must not depend on what the compile and algorithm caches hold, because whoever filled them
// (bench/study_prewarm.py, an earlier run segment) planned the same matrix with the caches as they were
// then, and compiled the cells it expected the run to take first. A warm compile cache cuts every
// framework cell's compile estimate (warm_compile_seconds), which moves the cells with long steps ahead of
// those with long compiles: in call 63 the prewarm compiled 3 cells and the timed run, taking others
// first, reached 1 of them. Loads and the predicted makespan keep the cache-aware estimate (estimated_s);
// an estimate from recorded times (plan --calibrate) is its own key.
double ordering_seconds(const PlannedCell& planned) {
  return planned.estimate_source == kEstimateModel ? planned.cold_cache_s : planned.estimated_s;
}

// Data-parallel cells (`parallel`: indices into `cells`, largest groups and
// longest first), each on the cell.gpus least-loaded ranks of the group,
// appended to the plan in order of their estimated start, so that disjoint
// groups run side by side.
void place_data_parallel_cells(Plan& plan, const DeviceGroup& group, std::vector<PlannedCell>& cells,
                               const std::vector<std::size_t>& parallel) {
  std::vector<std::pair<double, PlannedCell>> started;  // (estimated start [s], cell)
  std::map<std::string, std::set<int>> ranks_holding;  // replicas of one cell go to distinct ranks
  for (const std::size_t index : parallel) {
    PlannedCell& planned = cells[index];
    CellSpec base = planned.cell;
    base.replica = 0;
    auto& taken = ranks_holding[describe(base)];
    std::vector<int> candidates;
    for (const int rank : group.ranks)
      if (!taken.count(rank)) candidates.push_back(rank);
    if (static_cast<int>(candidates.size()) < planned.cell.gpus)
      candidates = group.ranks;  // more replicas than disjoint groups: reuse ranks
    std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
      return plan.rank_load_s[static_cast<std::size_t>(a)] < plan.rank_load_s[static_cast<std::size_t>(b)];
    });
    candidates.resize(static_cast<std::size_t>(planned.cell.gpus));
    std::sort(candidates.begin(), candidates.end());
    planned.group_ranks = candidates;
    planned.rank = candidates.front();
    // The group starts when its busiest member is free, and ends together.
    double start = 0;
    for (const int rank : candidates) start = std::max(start, plan.rank_load_s[static_cast<std::size_t>(rank)]);
    for (const int rank : candidates) {
      taken.insert(rank);
      plan.rank_load_s[static_cast<std::size_t>(rank)] = start + planned.estimated_s;
    }
    plan.total_s += planned.estimated_s * planned.cell.gpus;
    started.emplace_back(start, planned);
  }
  // In order of their estimated start, so that disjoint groups run side by side.
  std::stable_sort(started.begin(), started.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [start, planned] : started) {
    planned.group_tag = static_cast<int>(plan.cells.size()) + 1;
    plan.cells.push_back(std::move(planned));
  }
}

// Single-device cells (`single`: indices into `cells`) over the group's
// ranks, longest processing time first (by ordering_seconds); the replicas of a cell on distinct ranks.
void place_single_cells(Plan& plan, const DeviceGroup& group, std::vector<PlannedCell>& cells,
                        const std::vector<std::size_t>& single) {
  std::vector<double> costs, priorities;
  std::vector<std::string> classes;
  for (const std::size_t index : single) {
    CellSpec base = cells[index].cell;
    base.replica = 0;
    costs.push_back(cells[index].estimated_s);
    priorities.push_back(ordering_seconds(cells[index]));
    classes.push_back(describe(base));
  }
  const Assignment assignment = assign_longest_first(costs, priorities, classes, group.ranks, plan.rank_load_s);
  for (const std::size_t item : assignment.order) {
    PlannedCell& planned = cells[single[item]];
    planned.rank = assignment.rank_of_item[item];
    plan.total_s += planned.estimated_s;
    plan.cells.push_back(planned);
  }
}

// A rank runs its single-device cells in one process, and a native engine keeps the searches it
// measured for the rest of that process: a cell's exhaustive search times only the convolutions
// (convolution_searches keys) that no earlier cell of its rank searched. Walks the plan's cells in
// order and takes from each search (and its rank's load) what an earlier cell of the rank searched.
// Data-parallel cells, capped ones and those estimated from recorded times keep their estimates.
void account_search_reuse(Plan& plan) {
  std::map<int, std::set<std::string>> searched;  // per rank
  for (PlannedCell& planned : plan.cells) {
    const std::vector<std::string>& keys = planned.model.searches;
    if (planned.data_parallel() || planned.rank < 0 || keys.empty() || planned.model.capped) continue;
    std::set<std::string>& seen = searched[planned.rank];
    std::size_t fresh = 0;
    for (const std::string& key : keys) fresh += seen.insert(key).second ? 1 : 0;
    if (fresh == keys.size()) continue;
    planned.model.search_s = search_seconds_per_convolution() * static_cast<double>(fresh);
    planned.model.search_kind = "exhaustive search (" + std::to_string(fresh) + " of " + std::to_string(keys.size()) +
                                " convolution searches new to rank " + std::to_string(planned.rank) + ")";
    if (planned.estimate_source != kEstimateModel) continue;
    const double saved_s = planned.estimated_s - planned.model.total_s();
    planned.estimated_s -= saved_s;
    plan.rank_load_s[static_cast<std::size_t>(planned.rank)] -= saved_s;
    plan.total_s -= saved_s;
  }
}

// --first: the single-device cells it names move ahead of the others, each side in the plan's order; every
// cell keeps its rank (so the loads and the makespan stay), and data-parallel cells keep their places (their
// ranks start them together). Why: a prewarm (bench/study_prewarm.py) compiles the run's first cells side by
// side, and the one it did not finish would otherwise be compiled first while the finished ones wait (call 64).
void take_first(std::vector<PlannedCell>& cells) {
  std::vector<std::size_t> positions;
  std::vector<PlannedCell> first, rest;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (cells[i].data_parallel()) continue;
    positions.push_back(i);
    (cells[i].taken_first ? first : rest).push_back(cells[i]);
  }
  if (first.empty()) return;
  first.insert(first.end(), rest.begin(), rest.end());
  for (std::size_t k = 0; k < positions.size(); ++k) cells[positions[k]] = std::move(first[k]);
}

// A framework series (one engine, network, precision, phase and group size over several batches) compiles
// one graph per batch into the run's compile cache, and a pytorch-compile cell finds its series' earlier
// batches there: the cells planned cold after the first of their series compile at kSeriesCompileFraction of
// cold (cost_model.hpp). Walks the plan's cells in order (under measure.oom_boundary = stop, each series
// smallest batch first). No persistent cache (engine.compile_cache = none), a warm directory (already
// estimated warm), data-parallel and capped cells and those estimated from recorded times keep their estimates.
void account_compile_reuse(Plan& plan) {
  if (plan.compile_cache.directory == "none") return;
  constexpr std::string_view cold = " (cold)";  // model_cell_estimate's search_kind of a cold compile
  std::set<std::string> compiled;                // the series whose cells the run compiles before the current one
  for (PlannedCell& planned : plan.cells) {
    CellEstimate& model = planned.model;
    if (!compile_shared_across_batches(planned.cell.engine) || planned.data_parallel() || model.cold_compile_s <= 0 ||
        model.capped || !std::string_view(model.search_kind).ends_with(cold))
      continue;
    CellSpec series = planned.cell;
    series.batch = 0;
    series.replica = 0;
    if (compiled.insert(describe(series)).second) continue;  // the series' first compile: cold
    model.search_s = model.cold_compile_s * kSeriesCompileFraction;
    model.search_kind.replace(model.search_kind.size() - cold.size(), cold.size(), " (another batch cached)");
    if (planned.estimate_source != kEstimateModel) continue;
    const double saved_s = planned.estimated_s - planned.model.total_s();
    planned.estimated_s -= saved_s;
    if (planned.rank >= 0) plan.rank_load_s[static_cast<std::size_t>(planned.rank)] -= saved_s;
    plan.total_s -= saved_s;
  }
}

}  // namespace

Plan make_plan(const JobOptions& options, const std::vector<Device>& rank_devices, const std::set<std::string>& done,
               const RecordedWallTimes* recorded) {
  Plan plan;
  plan.groups = group_ranks_by_device(rank_devices);
  plan.rank_load_s.assign(rank_devices.size(), 0.0);
  std::map<std::string, Network> networks;
  for (const auto& name : options.matrix.networks) networks.emplace(name, make_network(name));
  // Read once: every framework cell's compile estimate depends on whether its cache is warm.
  plan.compile_cache = read_compile_cache_state(options.engine.setting("engine.compile_cache"));
  // And whether a native engine's measured search replays an algorithm cache.
  plan.algorithm_cache = read_algorithm_cache_state(options.engine.setting("engine.algo_cache"));

  // --filter: a filter that selects no cell of the matrix is a mistake, never an empty run
  // (a done cell of a resumed run counts as selected: that run is simply finished).
  FilterTally tally;
  tally.selected_any = options.cell_filter.empty();
  for (const auto& group : plan.groups) {
    if (static_cast<int>(group.ranks.size()) < options.replicas)
      throw UsageError("--replicas " + std::to_string(options.replicas) + " needs at least that many ranks per device, but '" +
                       group.key + "' has " + std::to_string(group.ranks.size()) + " rank(s)");
    std::vector<PlannedCell> cells = group_cells(options, group, done, networks, plan.compile_cache, plan.algorithm_cache, tally);
    if (recorded != nullptr) {
      const auto fits = calibrate_cells(cells, *recorded, options.measure.cell_time_limit_s);
      plan.calibration.insert(plan.calibration.end(), fits.begin(), fits.end());
    }
    // Data-parallel cells first, longest first, each on the least-loaded ranks.
    std::vector<std::size_t> parallel, single;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const PlannedCell& planned = cells[i];
      const bool trains_together = planned.cell.gpus > 1 && planned.cell.phase == Phase::training &&
                                   planned.unrunnable_reason.empty();
      (trains_together ? parallel : single).push_back(i);
    }
    // Largest groups first (they need the ranks together), longest first within a size.
    std::stable_sort(parallel.begin(), parallel.end(), [&](std::size_t a, std::size_t b) {
      if (cells[a].cell.gpus != cells[b].cell.gpus) return cells[a].cell.gpus > cells[b].cell.gpus;
      return ordering_seconds(cells[a]) > ordering_seconds(cells[b]);
    });
    place_data_parallel_cells(plan, group, cells, parallel);
    place_single_cells(plan, group, cells, single);
  }
  take_first(plan.cells);
  // measure.oom_boundary = stop: each series smallest batch first, so that its first oom ends it.
  if (options.measure.stop_at_oom_boundary) order_series_by_batch(plan.cells);
  account_search_reuse(plan);
  account_compile_reuse(plan);
  if (!tally.selected_any)
    throw UsageError("--filter '" + options.cell_filter + "' matches no cell of the matrix; it is searched in names "
                     "such as '" + tally.example_cell + "' (engine/network/precision/b<batch>/phase/r<replica>; "
                     "`crossbench plan` lists them)");
  if (!options.first_cells.empty() && !tally.first_matched_any)
    throw UsageError("--first '" + options.first_cells + "' matches no cell of the matrix" +
                     (options.cell_filter.empty() ? "" : " that --filter selects") + "; it is searched in names such as '" +
                     tally.example_cell + "' (`crossbench plan` lists them)");
  if (recorded != nullptr) plan.calibration_cubes = recorded->cubes;
  plan.makespan_s = plan.rank_load_s.empty() ? 0 : *std::max_element(plan.rank_load_s.begin(), plan.rank_load_s.end());
  return plan;
}

}  // namespace crossbench
