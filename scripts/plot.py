#!/usr/bin/env python3
"""Turns criterion's results from the peer benches into ratio tables and a plot.

Reads every `<criterion dir>/**/new/benchmark.json` (the id and throughput of a
bench) with its `estimates.json` (the time per iteration), then

* prints Markdown tables of ratios to stdout: the codec beside the crc32c + copy bound
  and beside hidane-core, non-durable appends beside commitlog and a bare `write`;
* writes an SVG of throughput against record size for walcodec, its peers and the
  bound (plain SVG written here, so only Python 3 is needed).

The time per iteration is criterion's median estimate: on a shared, noisy machine the
median moves less than the mean. Every ratio compares benches of the same run.

    python3 scripts/plot.py [--criterion DIR] [--svg docs/throughput.svg]

DIR defaults to `$CARGO_TARGET_DIR/criterion` when that variable is set, else
`benches/peers/target/criterion`.
"""

import argparse
import json
import math
import os
import sys
from pathlib import Path

SIZES = ["100B", "1KiB", "32KiB", "1MiB"]
SIZE_LABELS = {"100B": "100 B", "1KiB": "1 KiB", "32KiB": "32 KiB", "1MiB": "1 MiB"}
SIZE_BYTES = {"100B": 100, "1KiB": 1 << 10, "32KiB": 32 << 10, "1MiB": 1 << 20}


def load(criterion_dir):
    """{(group_id, function_id): (per-second rate, unit)} from criterion's output."""
    results = {}
    for bench in sorted(Path(criterion_dir).glob("**/new/benchmark.json")):
        meta = json.loads(bench.read_text())
        estimates = json.loads((bench.parent / "estimates.json").read_text())
        nanos = estimates["median"]["point_estimate"]
        throughput = meta.get("throughput") or {}
        if "Bytes" in throughput:
            rate, unit = throughput["Bytes"] / (nanos * 1e-9), "bytes"
        elif "Elements" in throughput:
            rate, unit = throughput["Elements"] / (nanos * 1e-9), "elements"
        else:
            rate, unit = 1 / (nanos * 1e-9), "iterations"
        function = meta["function_id"] or ""
        if meta.get("value_str"):
            function = f"{function}/{meta['value_str']}"
        results[(meta["group_id"], function)] = (rate, unit)
    return results


def rate(results, group, function):
    found = results.get((group, function))
    return found[0] if found else None


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "n/a"


def gbps(bytes_per_second):
    return f"{bytes_per_second / 1e9:.2f}" if bytes_per_second else "n/a"


def per_second(count):
    if not count:
        return "n/a"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if count >= scale:
            return f"{count / scale:.3g}{suffix}"
    return f"{count:.3g}"


def codec_tables(results):
    lines = []
    rows = []
    for size in SIZES:
        group = f"codec/{size}"
        r = {f: rate(results, group, f) for _, f in results if _ == group}
        if not r:
            continue
        rows.append((size, r))
    if not rows:
        return lines
    lines += [
        "Codec, in memory (about 4 MiB of records per iteration). Ratios to the bound "
        "(crc32c of the records + one copy of them) unless said otherwise; GB/s are "
        "record bytes.",
        "",
        "| record | bound GB/s | encode | hidane-core encode | decode | hidane-core decode "
        "| FramedRead 8 KiB / decode | FramedRead 64 KiB / decode | crc-fast / crc32c |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, r in rows:
        bound = r.get("bound_crc32c_copy")
        decode = r.get("decode_walcodec")
        lines.append(
            f"| {size} | {gbps(bound)} | {ratio(r.get('encode_walcodec'), bound)} "
            f"| {ratio(r.get('encode_hidane'), bound)} | {ratio(decode, bound)} "
            f"| {ratio(r.get('decode_hidane'), bound)} "
            f"| {ratio(r.get('decode_walcodec_framed_8KiB'), decode)} "
            f"| {ratio(r.get('decode_walcodec_framed_64KiB'), decode)} "
            f"| {ratio(r.get('crc_fast_only'), r.get('crc32c_only'))} |"
        )
    lines += [
        "",
        "Records per second, and walcodec beside hidane-core:",
        "",
        "| record | encode rec/s | decode rec/s | FramedRead 64 KiB rec/s "
        "| encode vs hidane-core | decode vs hidane-core |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for size, r in rows:
        n = SIZE_BYTES[size]
        records = lambda f: r.get(f) / n if r.get(f) else None  # noqa: E731
        lines.append(
            f"| {size} | {per_second(records('encode_walcodec'))} "
            f"| {per_second(records('decode_walcodec'))} "
            f"| {per_second(records('decode_walcodec_framed_64KiB'))} "
            f"| {ratio(r.get('encode_walcodec'), r.get('encode_hidane'))} "
            f"| {ratio(r.get('decode_walcodec'), r.get('decode_hidane'))} |"
        )
    return lines


def append_table(results):
    rows = []
    for size in SIZES:
        group = f"append/{size}"
        r = {f: rate(results, group, f) for _, f in results if _ == group}
        if r:
            rows.append((size, r))
    if not rows:
        return []
    lines = [
        "Non-durable appends to a file (done when `write` returns). Ratios to one bare "
        "`write` of the record per append, and walcodec beside commitlog:",
        "",
        "| record | bound GB/s | walcodec | commitlog | walcodec vs commitlog "
        "| walcodec appends/s | commitlog appends/s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for size, r in rows:
        n = SIZE_BYTES[size]
        bound, ours, theirs = (
            r.get("bound_write"),
            r.get("walcodec_encode_write"),
            r.get("commitlog"),
        )
        lines.append(
            f"| {size} | {gbps(bound)} | {ratio(ours, bound)} | {ratio(theirs, bound)} "
            f"| {ratio(ours, theirs)} | {per_second(ours / n if ours else None)} "
            f"| {per_second(theirs / n if theirs else None)} |"
        )
    return lines


# --- SVG -----------------------------------------------------------------------------

CODEC_SERIES = [
    ("bound_crc32c_copy", "bound: crc32c + copy", "#000000", "6,4"),
    ("encode_walcodec", "walcodec encode", "#1f77b4", None),
    ("decode_walcodec", "walcodec decode", "#2ca02c", None),
    ("decode_walcodec_framed_64KiB", "walcodec FramedRead, 64 KiB reads", "#17becf", "2,3"),
    ("encode_hidane", "hidane-core encode", "#d62728", None),
    ("decode_hidane", "hidane-core decode", "#ff7f0e", None),
]

APPEND_SERIES = [
    ("bound_write", "bound: one write per record", "#000000", "6,4"),
    ("walcodec_encode_write", "walcodec encode + write", "#1f77b4", None),
    ("commitlog", "commitlog append_msg", "#9467bd", None),
]


def panel(results, prefix, series, title, x0, width, height):
    """One log-log panel; returns its SVG elements."""
    points = {}
    for function, *_ in series:
        line = []
        for i, size in enumerate(SIZES):
            value = rate(results, f"{prefix}/{size}", function)
            if value:
                line.append((i, value / 1e9))
        if line:
            points[function] = line
    if not points:
        return []
    values = [v for line in points.values() for _, v in line]
    low = 10 ** math.floor(math.log10(min(values)))
    high = 10 ** math.ceil(math.log10(max(values)))
    left, right, top, bottom = x0 + 64, x0 + width - 16, 40, height - 150
    def x(i):
        return left + (right - left) * i / (len(SIZES) - 1)
    def y(v):
        return bottom - (bottom - top) * (math.log10(v) - math.log10(low)) / (
            math.log10(high) - math.log10(low)
        )
    out = [
        f'<text x="{(left + right) / 2}" y="22" text-anchor="middle" '
        f'font-size="15" font-weight="bold">{title}</text>',
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" '
        'fill="none" stroke="#888"/>',
    ]
    decade = low
    while decade <= high * 1.0001:
        for m in range(1, 10):
            v = decade * m
            if v > high * 1.0001:
                break
            yy = y(v)
            if m == 1:
                label = f"{v:g}"
                out.append(
                    f'<line x1="{left}" x2="{right}" y1="{yy:.1f}" y2="{yy:.1f}" '
                    'stroke="#ccc"/>'
                )
                out.append(
                    f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end" '
                    f'font-size="12">{label}</text>'
                )
            else:
                out.append(
                    f'<line x1="{left}" x2="{left + 5}" y1="{yy:.1f}" y2="{yy:.1f}" '
                    'stroke="#888"/>'
                )
        decade *= 10
    for i, size in enumerate(SIZES):
        out.append(
            f'<text x="{x(i):.1f}" y="{bottom + 18}" text-anchor="middle" '
            f'font-size="12">{SIZE_LABELS[size]}</text>'
        )
    out.append(
        f'<text x="{(left + right) / 2}" y="{bottom + 38}" text-anchor="middle" '
        'font-size="12">record size</text>'
    )
    out.append(
        f'<text transform="translate({x0 + 16},{(top + bottom) / 2}) rotate(-90)" '
        'text-anchor="middle" font-size="12">GB/s of record bytes (log scale)</text>'
    )
    legend_y = bottom + 58
    for function, label, color, dash in series:
        line = points.get(function)
        if not line:
            continue
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in line)
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{color}" '
            f'stroke-width="2"{dash_attr}/>'
        )
        for i, v in line:
            out.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="{color}"/>')
        out.append(
            f'<line x1="{left}" x2="{left + 28}" y1="{legend_y}" y2="{legend_y}" '
            f'stroke="{color}" stroke-width="2"{dash_attr}/>'
        )
        out.append(
            f'<text x="{left + 36}" y="{legend_y + 4}" font-size="12">{label}</text>'
        )
        legend_y += 16
    return out


def svg(results):
    width, height = 480, 480
    panels = [
        panel(results, "codec", CODEC_SERIES, "Codec, in memory", 0, width, height),
        panel(results, "append", APPEND_SERIES, "Appends to a file (not synced)", 0, width, height),
    ]
    panels = [p for p in panels if p]
    if not panels:
        return None
    total = width * len(panels)
    body = []
    for n, p in enumerate(panels):
        body.append(f'<g transform="translate({n * width},0)">')
        body.extend(p)
        body.append("</g>")
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="{height}" '
            f'viewBox="0 0 {total} {height}" font-family="sans-serif">',
            f'<rect width="{total}" height="{height}" fill="white"/>',
            *body,
            "</svg>",
            "",
        ]
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = (
        Path(os.environ["CARGO_TARGET_DIR"]) / "criterion"
        if os.environ.get("CARGO_TARGET_DIR")
        else Path("benches/peers/target/criterion")
    )
    parser.add_argument("--criterion", type=Path, default=default)
    parser.add_argument("--svg", type=Path, default=Path("docs/throughput.svg"))
    args = parser.parse_args()
    if not args.criterion.is_dir():
        sys.exit(f"no criterion results in {args.criterion}: run the peer benches first")
    results = load(args.criterion)
    lines = codec_tables(results)
    appends = append_table(results)
    if lines and appends:
        lines.append("")
    lines += appends
    print("\n".join(lines))
    drawing = svg(results)
    if drawing:
        args.svg.parent.mkdir(parents=True, exist_ok=True)
        args.svg.write_text(drawing)
        print(f"\nwrote {args.svg}", file=sys.stderr)


if __name__ == "__main__":
    main()
