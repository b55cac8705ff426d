"""`procurement CUBE --prices FILE`: images/s per price and per watt, and a Pareto plot.

The prices file (documented in analysis/README.md) is CSV:

    # comment lines start with '#'; a header line is optional
    device,price,power_w
    A100-SXM4,15000,400
    H100,30000
    Xeon,9000,350

`device` is a device key of the cube or a unique, case-insensitive substring of
one; `price` is a number in any currency (name it with --currency); `power_w`
(optional) is the power to charge the device with, in watts.  Without it, the
power is the mean power measured during the workload's cells (energy per image
× images/s) when the cube has energy, else the rank's power limit from /ranks,
else unknown; the table says which, and names the engines whose cells carry
no telemetry.  A second table gives the power of every engine on its own.

Each device is taken at its best precision (the one with the highest
geometric-mean images/s over the workload) unless --precision names one or
--all-precisions lists every precision.  Cost of ownership = price + energy:
power × 24 h × 365 × --years (default 3) × --kwh-price (default 0.15 per kWh,
in the price's currency), the device running flat out.

The throughput is a single device's: only the cells with gpus == 1 count (a
data-parallel group's images/s is that of several devices, which one price does
not buy; `scaling` and the report's section 6 show what more devices add).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import plots
from .analysis import (STUDY_NETWORKS, collapse_replicas, engines_on, focus_batch, geomean, label,
                       ordered, single_device, PRECISION_ORDER, NETWORK_ORDER)
from .cube import Cube, CubeError, resolve_name


@dataclass
class Price:
    device: str
    price: float
    power_w: float | None
    line: int


def read_prices(path, devices: list[str]) -> dict[str, Price]:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise CubeError(f"prices file {path}: {e.strerror or e}") from None
    out: dict[str, Price] = {}
    rows = list(csv.reader(io.StringIO(text)))
    for lineno, row in enumerate(rows, start=1):
        row = [c.strip() for c in row]
        if not row or not any(row) or row[0].startswith("#"):
            continue
        if len(row) < 2:
            raise CubeError(f"{path}:{lineno}: expected 'device,price[,power_w]', got {','.join(row)!r}")
        try:
            price = float(row[1])
        except ValueError:
            if row[0].lower() in ("device", "device_key", "key") and not out:
                continue  # header
            raise CubeError(f"{path}:{lineno}: price {row[1]!r} is not a number") from None
        if not math.isfinite(price) or price <= 0:
            raise CubeError(f"{path}:{lineno}: price must be a positive number, got {row[1]!r}")
        power = None
        if len(row) >= 3 and row[2]:
            try:
                power = float(row[2])
            except ValueError:
                raise CubeError(f"{path}:{lineno}: power_w {row[2]!r} is not a number") from None
            if not math.isfinite(power) or power <= 0:
                raise CubeError(f"{path}:{lineno}: power_w must be a positive number of watts, got {row[2]!r}")
        try:
            key = resolve_name(row[0], devices, "device")
        except CubeError as e:
            raise CubeError(f"{path}:{lineno}: {e}") from None
        if key in out:
            raise CubeError(f"{path}:{lineno}: device {key!r} already priced on line {out[key].line}")
        out[key] = Price(key, price, power, lineno)
    if not out:
        raise CubeError(f"{path}: no prices found (expected lines 'device,price[,power_w]')")
    return out


def _pareto(df: pd.DataFrame) -> pd.Series:
    """True for devices that no other device beats on both price (lower) and throughput (higher)."""
    flags = []
    for r in df.itertuples():
        if not (np.isfinite(r.images_per_s) and np.isfinite(r.price)):
            flags.append(False)
            continue
        dominated = any(
            (o.price <= r.price and o.images_per_s >= r.images_per_s and
             (o.price < r.price or o.images_per_s > r.images_per_s))
            for o in df.itertuples() if o.Index != r.Index and np.isfinite(o.images_per_s) and np.isfinite(o.price))
        flags.append(not dominated)
    return pd.Series(flags, index=df.index)


HOURS_PER_YEAR = 24 * 365
DEFAULT_KWH_PRICE = 0.15   # [currency/kWh]
DEFAULT_YEARS = 3.0
NO_TELEMETRY = "no telemetry: the cells recorded no energy (no NVML energy counter for this engine's runs)"


def _workload_cells(cube: Cube):
    # One device's throughput for one device's price: the single-device cells.
    cells = single_device(collapse_replicas(cube.cells))
    if cells.empty:
        raise CubeError(f"the cube has no single-device cells (its gpus axis: {', '.join(map(str, cube.gpus))}); "
                        f"procurement compares one device's throughput against its price")
    return cells


def _networks(cells, network):
    nets_in_cube = ordered(cells["network"].unique(), NETWORK_ORDER)
    if network:
        if network not in nets_in_cube:
            raise CubeError(f"network {network!r} is not in the cube (networks: {', '.join(nets_in_cube)})")
        return [network], network
    networks = [n for n in STUDY_NETWORKS if n in nets_in_cube] or nets_in_cube
    return networks, f"geometric mean over {', '.join(networks)}"


def device_throughput(w: pd.DataFrame, dev: str, networks: list[str], engines: list[str]) -> dict:
    """The geometric-mean images/s of `dev` over `networks` with the fastest of
    `engines` per network (`w`: the cells of one phase, precision and batch),
    and the power measured on the cells used."""
    d = w[(w["device"] == dev) & w["engine"].isin(engines)]
    per_net, used, problems, watts, silent = [], [], [], [], []
    for n in networks:
        g = d[d["network"] == n]
        ok = g[g["status"] == "ok"]
        if len(ok):
            best = ok.loc[ok["images_per_s"].idxmax()]
            per_net.append(best["images_per_s"])
            used.append(best["engine"])
            if np.isfinite(best["energy_j_per_image"]):
                watts.append(best["energy_j_per_image"] * best["images_per_s"])
            else:
                silent.append((n, best["engine"]))
        else:
            st = sorted({label(s) for s in g["status"]}) or [label("not_run")]
            problems.append(f"{n}: {'/'.join(st)}")
    return {"images_per_s": geomean(per_net) if not problems else float("nan"),
            "engines": ", ".join(dict.fromkeys(used)) or "-", "problems": problems, "watts": watts,
            "silent": silent, "networks": len(networks)}


def _precisions(cells, dev=None):
    c = cells if dev is None else cells[cells["device"] == dev]
    return ordered(c.loc[c["status"] != "not_run", "precision"].unique(), PRECISION_ORDER)


def best_precision(w_all: pd.DataFrame, dev: str, networks, engines) -> tuple[str | None, dict | None]:
    """The precision at which `dev` has the highest throughput over the whole workload."""
    best = (None, None)
    for prec in _precisions(w_all, dev):
        r = device_throughput(w_all[w_all["precision"] == prec], dev, networks, engines)
        if np.isfinite(r["images_per_s"]) and (best[1] is None or r["images_per_s"] > best[1]["images_per_s"]):
            best = (prec, r)
    return best


def _phase(cells, phase):
    phases = sorted(cells["phase"].unique())
    if phase is None:
        phase = "training" if "training" in phases else phases[0]
    if phase not in phases:
        raise CubeError(f"phase {phase!r} is not in the cube (phases: {', '.join(phases)})")
    return phase


def device_ranking(cube: Cube, phase: str | None = None, batch: int | None = None,
                   network: str | None = None) -> pd.DataFrame:
    """Every device at its best precision, fastest engine per network, ranked by
    geometric-mean images/s (unranked devices last, with the reason)."""
    cells = _workload_cells(cube)
    phase = _phase(cells, phase)
    batch = focus_batch(cells, batch)
    networks, what = _networks(cells, network)
    w = cells[(cells["phase"] == phase) & (cells["batch"] == batch)]
    rows = []
    for dev in cube.devices:
        prec, r = best_precision(w, dev, networks, engines_on(cells, dev))
        if r is None:
            precs = _precisions(w, dev)
            r = device_throughput(w[w["precision"] == precs[0]], dev, networks, engines_on(cells, dev)) if precs \
                else {"images_per_s": float("nan"), "engines": "-", "problems": ["nothing attempted"]}
        rows.append({"device": dev, "precision": prec or "-", "images_per_s": r["images_per_s"],
                     "engines": r["engines"], "status_text": "ok" if prec else "; ".join(r["problems"])})
    t = pd.DataFrame(rows).sort_values("images_per_s", ascending=False, na_position="last").reset_index(drop=True)
    t.attrs["networks"] = ", ".join(networks)
    return t


def procurement(cube: Cube, prices: dict[str, Price], network: str | None = None, phase: str | None = None,
                precision: str | None = None, batch: int | None = None, engine: str | None = None,
                all_precisions: bool = False, kwh_price: float = DEFAULT_KWH_PRICE,
                years: float = DEFAULT_YEARS):
    """One row per device at its best precision (or at `precision`, or one row
    per device and precision with `all_precisions`), with throughput, power,
    energy cost and cost of ownership; `t.attrs["engines"]`: the same per engine."""
    cells = _workload_cells(cube)
    phase = _phase(cells, phase)
    precs = _precisions(cells)
    if precision is not None and precision not in set(cells["precision"]):
        raise CubeError(f"precision {precision!r} is not in the cube (precisions: {', '.join(precs)})")
    if not (kwh_price >= 0 and math.isfinite(kwh_price)):
        raise CubeError(f"--kwh-price must be a non-negative number, got {kwh_price!r}")
    if not (years >= 0 and math.isfinite(years)):
        raise CubeError(f"--years must be a non-negative number, got {years!r}")
    try:
        batch = focus_batch(cells, batch)
    except ValueError as e:
        raise CubeError(str(e)) from None
    networks, what = _networks(cells, network)
    if engine and engine not in set(cells["engine"]):
        raise CubeError(f"engine {engine!r} is not in the cube (engines: {', '.join(sorted(set(cells['engine'])))})")
    how_precision = ("every precision" if all_precisions else precision if precision
                     else "each device at its best precision")
    workload = f"{what}; {phase}, {how_precision}, batch {batch}; " + (
        f"engine {engine}" if engine else "each device's fastest engine per network")

    w_all = cells[(cells["phase"] == phase) & (cells["batch"] == batch)]
    rows, engine_rows = [], []
    for dev in cube.devices:
        engines = [engine] if engine else engines_on(cells, dev)
        if all_precisions:
            chosen = _precisions(w_all, dev) or [precision or (precs[0] if precs else "fp32")]
        elif precision:
            chosen = [precision]
        else:
            best, _ = best_precision(w_all, dev, networks, engines)
            chosen = [best or (_precisions(w_all, dev) or precs or ["fp32"])[0]]
        for prec in chosen:
            w = w_all[w_all["precision"] == prec]
            r = device_throughput(w, dev, networks, engines)
            rows.append(_row(cube, dev, prec, r, prices.get(dev), kwh_price, years))
            for e in engines:
                engine_rows.append(_engine_row(dev, prec, e, device_throughput(w, dev, networks, [e])))
    t = pd.DataFrame(rows)
    t["pareto"] = _pareto(t)
    shorts = [plots.short_device(d) for d in t["device"]]
    if len(set(zip(shorts, t["precision"]))) < len(shorts):   # two keys of one model (e.g. a tagged one)
        shorts = list(t["device"])
    t["short"] = shorts
    t.attrs["engines"] = pd.DataFrame(engine_rows)
    t.attrs["kwh_price"], t.attrs["years"] = kwh_price, years
    return t, workload


def _row(cube, dev, prec, r, price, kwh_price, years) -> dict:
    ips = r["images_per_s"]
    power, power_src = None, "unknown"
    measured = len(r["watts"])
    silent = sorted({e for _, e in r["silent"]})
    if price and price.power_w:
        power, power_src = price.power_w, "prices file"
    elif measured:
        power = float(np.mean(r["watts"]))
        power_src = "measured (energy × images/s)" if not silent else (
            f"measured on {measured} of {r['networks']} networks; no telemetry for "
            f"{', '.join(n for n, _ in r['silent'])} ({', '.join(silent)})")
    else:
        limit = None
        if "device_key" in cube.ranks.columns and "power_limit_w" in cube.ranks.columns:
            lim = pd.to_numeric(cube.ranks.loc[cube.ranks["device_key"] == dev, "power_limit_w"], errors="coerce")
            lim = lim[lim > 0]
            limit = float(lim.max()) if len(lim) else None
        why = f"no telemetry for {', '.join(silent)}" if silent else "no telemetry"
        if limit:
            power, power_src = limit, f"power limit (/ranks); {why}"
        elif np.isfinite(ips):
            power_src = f"unknown: {why} and no power limit in /ranks; give power_w in the prices file"
    problems = r["problems"]
    status_text = "ok" if not problems else "; ".join(problems)
    if not price:
        status_text = ("no price in the prices file" if not problems else status_text + "; no price")
    energy_cost = power / 1000 * HOURS_PER_YEAR * years * kwh_price if power else np.nan
    tco = price.price + energy_cost if price and power else np.nan
    return {
        "device": dev, "precision": prec, "engines": r["engines"],
        "images_per_s": ips, "price": price.price if price else np.nan,
        "power_w": power if power else np.nan, "power_source": power_src,
        "energy_cost": energy_cost, "tco": tco,
        "images_per_s_per_1k_price": ips / price.price * 1000 if price else np.nan,
        "images_per_s_per_1k_tco": ips / tco * 1000 if np.isfinite(tco) else np.nan,
        "images_per_s_per_w": ips / power if power else np.nan,
        "status_text": status_text,
    }


def _engine_row(dev, prec, engine, r) -> dict:
    ips = r["images_per_s"]
    if r["watts"] and not r["silent"]:
        watts, src = float(np.mean(r["watts"])), "measured (energy × images/s)"
    elif r["watts"]:
        watts, src = float(np.mean(r["watts"])), f"measured on {len(r['watts'])} of {r['networks']} networks"
    else:
        watts, src = np.nan, NO_TELEMETRY if not r["problems"] else "not measured"
    return {"device": dev, "precision": prec, "engine": engine, "images_per_s": ips, "power_w": watts,
            "images_per_s_per_w": ips / watts if np.isfinite(watts) else np.nan, "power_source": src,
            "status_text": "ok" if not r["problems"] else "; ".join(r["problems"])}


def render(t: pd.DataFrame, workload: str, currency: str) -> str:
    def f(v, d=4):
        if not (isinstance(v, (float, int, np.floating, np.integer)) and np.isfinite(v)):
            return ""
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{d}g}"
    kwh, years = t.attrs.get("kwh_price", DEFAULT_KWH_PRICE), t.attrs.get("years", DEFAULT_YEARS)
    head = ["device", "precision", "engines", "images/s", f"price [{currency}]", f"images/s per 1000 {currency}",
            "power [W]", "power from", "images/s per W", f"energy [{currency}]", f"cost of ownership [{currency}]",
            f"images/s per 1000 {currency} owned", "Pareto", "note"]
    lines = [f"workload: {workload}",
             f"cost of ownership = price + energy at {kwh:g} {currency}/kWh (--kwh-price) for {years:g} years "
             f"(--years) at full load, 24 h a day",
             "", "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    order = "images_per_s_per_1k_tco" if t["images_per_s_per_1k_tco"].notna().any() else "images_per_s_per_1k_price"
    for r in t.sort_values(order, ascending=False, na_position="last").itertuples():
        ips = f(r.images_per_s) if np.isfinite(r.images_per_s) else "not measured"
        lines.append("| " + " | ".join([
            r.device.replace("|", "\\|"), r.precision, r.engines, ips, f(r.price, 8), f(r.images_per_s_per_1k_price),
            f(r.power_w), r.power_source.replace("|", "\\|"), f(r.images_per_s_per_w), f(r.energy_cost),
            f(r.tco), f(r.images_per_s_per_1k_tco), "yes" if r.pareto else "",
            "" if r.status_text == "ok" else r.status_text.replace("|", "\\|")]) + " |")
    e = t.attrs.get("engines")
    if e is not None and len(e):
        head = ["device", "precision", "engine", "images/s", "power [W]", "images/s per W", "power from", "note"]
        lines += ["", "power per engine (the same workload, one engine at a time):", "",
                  "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        for r in e.itertuples():
            lines.append("| " + " | ".join([
                r.device.replace("|", "\\|"), r.precision, r.engine,
                f(r.images_per_s) if np.isfinite(r.images_per_s) else "not measured", f(r.power_w),
                f(r.images_per_s_per_w), r.power_source,
                "" if r.status_text == "ok" else r.status_text.replace("|", "\\|")]) + " |")
    return "\n".join(lines)


def write(t: pd.DataFrame, workload: str, currency: str, out_dir) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig = plots.fig_pareto(t, workload, currency)
    plots.tidy_labels(fig)
    png = out / "pareto.png"
    fig.savefig(png, dpi=fig.dpi, facecolor="white")
    svg = png.with_suffix(".svg")   # the same figure as vector graphics (Document.figure does the same)
    fig.savefig(svg, facecolor="white")
    import matplotlib.pyplot as plt
    plt.close(fig)
    md = out / "procurement.md"
    md.write_text("# crossbench procurement\n\n" + render(t, workload, currency) +
                  "\n\n![throughput against price](pareto.png) ([SVG](pareto.svg))\n")
    csvp = out / "procurement.csv"
    t.drop(columns=["short"]).to_csv(csvp, index=False)
    engines_csv = out / "procurement_engines.csv"
    t.attrs.get("engines", pd.DataFrame()).to_csv(engines_csv, index=False)
    return [md, csvp, engines_csv, png, svg]
