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
else unknown.

The throughput is a single device's: only the cells with gpus == 1 count (a
data-parallel group's images/s is that of several devices, which one price does
not buy; `scaling` and the report's section 5 show what more devices add).
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


def procurement(cube: Cube, prices: dict[str, Price], network: str | None = None, phase: str | None = None,
                precision: str | None = None, batch: int | None = None, engine: str | None = None):
    # One device's throughput for one device's price: the single-device cells.
    cells = single_device(collapse_replicas(cube.cells))
    if cells.empty:
        raise CubeError(f"the cube has no single-device cells (its gpus axis: {', '.join(map(str, cube.gpus))}); "
                        f"procurement compares one device's throughput against its price")
    phases = sorted(cells["phase"].unique())
    if phase is None:
        phase = "training" if "training" in phases else phases[0]
    if phase not in phases:
        raise CubeError(f"phase {phase!r} is not in the cube (phases: {', '.join(phases)})")
    precs = ordered(cells.loc[cells["status"] != "not_run", "precision"].unique(), PRECISION_ORDER)
    if precision is None:
        precision = "fp32" if "fp32" in precs else (precs[0] if precs else "fp32")
    elif precision not in set(cells["precision"]):
        raise CubeError(f"precision {precision!r} is not in the cube (precisions: {', '.join(precs)})")
    try:
        batch = focus_batch(cells, batch)
    except ValueError as e:
        raise CubeError(str(e)) from None
    nets_in_cube = ordered(cells["network"].unique(), NETWORK_ORDER)
    if network:
        if network not in nets_in_cube:
            raise CubeError(f"network {network!r} is not in the cube (networks: {', '.join(nets_in_cube)})")
        networks = [network]
        what = network
    else:
        networks = [n for n in STUDY_NETWORKS if n in nets_in_cube] or nets_in_cube
        what = f"geometric mean over {', '.join(networks)}"
    if engine and engine not in set(cells["engine"]):
        raise CubeError(f"engine {engine!r} is not in the cube (engines: {', '.join(sorted(set(cells['engine'])))})")
    workload = f"{what}; {phase}, {precision}, batch {batch}; " + (
        f"engine {engine}" if engine else "each device's fastest engine per network")

    w = cells[(cells["phase"] == phase) & (cells["precision"] == precision) & (cells["batch"] == batch)]
    rows = []
    for dev in cube.devices:
        engines = [engine] if engine else engines_on(cells, dev)
        d = w[(w["device"] == dev) & w["engine"].isin(engines)]
        per_net, used, problems, watts = [], [], [], []
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
                st = sorted({label(s) for s in g["status"]}) or [label("not_run")]
                problems.append(f"{n}: {'/'.join(st)}")
        ips = geomean(per_net) if not problems else float("nan")
        price = prices.get(dev)
        power, power_src = None, "unknown"
        if price and price.power_w:
            power, power_src = price.power_w, "prices file"
        elif watts and len(watts) == len(networks):
            power, power_src = float(np.mean(watts)), "measured (energy × images/s)"
        elif "device_key" in cube.ranks.columns and "power_limit_w" in cube.ranks.columns:
            lim = pd.to_numeric(cube.ranks.loc[cube.ranks["device_key"] == dev, "power_limit_w"], errors="coerce")
            lim = lim[lim > 0]
            if len(lim):
                power, power_src = float(lim.max()), "power limit (/ranks)"
        status_text = "ok" if not problems else "; ".join(problems)
        if not price:
            status_text = ("no price in the prices file" if not problems else status_text + "; no price")
        rows.append({
            "device": dev, "engines": ", ".join(dict.fromkeys(used)) or "-",
            "images_per_s": ips, "price": price.price if price else np.nan,
            "power_w": power if power else np.nan, "power_source": power_src,
            "images_per_s_per_1k_price": ips / price.price * 1000 if price else np.nan,
            "images_per_s_per_w": ips / power if power else np.nan,
            "status_text": status_text,
        })
    t = pd.DataFrame(rows)
    t["pareto"] = _pareto(t)
    shorts = [plots.short_device(d) for d in t["device"]]
    if len(set(shorts)) < len(shorts):   # two keys of one model (e.g. a tagged, power-capped one)
        shorts = [d if len(d) <= 60 else d[:59] + "…" for d in t["device"]]
    t["short"] = shorts
    return t, workload


def render(t: pd.DataFrame, workload: str, currency: str) -> str:
    def f(v, d=4):
        return f"{v:.{d}g}" if isinstance(v, (float, int)) and np.isfinite(v) else ""
    head = ["device", "engines", "images/s", f"price [{currency}]", f"images/s per 1000 {currency}",
            "power [W]", "power from", "images/s per W", "Pareto", "note"]
    lines = [f"workload: {workload}", "",
             "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in t.sort_values("images_per_s_per_1k_price", ascending=False, na_position="last").itertuples():
        ips = f(r.images_per_s) if np.isfinite(r.images_per_s) else "not measured"
        lines.append("| " + " | ".join([
            r.device.replace("|", "\\|"), r.engines, ips, f(r.price, 8), f(r.images_per_s_per_1k_price),
            f(r.power_w), r.power_source, f(r.images_per_s_per_w), "yes" if r.pareto else "",
            "" if r.status_text == "ok" else r.status_text.replace("|", "\\|")]) + " |")
    return "\n".join(lines)


def write(t: pd.DataFrame, workload: str, currency: str, out_dir) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig = plots.fig_pareto(t, workload, currency)
    png = out / "pareto.png"
    fig.savefig(png, dpi=fig.dpi, facecolor="white")
    import matplotlib.pyplot as plt
    plt.close(fig)
    md = out / "procurement.md"
    md.write_text("# crossbench procurement\n\n" + render(t, workload, currency) +
                  "\n\n![throughput against price](pareto.png)\n")
    csvp = out / "procurement.csv"
    t.drop(columns=["short"]).to_csv(csvp, index=False)
    return [md, csvp, png]
