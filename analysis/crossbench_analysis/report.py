"""`report CUBE -o DIR`: report.md and report.html (self-contained): a headline
that answers first, a summary, then seven sections.

The headline and sections 1-5 compare single devices: they use the gpus == 1
cells only.  Section 6 is the data-parallel one (the cells with gpus > 1).
The summary, the replica spread and the throttled cells cover every cell,
gpus included."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from . import cube_extras, plots, procurement
from .analysis import (NETWORK_ORDER, PHASE_ORDER, PRECISION_ORDER, SCALING_THRESHOLD, batch_curve,
                       by_design_unsupported, collapse_replicas, default_baseline_device, device_speedups,
                       engine_speedups, engines_on, focus_batch, label, native_first, ordered, replica_spread,
                       scaling_table, single_device)
from .cube import CELL_DIMS, Cube, CubeError, SCHEMA_1, STABILITY_THRESHOLD, STATUS_NAMES
from .document import Document
from .peaks import PeakTable

SECTIONS = (
    "1. Time per batch (the study's first figure)",
    "2. Batch-size efficiency (the study's second figure)",
    "3. Device against device, engine against engine",
    "4. Efficiency: effective TFLOP/s, % of peak, energy",
    "5. Where the step goes: layer times",
    "6. Data-parallel scaling: efficiency and exposed communication",
    "7. Provenance",
)
HEADLINE = "Headline: the fastest engine and the device ranking"
LAYER_TOP = 8   # layers per network in the figures; the table lists 5 per cell


def _nz(v: float) -> float:
    return v if math.isfinite(v) else 0.0


def fmt(v, digits=4) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    if isinstance(v, (int, np.integer)):
        return f"{v:,}"
    a = abs(v)
    if 1e-3 <= a < 1e6:   # plain decimals (no 1.93e+03), `digits` significant
        decimals = max(0, digits - 1 - math.floor(math.log10(a)))
        text = f"{v:.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{v:.{digits}g}"


def cell_text(r, value="median_ms", unit=" ms", ci=True) -> str:
    """A table cell: the number (with its CI) when ok, else the status in words."""
    if r.status != "ok":
        msg = f": {r.message}" if getattr(r, "message", "") and r.status not in ("not_run",) else ""
        return label(r.status) + (msg[:80] + "…" if len(msg) > 80 else msg)
    v = getattr(r, value)
    if not math.isfinite(v):
        return "ok (not recorded)"
    if ci and value == "median_ms":
        return f"{fmt(v)}{unit} {plots.ci_pct(v, r.ci_low_ms, r.ci_high_ms)}".rstrip()
    return f"{fmt(v)}{unit}"


def rel_half(r) -> float:
    """The larger half-width of a cell's 95% CI of the median, as a fraction of the median."""
    m = float(r.median_ms)
    if not (math.isfinite(m) and m > 0 and math.isfinite(r.ci_low_ms) and math.isfinite(r.ci_high_ms)):
        return float("nan")
    return max(m - r.ci_low_ms, r.ci_high_ms - m) / m


def overlap(a, b) -> bool:
    """Whether the 95% CIs of two cells' medians overlap: their order is then within noise."""
    return bool(min(a.ci_high_ms, b.ci_high_ms) >= max(a.ci_low_ms, b.ci_low_ms))


def missed_target(cells: pd.DataFrame, target: float) -> pd.Series:
    """Ok cells whose CI half-width ((hi - lo) / 2 / median, the stopping rule's) exceeds measure.target_ci."""
    half = (cells["ci_high_ms"] - cells["ci_low_ms"]) / 2 / cells["median_ms"]
    return (cells["status"] == "ok") & ~(half <= target)


def speed_text(r) -> str:
    if np.isfinite(r.speedup):
        return f"{r.speedup:.3g}× {plots.ci_pct(r.speedup, r.speedup_low, r.speedup_high)}"
    return r.note


class Report:
    def __init__(self, cube: Cube, out_dir: Path, baseline: str | None = None, batch: int | None = None,
                 peaks: PeakTable | None = None, baseline_engine: str | None = None,
                 scaling_threshold: float = SCALING_THRESHOLD):
        self.cube = cube
        self.out = Path(out_dir)
        self.all_cells = collapse_replicas(cube.cells)
        # Sections 1-4 compare single devices: the gpus == 1 cells.
        self.cells = single_device(self.all_cells)
        self.data_parallel = any(g > 1 for g in cube.gpus)
        self.scaling_threshold = scaling_threshold
        self.devices = cube.devices
        self.peaks = peaks or PeakTable.read()
        try:
            self.batch = focus_batch(self.cells if len(self.cells) else self.all_cells, batch)
        except ValueError as e:
            raise CubeError(str(e)) from None
        self.baseline = cube.resolve_device(baseline) if baseline else default_baseline_device(self.cells)
        self.baseline_engine = baseline_engine
        all_engines = ordered([e for d in self.devices for e in engines_on(self.all_cells, d)], ("cudnn", "onednn"))
        self.colors = plots.engine_colors(all_engines)
        self.doc = Document(title=f"crossbench report — {cube.path.name}", figure_dir=self.out / "figures")

    # -- helpers -------------------------------------------------------------

    def _precisions(self, d):
        return ordered(d.loc[d["status"] != "not_run", "precision"].unique(), PRECISION_ORDER)

    def _device_cells(self, device):
        return self.cells[self.cells["device"] == device]

    def _dev_id(self, device):
        """A short file-name part: d<index>-<first words of the key>."""
        words = "-".join(plots.short_device(device).split()[:4])
        return f"d{self.devices.index(device)}-{words[:32]}"

    def _no_single_device(self) -> bool:
        """True (after saying so) when no single-device cell was attempted."""
        if (self.cells["status"] != "not_run").any():
            return False
        gpus = ", ".join(map(str, self.cube.gpus))
        self.doc.text(f"No single-device (gpus = 1) cell was attempted in this cube (its gpus axis: {gpus}), "
                      f"so there is nothing to compare here; the data-parallel cells are in section 6.")
        return True

    def _no_ok(self, dp, what):
        """True (after saying so) when `dp` has no ok cell: its table says why, no figure."""
        if (dp["status"] == "ok").any():
            return False
        st = ", ".join(f"{label(k)} ×{v}" for k, v in dp["status"].value_counts().items())
        reasons = sorted({m for m in dp["message"] if m})[:3]
        self.doc.text(f"No figure for {what}: no cell was measured ({st})" +
                      (f"; reason: {'; '.join(reasons)}" if reasons else "") + ".")
        return True

    # -- the report ------------------------------------------------------------

    def build(self) -> Document:
        doc = self.doc
        c = self.cube
        doc.text(f"Cube `{c.path}` (schema `{c.schema}`), created {c.attrs.get('created', 'at an unknown time')} "
                 f"by crossbench {c.attrs.get('crossbench_version', '?')} "
                 f"(revision {self._revisions()}).")
        for note in c.mixed_runs():
            doc.text(f"**Mixed runs:** {note}. Cells measured by different builds, physical GPUs or settings "
                     f"differ for those reasons too; section 6 lists the run segments and each cell's origin "
                     f"is in the cube (`segment`, `source`, /ranks).")
        self.headline()
        self.summary()
        self.section1()
        self.section2()
        self.section3()
        self.section4()
        self.section_layers()
        self.section5()
        self.section6()
        return doc

    def _geomean_noise(self, r, phase, batch, networks: str) -> float:
        """Relative 95% CI half-width of a ranked device's geometric mean: the selected cells'
        (its fastest engine per network at the ranked precision) combined in log space,
        sqrt(sum h_i^2) / n."""
        d = self.cells[(self.cells["device"] == r.device) & (self.cells["phase"] == phase) &
                       (self.cells["batch"] == batch) & (self.cells["precision"] == r.precision) &
                       (self.cells["status"] == "ok")]
        hs = []
        for n in [x.strip() for x in networks.split(",") if x.strip()]:
            g = d[d["network"] == n]
            if len(g):
                hs.append(rel_half(g.loc[g["images_per_s"].idxmax()]))
        hs = [h for h in hs if math.isfinite(h)]
        return math.sqrt(sum(h * h for h in hs)) / len(hs) if hs else float("nan")

    def _revisions(self) -> str:
        """The build's revision; where segments or merged inputs differ, each one, never '?' for a merged cube."""
        c = self.cube
        revs = [seg.get("git_revision", "?") for seg in c.segments] or [s["attrs"].get("git_revision", "?")
                                                                          for s in c.sources]
        revs = list(dict.fromkeys(revs))
        if len(revs) > 1:
            return "several: " + ", ".join(revs)
        return revs[0] if revs else c.attrs.get("git_revision", "?")

    def headline(self):
        """The answer first: per device, the fastest engine per network and
        precision with its images/s; then the devices ranked by throughput."""
        doc = self.doc
        doc.heading(HEADLINE)
        b = self.batch
        ok = self.cells[(self.cells["status"] == "ok") & (self.cells["batch"] == b)]
        if ok.empty:
            doc.text(f"No single-device cell was measured at batch {b}: nothing to rank (the summary says why).")
            return
        doc.text(f"Batch {b} (`--batch`), single devices. Each entry is the fastest engine of that network, "
                 f"precision and phase, with its images/s (higher is better) and how much faster it is than "
                 f"the runner-up engine.")
        for dev in self.devices:
            d = ok[ok["device"] == dev]
            if d.empty:
                continue
            rows = []
            for ph in ordered(d["phase"], PHASE_ORDER):
                for n in ordered(d["network"], NETWORK_ORDER):
                    row = {"phase": ph, "network": n}
                    for prec in ordered(d["precision"], PRECISION_ORDER):
                        g = d[(d["phase"] == ph) & (d["network"] == n) & (d["precision"] == prec)]
                        g = g.sort_values("images_per_s", ascending=False)
                        if g.empty:
                            row[prec] = "no ok cell"
                            continue
                        best = g.iloc[0]
                        lead = ""
                        if len(g) > 1:
                            second = g.iloc[1]
                            lead = (f", within noise of {second.engine} (CIs overlap)" if overlap(best, second)
                                    else f", {best.images_per_s / second.images_per_s:.2f}× {second.engine}")
                        row[prec] = f"{best.engine}: {fmt(best.images_per_s, 4)}{lead}"
                    rows.append(row)
            doc.heading(f"{dev}: fastest engine, images/s", 3)
            doc.table(pd.DataFrame(rows), f"fastest engine per network and precision on {dev}, batch {b} "
                                          f"[images/s], and its lead over the next engine")
        phase = "training" if (ok["phase"] == "training").any() else "inference"
        ranking = procurement.device_ranking(self.cube, phase=phase, batch=b)
        items = []
        ranked = [r for r in ranking.itertuples() if np.isfinite(r.images_per_s)]
        noise = {r.device: self._geomean_noise(r, phase, b, ranking.attrs["networks"]) for r in ranked}
        for i, r in enumerate(ranking.itertuples(), start=1):
            if np.isfinite(r.images_per_s):
                item = f"**{i}. {r.device}**: {fmt(r.images_per_s, 4)} images/s at {r.precision} ({r.engines})"
                if i < len(ranked):
                    nxt = ranked[i]
                    apart = r.images_per_s / nxt.images_per_s - 1
                    h1, h2 = noise[r.device], noise[nxt.device]
                    # Ranked ahead only when the lead exceeds the two geometric means' CIs combined.
                    if not (apart > math.hypot(_nz(h1), _nz(h2))):
                        item += (f" — **within noise** of {nxt.device} ({100 * apart:.1f}% apart; "
                                 f"CIs ±{100 * _nz(h1):.1f}% and ±{100 * _nz(h2):.1f}%)")
                items.append(item)
            else:
                items.append(f"{r.device}: not ranked ({r.status_text})")
        doc.text(f"**Device ranking** ({phase}, batch {b}; geometric mean over {ranking.attrs['networks']} of "
                 f"each device's fastest engine per network, at the device's best precision):")
        doc.bullets(items)
        if len(ranking) == 1:
            doc.text("The cube holds one device: run the job on others (or `crossbench merge` cubes) to rank them.")

    def section_layers(self):
        """Section 5: the stored /layer_times, the slowest layers of each profiled cell."""
        doc = self.doc
        doc.heading(SECTIONS[4])
        lt = cube_extras.layer_times(self.cube)
        lt = lt[lt["gpus"] == 1] if len(lt) else lt
        if lt.empty:
            doc.text("This cube stores no layer times: run with `--layer-times` (or `[measure] layer_times = "
                     "true`) to see each layer's forward and backward time.")
            return
        b = self.batch if (lt["batch"] == self.batch).any() else int(lt["batch"].mode().iloc[0])
        lt = lt[(lt["batch"] == b) & (lt["replica"] == lt["replica"].min())]
        doc.text(f"Each layer's forward and backward time from the profiling pass after a cell's timed steps "
                 f"(median over its repetitions; layer by layer, so the sum exceeds the fused, graphed step). "
                 f"Batch {b}. The figures show the {LAYER_TOP} slowest layers of each network, forward solid and "
                 f"backward hatched; the table the 5 slowest of every profiled cell.")
        keys = ["device", "engine", "precision", "phase"]
        for (dev, eng, prec, ph), g in lt.groupby(keys, sort=False):
            if ph != "training" and (lt[(lt["device"] == dev) & (lt["engine"] == eng) & (lt["precision"] == prec)]
                                     ["phase"] == "training").any():
                continue   # training shows forward and backward; inference is in the table
            doc.figure(plots.fig_layer_times(g, f"Where the {ph} step goes on {dev} — "
                                                f"{eng}, {prec}, batch {b}", plots.engine_color(eng), LAYER_TOP),
                       f"fig-layers-{self._dev_id(dev)}-{eng}-{prec}-{ph}-b{b}",
                       f"The slowest layers of each network on {dev}, {eng}, {prec}, {ph}, batch {b}.")
        rows = []
        for (dev, eng, net, prec, ph), g in lt.groupby(keys[:2] + ["network"] + keys[2:], sort=False):
            total = (g["forward_ms"] + g["backward_ms"]).sum()
            g = g.assign(total=g["forward_ms"] + g["backward_ms"]).sort_values("total", ascending=False).head(5)
            for r in g.itertuples():
                rows.append({"device": dev, "engine": eng, "network": net, "precision": prec,
                             "phase": ph, "layer": r.layer, "kind": r.kind, "forward [ms]": fmt(r.forward_ms, 3),
                             "backward [ms]": fmt(r.backward_ms, 3),
                             "share of all layers": f"{100 * r.total / total:.1f}%" if total > 0 else ""})
        doc.table(pd.DataFrame(rows), f"the 5 slowest layers of each profiled cell, batch {b}",
                  collapsed=len(rows) > 40)

    def summary(self):
        doc, cells = self.doc, self.cube.cells
        doc.heading("Summary")
        axes = ", ".join(f"{d} ({len(self.cube.ds[d])})" for d in CELL_DIMS)
        if self.cube.schema == SCHEMA_1:
            doc.text(f"This cube has schema `{SCHEMA_1}`, from before data-parallel training: it is read as "
                     f"single-device cells (gpus = 1) without exposed communication or scaling efficiency.")
        doc.text(f"Axes: {axes}. Every cell that was not measured is shown with its status: "
                 f"**OOM** (out of memory), **unsupported** (the engine cannot run it on that device), "
                 f"**failed**, **timeout**, or **not run** (not attempted; e.g. an engine that the job did "
                 f"not run on that device). Figures draw such cells as hatched placeholders labelled with "
                 f"the status, never as a bar of zero.")
        by = ["device", "gpus"] if self.data_parallel else ["device"]
        counts = cells.groupby(by + ["status"], sort=False).size().unstack(fill_value=0)
        counts = counts.reindex(columns=[s for s in STATUS_NAMES if s in counts.columns])
        counts.columns = [label(s) for s in counts.columns]
        counts = counts.reset_index()
        doc.table(counts, "cells per device" + (" and gpus (data-parallel group size)" if self.data_parallel else "")
                  + " and status")
        try:
            target = float(self.cube.attrs.get("measure_target_ci", "nan"))
        except ValueError:
            target = float("nan")
        if math.isfinite(target):
            missed = cells[missed_target(cells, target)]
            if len(missed):
                t = missed[["device", "engine", "network", "precision", "batch", "phase", "replica", "steps"]].copy()
                t["median ms ±95% CI"] = [cell_text(r) for r in missed.itertuples()]
                doc.text(f"**{len(missed)} ok cell(s) missed `measure.target_ci` = {100 * target:g}%** (the "
                         f"stopping rule ended them at max_steps or their time limit): a difference between "
                         f"them and another cell smaller than their CI is noise.")
                doc.table(t, "cells whose 95% CI of the median is wider than target_ci", collapsed=len(t) > 15)
        stab = self.cube.stability()
        if len(stab):
            unstable = stab[stab["unstable"]]
            doc.text(f"{len(stab)} cell(s) were measured in repetitions on the same device (`--repetitions`, each a "
                     f"fresh session); the headline is the repetition of the median median. Stability check: "
                     f"**{len(unstable)} unstable** (their repetitions' medians spread by more than "
                     f"{100 * STABILITY_THRESHOLD:g}% of their median).")
            if len(unstable):
                t = unstable[["device", "engine", "network", "precision", "batch", "phase", "repetitions"]].copy()
                t["spread"] = [f"{100 * v:.1f}%" for v in unstable["spread"]]
                t["medians [ms]"] = [", ".join(fmt(x) for x in v) for v in unstable["medians_ms"]]
                doc.table(t, "unstable cells: repetition medians spread above the threshold", collapsed=len(t) > 15)
        by_design = by_design_unsupported(cells)
        if by_design.any():
            doc.text(f"{int(by_design.sum())} of the unsupported cells are inference cells with gpus > 1, which "
                     f"crossbench records as unsupported by design (inference is single-device; data parallelism "
                     f"applies to training); they are not listed below.")
        bad = cells[~cells["status"].isin(["ok", "not_run"]) & ~by_design]
        if len(bad):
            keys = ["status", "device", "engine", "precision", "phase", "network"] + (
                ["gpus"] if self.data_parallel else [])
            g = (bad.groupby(keys, sort=False)
                 .agg(batches=("batch", lambda s: ", ".join(str(b) for b in sorted(s.unique()))),
                      cells=("batch", "size"),
                      message=("message", lambda s: " / ".join(list(dict.fromkeys(m for m in s if m))[:2])))
                 .reset_index())
            g["status"] = g["status"].map(label)
            g = g[keys + ["batches", "cells", "message"]]
            doc.table(g, "cells without a measurement (other than not run), with the reason", collapsed=len(g) > 15)

    # 1 -------------------------------------------------------------------------
    def section1(self):
        doc = self.doc
        doc.heading(SECTIONS[0])
        b = self.batch
        doc.text(f"For each device: the median time of one training or inference step on a batch of {b} "
                 f"images, per network and engine (the study used batch 64). Whiskers are the 95% "
                 f"confidence interval of the median. Choose another batch with `--batch`." +
                 (" Single-device cells (gpus = 1) only." if self.data_parallel else ""))
        if self._no_single_device():
            return
        for dev in self.devices:
            d = self._device_cells(dev)
            d = d[d["batch"] == b]
            engines = engines_on(self.cells, dev)
            if not engines:
                doc.heading(dev, 3)
                doc.text("No cell was attempted on this device (all not run).")
                continue
            for prec in self._precisions(d) or []:
                dp = d[(d["precision"] == prec) & d["engine"].isin(engines)]
                doc.heading(f"{dev} — {prec}, batch {b}", 3)
                if not self._no_ok(dp, f"{prec} at batch {b}"):
                    doc.figure(plots.fig_time_per_batch(dp, dev, prec, b, engines, self.colors),
                             f"fig1-{self._dev_id(dev)}-{prec}-b{b}",
                             f"Time per batch of {b} on {dev}, {prec}: one dot per engine (log axis); inference left, "
                             f"training right; hatched placeholders are cells without a measurement, labelled "
                             f"with their status.")
                t = self._time_table(dp, engines)
                doc.table(t, f"median time per batch of {b} [ms] with its 95% CI, {dev}, {prec}")
            skipped = [e for e in ordered(self.cells["engine"].unique(), ()) if e not in engines]
            if skipped:
                doc.text(f"Engines not run on {dev}: {', '.join(skipped)}.")

    def _time_table(self, dp, engines):
        networks = ordered(dp["network"], NETWORK_ORDER)
        phases = ordered(dp["phase"], PHASE_ORDER)
        rows = []
        for n in networks:
            row = {"network": n}
            for ph in phases:
                for e in engines:
                    r = dp[(dp["network"] == n) & (dp["phase"] == ph) & (dp["engine"] == e)]
                    row[f"{ph} · {e}"] = cell_text(r.iloc[0]) if len(r) else label("not_run")
            rows.append(row)
        return pd.DataFrame(rows)

    # 2 -------------------------------------------------------------------------
    def section2(self):
        doc = self.doc
        doc.heading(SECTIONS[1])
        batches = sorted(self.cells["batch"].unique())
        doc.text("Time per image (median time per batch ÷ batch size) against batch size, log₂ axis. "
                 "The star marks the batch of best throughput; the ✕ at the top marks the first batch that "
                 "ran out of memory, and the thin vertical line the largest batch that fit. Where per-image "
                 "time stops falling, larger batches buy nothing; where the curve bends up, they cost "
                 "throughput (as the study saw on the K40 and the Titan X Pascal)." +
                 (" Single-device cells (gpus = 1) only." if self.data_parallel else ""))
        if self._no_single_device():
            return
        if len(batches) < 2:
            doc.text(f"This cube has a single batch size ({batches[0] if batches else 'none'}), so there is no "
                     f"curve to draw; run a batch sweep (`jobs/batch-sweep.ini`) for this section.")
            return
        for dev in self.devices:
            d = self._device_cells(dev)
            engines = engines_on(self.cells, dev)
            if not engines:
                continue
            for prec in self._precisions(d):
                dp = d[(d["precision"] == prec) & d["engine"].isin(engines)]
                doc.heading(f"{dev} — {prec}", 3)
                if not self._no_ok(dp, prec):
                    doc.figure(plots.fig_batch_efficiency(dp, dev, prec, engines, self.colors),
                             f"fig2-{self._dev_id(dev)}-{prec}",
                             f"Time per image against batch size on {dev}, {prec}: one panel per network; "
                             f"colour = engine, solid = inference, dashed = training.")
                items, rows = [], []
                for n in ordered(dp["network"], NETWORK_ORDER):
                    for e in engines:
                        for ph in ordered(dp["phase"], PHASE_ORDER):
                            s = dp[(dp["network"] == n) & (dp["engine"] == e) & (dp["phase"] == ph)]
                            if s.empty or (s["status"] == "not_run").all():
                                continue
                            f = batch_curve(s)
                            items.append(f"**{n}, {e}, {ph}**: {f['words']}")
                            if f["best_batch"] is None:
                                st = "/".join(sorted({label(x) for x in s["status"] if x != "not_run"}))
                                rows.append({"network": n, "engine": e, "phase": ph, "best batch": st})
                                continue
                            rows.append({"network": n, "engine": e, "phase": ph,
                                         "best batch": fmt(f["best_batch"]),
                                         "best images/s": fmt(f["best_images_per_s"]),
                                         "stops falling at": fmt(f["stops_falling_at"]) if f["stops_falling_at"] else "",
                                         "beyond best": f["bend"] or "",
                                         "largest batch that fit": fmt(f["largest_fit"]) if f["largest_fit"] else "",
                                         "first OOM": fmt(f["first_oom"]) if f["first_oom"] else "no OOM"})
                doc.table(pd.DataFrame(rows), f"batch-size efficiency, {dev}, {prec}")
                doc.bullets(items)

    # 3 -------------------------------------------------------------------------
    def section3(self):
        doc = self.doc
        doc.heading(SECTIONS[2])
        if self.data_parallel:
            doc.text("Devices and engines are compared on single-device cells (gpus = 1).")
        if not self._no_single_device():
            self._devices_and_engines()
        spread = replica_spread(self.cube.cells)
        if len(spread):
            doc.heading("Device-to-device variation (replicas)", 3)
            s = spread.head(30).copy()
            for col in ("fastest_ms", "slowest_ms"):
                s[col] = s[col].map(fmt)
            s["spread_pct"] = s["spread_pct"].map(lambda v: f"{v:.2f}%")
            if not self.data_parallel:
                s = s.drop(columns=["gpus"], errors="ignore")
            doc.table(s, "slowest ÷ fastest replica − 1 (the 30 widest)")

    def _devices_and_engines(self):
        doc = self.doc
        b = self.batch
        doc.heading("Device against device", 3)
        others = [d for d in self.devices if d != self.baseline and engines_on(self.cells, d)]
        if not self.baseline or not others:
            doc.text(f"The cube holds one measured device ({self.baseline or 'none'}): no device to compare. "
                     f"Run the job on several device kinds (e.g. through `mpirun` over heterogeneous nodes).")
        else:
            doc.text(f"Speedup = baseline time ÷ device time, per cell, against the baseline device "
                     f"**{self.baseline}** (choose it with `--baseline`); the interval combines the two "
                     f"cells' 95% CIs (baseline CI low ÷ device CI high, baseline CI high ÷ device CI low). "
                     f"Cells are matched on the same engine when both devices ran it, else each device's "
                     f"fastest engine is used. The figure shows batch {b}; the table every batch.")
            for dev in others:
                t, mode = device_speedups(self.cells, self.baseline, dev)
                doc.heading(f"{dev} over {self.baseline}", 4)
                if t.empty:
                    doc.text("No cell in common with the baseline.")
                    continue
                doc.text(f"Matching: {mode}.")
                for prec in ordered(t["precision"].unique(), PRECISION_ORDER):
                    tp = t[(t["precision"] == prec) & (t["batch"] == b)]
                    if tp.empty or not np.isfinite(tp["speedup"]).any():
                        continue
                    colors = self.colors if mode == "same engine" else {}
                    doc.figure(plots.fig_speedup(tp, f"Speedup of {dev} over {self.baseline} — {prec}, batch {b}",
                                                 "engine", colors, "speedup over the baseline device\n(linear scale)"),
                               f"fig3-{self._dev_id(dev)}-over-{self._dev_id(self.baseline)}-{prec}-b{b}",
                               f"Speedup of {dev} over {self.baseline}, {prec}, batch {b} ({mode}); above 1× "
                               f"the device is faster.")
                doc.table(self._speed_table(t), f"speedup of {dev} over {self.baseline}, every cell",
                          collapsed=len(t) > 40)
        doc.heading("Engine against engine", 3)
        any_engine = False
        for dev in self.devices:
            engines = engines_on(self.cells, dev)
            if len(engines) < 2:
                continue
            any_engine = True
            be = self.baseline_engine if self.baseline_engine in engines else native_first(engines)
            t = engine_speedups(self.cells, dev, be)
            doc.heading(f"{dev}: engines over {be}", 4)
            if t.empty:
                doc.text("No cell in common.")
                continue
            for prec in ordered(t["precision"].unique(), PRECISION_ORDER):
                tp = t[(t["precision"] == prec) & (t["batch"] == b)]
                if tp.empty or not np.isfinite(tp["speedup"]).any():
                    continue
                doc.figure(plots.fig_speedup(tp, f"Speedup of each engine over {be} on {dev} — {prec}, batch {b}",
                                             "engine", self.colors, f"speedup over {be}\n(linear scale)"),
                           f"fig3-{self._dev_id(dev)}-engines-{prec}-b{b}",
                           f"Engines on {dev} against {be}, {prec}, batch {b}; above 1× the engine is faster.")
            doc.table(self._speed_table(t), f"speedup over {be} on {dev}, every cell", collapsed=len(t) > 40)
        if not any_engine:
            doc.text("Every device ran a single engine: no engine comparison. Add engines to the job's "
                     "`[matrix] engines`.")

    def _speed_table(self, t):
        out = t[["engine", "network", "precision", "batch", "phase"]].copy()
        out["baseline [ms]"] = [fmt(v) if s == "ok" else label(s) for v, s in zip(t["baseline_ms"], t["baseline_status"])]
        out["this [ms]"] = [fmt(v) if s == "ok" else label(s) for v, s in zip(t["device_ms"], t["status"])]
        out["speedup [95% interval]"] = [speed_text(r) for r in t.itertuples()]
        out["significant"] = ["yes" if np.isfinite(r.speedup) and (r.speedup_low > 1 or r.speedup_high < 1)
                              else ("no" if np.isfinite(r.speedup) else "") for r in t.itertuples()]
        return out

    # 4 -------------------------------------------------------------------------
    def section4(self):
        doc = self.doc
        doc.heading(SECTIONS[3])
        b = self.batch
        decisions = cube_extras.decisions(self.cube)
        decisions = decisions[decisions["gpus"] == 1].drop_duplicates(
            ["device", "engine", "network", "precision", "batch", "phase"])
        decided = {(r.device, r.engine, r.network, r.precision, int(r.batch), r.phase): r.decisions
                   for r in decisions.itertuples()}
        doc.text("**Effective** TFLOP/s = the network's direct-convolution FLOP count per step (forward; training "
                 "adds the backward pass) ÷ the median step time, as recorded in the cube. An algorithm that does "
                 "fewer multiplications than the direct count (FFT, Winograd) can put a cell above the device's "
                 "peak: such cells are flagged, with the algorithms from the cell's `decisions`; their effective "
                 "rate is not the hardware's. % of peak uses the dense peak of the "
                 "device at that precision from `peaks.csv` (editable; GPUs) or from the cube (CPUs, when "
                 "known); otherwise it is unknown. Energy per image comes from the GPU's energy counter "
                 "where it was measured." + (" Single-device cells (gpus = 1) only." if self.data_parallel else ""))
        if self._no_single_device():
            return
        rows = []
        for dev in self.devices:
            engines = engines_on(self.cells, dev)
            if not engines:
                continue
            d = self._device_cells(dev)
            d = d[(d["batch"] == b) & d["engine"].isin(engines)]
            for prec in self._precisions(d):
                dp = d[d["precision"] == prec]
                pk = self.peaks.peak(dev, prec, self.cube.ranks)
                reasons = {}
                for r in dp[dp["status"] == "ok"].itertuples():
                    if pk.tflops and np.isfinite(r.tflops) and r.tflops > pk.tflops:
                        reasons[(r.engine, r.network, r.phase)] = cube_extras.above_peak_reason(
                            decided.get((dev, r.engine, r.network, prec, b, r.phase), ""), prec)
                doc.heading(f"{dev} — {prec}, batch {b}", 3)
                if not self._no_ok(dp, f"{prec} at batch {b}"):
                    doc.figure(plots.fig_efficiency(dp, dev, prec, b, engines, self.colors, pk.tflops, pk.source,
                                                    reasons),
                             f"fig4-{self._dev_id(dev)}-{prec}-b{b}",
                             f"Effective TFLOP/s (direct-convolution FLOPs) on {dev}, {prec}, batch {b}; peak: "
                             f"{fmt(pk.tflops) + ' TFLOP/s (' + pk.source + ')' if pk.tflops else 'unknown'}.")
                for r in dp.sort_values(["phase", "engine"]).itertuples():
                    ok = r.status == "ok"
                    rows.append({
                        "device": dev, "engine": r.engine, "network": r.network, "precision": prec,
                        "phase": r.phase,
                        "effective TFLOP/s": fmt(r.tflops, 3) if ok else label(r.status),
                        "peak TFLOP/s": fmt(pk.tflops) if pk.tflops else "unknown",
                        "% of peak": (f"{100 * r.tflops / pk.tflops:.1f}%" if pk.tflops and ok and
                                      np.isfinite(r.tflops) else ("unknown" if ok else label(r.status))),
                        "above peak because": reasons.get((r.engine, r.network, r.phase), ""),
                        "images/s": fmt(r.images_per_s) if ok else label(r.status),
                        "energy [J/image]": (fmt(r.energy_j_per_image) if np.isfinite(r.energy_j_per_image)
                                             else ("not measured" if ok else label(r.status))),
                        "peak memory [GiB]": fmt(r.peak_memory_bytes / 2**30, 3) if np.isfinite(r.peak_memory_bytes) else "",
                        "mean SM clock [MHz]": fmt(r.mean_sm_clock_mhz) if np.isfinite(r.mean_sm_clock_mhz) else "",
                        # Since 2026-12 (older cubes: NaN, an empty entry)
                        "mean power [W]": fmt(r.mean_power_w) if np.isfinite(r.mean_power_w) else "",
                        "max temperature [°C]": (fmt(r.max_temperature_c) if np.isfinite(r.max_temperature_c)
                                                 else ""),
                    })
        if rows:
            doc.table(pd.DataFrame(rows), f"efficiency at batch {b}", collapsed=len(rows) > 60)
        measured = self.cells["energy_j_per_image"].notna().sum()
        flagged = sum(1 for r in rows if r["above peak because"])
        if flagged:
            doc.text(f"**{flagged} cell(s) exceed the device's peak** in effective TFLOP/s; the table's "
                     f"\"above peak because\" column names the algorithms (from `decisions`).")
        doc.text(f"Energy was measured for {measured} ok cell(s)."
                 if measured else "No cell has an energy measurement (CPU runs and GPUs without an NVML "
                                  "energy counter have none).")

    # 5 -------------------------------------------------------------------------
    def section5(self):
        doc = self.doc
        doc.heading(SECTIONS[5])
        th = self.scaling_threshold
        if not self.data_parallel:
            why = (f"its schema, `{SCHEMA_1}`, predates data-parallel training" if self.cube.schema == SCHEMA_1
                   else "its gpus axis is 1 only")
            doc.text(f"This cube has no data-parallel cells ({why}). Add `[matrix] gpus = 1, 2, 4` (or "
                     f"`--gpus 1,2,4`) to a training job run on several ranks of one device key to measure "
                     f"how training scales over devices.")
            return
        t = scaling_table(self.cube.cells, th)
        doc.text(f"Training cells trained data parallel on gpus > 1 devices of one key (batch is per device; "
                 f"the group trains gpus × batch images per step). **images/s** is the group's (gpus × batch ÷ "
                 f"median step); **scaling efficiency** = images/s ÷ (gpus × images/s of the gpus = 1 cell of the "
                 f"same coordinates), 1 = linear scaling; **exposed communication** is the median time a step "
                 f"waited, after its backward pass, for gradient all-reduces that computation did not hide, and "
                 f"its share of the step. Cells below {th:g} efficiency are flagged (`--scaling-threshold`). "
                 f"Inference cells stay single-device and are not listed.")
        if t.empty:
            doc.text("No data-parallel training cell was attempted (every gpus > 1 training cell is not run).")
            return
        ok = t[t["status"] == "ok"]
        flagged = t[t["below_threshold"]]
        no_eff = ok[~np.isfinite(ok["scaling_efficiency"].astype(float))]
        doc.text(f"{len(t)} data-parallel training cell(s): {len(ok)} ok, {len(flagged)} below {th:g} "
                 f"efficiency" + (f", {len(no_eff)} ok without an efficiency (no ok gpus = 1 cell to compare "
                                  f"with)" if len(no_eff) else "") +
                 (f", {len(t) - len(ok)} without a measurement" if len(t) > len(ok) else "") + ".")
        if len(flagged):
            items = [f"**{r.device}, {r.engine}, {r.network}, {r.precision}, batch {r.batch}, "
                     f"gpus {r.gpus}**: efficiency {r.scaling_efficiency:.2f}, {r.note}"
                     for r in flagged.head(40).itertuples()]
            doc.bullets(items + ([f"… and {len(flagged) - 40} more (see the tables)"] if len(flagged) > 40 else []))
        for dev in ordered(t["device"], self.devices):
            td = t[t["device"] == dev]
            for prec in ordered(td["precision"], PRECISION_ORDER):
                tp = td[td["precision"] == prec]
                doc.heading(f"{dev} — {prec}", 3)
                if (tp["status"] == "ok").any():
                    doc.figure(plots.fig_scaling(tp, dev, prec, th),
                               f"fig5-{self._dev_id(dev)}-{prec}",
                               f"Scaling efficiency of data-parallel training on {dev}, {prec}: one bar per "
                               f"number of devices; 1 = linear scaling, the dashed line is {th:g}; hatched "
                               f"placeholders are cells without a measurement or without an efficiency.")
                else:
                    st = ", ".join(f"{label(k)} ×{v}" for k, v in tp["status"].value_counts().items())
                    reasons = sorted({n for n in tp["note"] if n})[:3]
                    doc.text(f"No figure for {prec} data-parallel training: no cell was measured ({st})" +
                             (f"; {'; '.join(reasons)}" if reasons else "") + ".")
                doc.table(self._scaling_rows(tp), f"data-parallel scaling, {dev}, {prec}",
                          collapsed=len(tp) > 40)

    def _scaling_rows(self, t):
        rows = []
        for r in t.itertuples():
            ok = r.status == "ok"
            st = label(r.status)
            eff = r.scaling_efficiency
            rows.append({
                "engine": r.engine, "network": r.network, "batch": fmt(int(r.batch)), "gpus": fmt(int(r.gpus)),
                "step [ms]": fmt(r.median_ms) if ok else st,
                "images/s (group)": fmt(r.images_per_s) if ok else st,
                "images/s (gpus = 1)": fmt(r.images_per_s_1gpu) if np.isfinite(r.images_per_s_1gpu)
                else label(r.baseline_status) if r.baseline_status != "absent" else "absent",
                "scaling efficiency": (f"{eff:.3f}" + (" (computed)" if r.efficiency_source == "computed" else "")
                                       if np.isfinite(eff) else (st if not ok else "unknown")),
                "exposed comm. [ms]": fmt(r.exposed_communication_ms) if np.isfinite(r.exposed_communication_ms)
                else (st if not ok else "not measured"),
                "share of step": f"{r.exposed_share:.1%}" if np.isfinite(r.exposed_share) else "",
                "flag": f"below {self.scaling_threshold:g}" if r.below_threshold else "",
                "note": r.note if not r.below_threshold else r.note.split(": ", 1)[-1],
            })
        return pd.DataFrame(rows)

    def _effective_matrix(self) -> pd.DataFrame:
        """One row per axis of the cube (what ran, whatever the job file said),
        with the filter and the cells attempted."""
        c = self.cube
        rows = [{"axis": d, "values": ", ".join(map(str, c.gpus if d == "gpus" else c.axis(d)))}
                for d in ("device", "engine", "network", "precision", "batch", "phase", "gpus", "replica")]
        attempted = c.cells[c.cells["status"] != "not_run"]
        rows.append({"axis": "--filter", "values": c.attrs.get("cell_filter", "") or "(none)"})
        rows.append({"axis": "cells", "values": f"{len(c.cells)} in the matrix, {len(attempted)} attempted"})
        return pd.DataFrame(rows)

    # 6 -------------------------------------------------------------------------
    def section6(self):
        doc, c = self.doc, self.cube
        doc.heading(SECTIONS[6])
        attrs = {k: v for k, v in c.attrs.items() if k != "job_file"}
        doc.table(pd.DataFrame({"attribute": list(attrs), "value": list(attrs.values())}),
                  "root attributes of the cube (versions, command line)")
        if c.attrs.get("job_file"):
            doc.text("Job file:")
            doc.code(c.attrs["job_file"])
        doc.table(self._effective_matrix(), "the matrix actually run: the cube's axes, after `--set`, flags and "
                  "`--filter` (the job file above is what was asked)")
        if not c.ranks.empty:
            r = c.ranks.copy()
            for col in ("memory_bytes",):
                if col in r.columns:
                    r["memory [GiB]"] = (pd.to_numeric(r[col], errors="coerce") / 2**30).map(lambda v: fmt(v, 4))
                    r = r.drop(columns=[col])
            hosts = sorted(set(map(str, r["host"]))) if "host" in r.columns else []
            n_segments = r["segment"].nunique() if "segment" in r.columns else 1
            per = f" over {n_segments} run segments (one row per segment and rank)" if n_segments > 1 else ""
            doc.text(f"{len(r)} rank row(s){per} on {len(hosts)} host(s): {', '.join(hosts)}.")
            doc.table(r, "ranks: one row per MPI rank (host, device, clocks, power limit, driver)")
        else:
            doc.text("The cube has no /ranks table.")
        if c.segments:
            keys = ("source", "started", "ended", "run_state", "git_revision", "command_line", "hosts",
                    "allowed_build_change", "allowed_setting_change")
            seg_rows = []
            for i, seg in enumerate(c.segments):
                row = {"segment": i}
                row.update({k: seg.get(k, "") for k in keys if any(k in x for x in c.segments)})
                uu = c.ranks[c.ranks["segment"] == i]["uuid"] if "segment" in c.ranks.columns else []
                row["GPUs (UUID)"] = ", ".join(sorted({str(u) for u in uu if str(u)})) or "none"
                m = c.measured
                row["cells measured"] = int((m["segment"] == i).sum()) if "segment" in m.columns else 0
                seg_rows.append(row)
            doc.text(f"{len(c.segments)} run segment(s): each `mpirun` or `--resume` is one; every cell records "
                     f"the segment that measured it, and /ranks holds each segment's ranks.")
            doc.table(pd.DataFrame(seg_rows), "run segments: when, which build, which hosts and GPUs")
        dev_rows = []
        for dev in self.devices:
            n_ranks = int((c.ranks["device_key"] == dev).sum()) if "device_key" in c.ranks.columns else 0
            dev_rows.append({"device key": dev, "ranks": n_ranks,
                             "engines run": ", ".join(engines_on(self.all_cells, dev)) or "none"})
        doc.table(pd.DataFrame(dev_rows), "devices (device keys)")
        cells = c.cells
        thr = cells[(cells["status"] == "ok") & (cells["throttled"] == 1)]
        unknown = int(((cells["status"] == "ok") & (cells["throttled"] < 0)).sum())
        doc.heading("Throttled cells", 3)
        if len(thr):
            t = thr[["device", "engine", "network", "precision", "batch", "phase"] +
                    (["gpus"] if self.data_parallel else []) + ["replica", "median_ms", "mean_sm_clock_mhz",
                                                                "rank"]].copy()
            t["median_ms"] = t["median_ms"].map(fmt)
            t["mean_sm_clock_mhz"] = t["mean_sm_clock_mhz"].map(fmt)
            doc.text(f"**{len(thr)} cell(s) ran while the device throttled** (clocks fell or throttle reasons "
                     f"fired): their times may be pessimistic. Check cooling and power limits.")
            doc.table(t, "throttled cells", collapsed=len(t) > 30)
        else:
            doc.text("No ok cell was flagged as throttled.")
        if unknown:
            doc.text(f"Throttling unknown (no telemetry, e.g. CPU) for {unknown} ok cell(s).")
        if c.missing_vars:
            doc.text(f"Variables absent from this cube (shown as unknown): {', '.join(c.missing_vars)}.")


PROVENANCE_ATTRS = ("git_revision", "crossbench_version", "created", "cuda_runtime_version", "cuda_driver_version",
                    "cudnn_version", "cublas_version", "mpi_version", "hdf5_version", "nvml")


def with_provenance(cube: Cube, cells: pd.DataFrame) -> pd.DataFrame:
    """`cells` with run-level provenance columns: the cube's root attributes
    (revision, versions, creation time) and, per cell, the host and GPU UUID of
    the rank that ran it (from /ranks)."""
    out = cells.copy()
    for name in PROVENANCE_ATTRS:
        out[name] = cube.attrs.get(name, "")
    origin = cube.origins(out)
    # Per cell where the cube knows it (schema 4: its segment's build and its /ranks row).
    for col in ("host", "device_uuid", "git_revision", "segment", "source"):
        out[col] = origin[col]
    return out


def write_report(cube: Cube, out_dir, **kw) -> tuple[Path, Path, list[Path]]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rep = Report(cube, out, **kw)
    doc = rep.build()
    md = out / "report.md"
    html = out / "report.html"
    md.write_text(doc.markdown(out))
    html.write_text(doc.html())
    return md, html, doc.figures
