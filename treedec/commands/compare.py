"""`python -m treedec compare runs=DIR [runs=[A,B]] [baseline=STRATEGY|KEY:VALUE] [out=DIR]`: one table
across the finished jobs of one or several sweeps, read from their `result.json` files
(the results store: no model is loaded, nothing is decoded).

Columns: the sweep (when several), the keys swept in it (those whose value differs between
its jobs), the strategy, then each figure with its ratio against the job's baseline. The
baseline of a job is the job of the same sweep whose KEY is VALUE and whose other swept keys
are equal (`baseline=padoc` means strategy padoc, `baseline=data.pages:100` another key's
value; default: the job's format's baseline strategy, `sequential`, or `crops` in a two-stage
format, `treedec.formats.Format.baseline`);
where there is none, a `run compare=X` job's own in-process baseline. Ratios read "> 1 is
better": steps, depth and latency baseline / job, pages/s and accepted per step job /
baseline; quality figures as a difference job - baseline."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from treedec.cpu import describe
from treedec.errors import UserError
from treedec.formats import get_format
from treedec.report.html import write_report
from treedec.report.lead import Mark, direction
from treedec.results.store import NOT_IN_KEY, results
from treedec.run.outputs import RunOutput
from treedec.run.remote import is_url

# (summary key, label, how it compares: "down" = lower is better, "up" = higher, "delta" = difference)
FIGURES = (("text_edit", "text edit", "delta"),
           ("text_edit_vs_truth", "text edit - truth's", "delta"),  # forced runs: above the ground truth's own score
           ("layout_f1", "layout F1", "delta"),
           ("median_steps", "steps", "down"), ("mean_steps", "mean steps", "down"),
           ("median_root_steps", "layout steps", "down"),
           ("pages_per_s", "pages/s", "up"), ("projected_pages_per_s", "projected pages/s", "up"),
           ("p95_latency_s", "P95 latency s", "down"),
           ("accepted_per_step", "accepted/step", "up"),
           ("median_fork_depth", "oracle depth", "down"), ("median_reduction", "oracle reduction", "delta"))
# quality figures compared as a difference whose better side is lower (the others: higher)
LOWER_IS_BETTER = ("text_edit", "text_edit_vs_truth")
# (summary key, label) of figures shown as they are, no ratio: drafted tokens accepted at look-ahead depth 1, 2, ...
LISTS = (("acceptance_by_depth", "accepted by depth"),)


def _ratio(value, base, how: str) -> float | None:
    if not isinstance(value, (int, float)) or not isinstance(base, (int, float)):
        return None
    if how == "delta":
        return value - base
    if how == "up":
        return value / base if base else None
    return base / value if value else None


def _key_value(override: str) -> tuple[str, str]:
    """An override's key and its value as Hydra writes it, so that one value spelled two ways is one
    value (`cold_drafts=false` on a command line, `cold_drafts=False` in a sweep's job)."""
    key, _, value = override.lstrip("+").partition("=")
    if key in NOT_IN_KEY:
        return key, value
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_override(override)
        return parsed.key_or_group, parsed.get_value_element_as_str()
    except Exception:  # Hydra's parse errors on a hand-written store: the text as it is
        return key, value


def _readable(root: str) -> Path:
    """`root` as a local folder: a filesystem URL's result files copied into a temporary one."""
    if is_url(root):
        import tempfile

        from treedec.run.remote import RemoteOut

        return RemoteOut(root, tempfile.mkdtemp(prefix="treedec-compare-")).pull_results()
    if not Path(root).is_dir():
        raise UserError(f"runs: {root!r} is not a folder")
    return Path(root)


def load_jobs(roots: list[str]) -> list[dict[str, Any]]:
    jobs = []
    for root in roots:
        found = list(results(_readable(root)))
        if not found:
            raise UserError(f"runs: no finished job (result.json) under {root!r}; run a sweep with "
                            f"`python -m treedec run -m ... out={root}` first")
        for folder, data in found:
            params = dict(kv for kv in map(_key_value, data.get("overrides", [])) if kv[0] not in NOT_IN_KEY)
            params.setdefault("strategy", str(data["summary"].get("strategy")))
            inputs = data.get("inputs") or {}
            config = inputs.get("config") or {}
            seeds = (config.get("seed"), (config.get("data") or {}).get("seed"))
            cpu = (data["summary"].get("meta") or {}).get("cpu")
            jobs.append({"sweep": root, "dir": str(folder), "params": params, "summary": data["summary"],
                         "pages": data["summary"].get("pages"), "seeds": "/".join(str(x) for x in seeds),
                         "weights": inputs.get("weights_sha256"), "cpu": describe(cpu) if cpu else None})
    return jobs


def swept_keys(jobs: list[dict]) -> list[str]:
    """Keys whose value differs between the jobs (a key missing from a job counts as a value)."""
    keys = list(dict.fromkeys(k for j in jobs for k in j["params"]))
    return [k for k in keys if len({j["params"].get(k) for j in jobs}) > 1]


def _baseline_rule(text: str | None) -> tuple[str, str] | None:
    if text:
        key, sep, value = str(text).rpartition(":")
        if sep and not key:
            raise UserError(f"baseline must be a strategy or KEY:VALUE, e.g. baseline=data.pages:100; got {text!r}")
        return (key, value) if sep else ("strategy", value)
    return None


def format_baseline(job: dict) -> tuple[str, str]:
    """The default baseline rule of `job`: its format's baseline strategy (`sequential` where its
    format is not registered in this install)."""
    try:
        return "strategy", get_format(job["summary"].get("format") or "treedec").baseline
    except UserError:
        return "strategy", "sequential"


def find_baseline(job: dict, sweep_jobs: list[dict], swept: list[str], rule: tuple[str, str] | None):
    """(the baseline's figures, its description) for `job`, or (None, "-")."""
    if rule is not None:
        key, value = rule
        others = [k for k in swept if k != key and not k.startswith(key + ".")]
        for cand in sweep_jobs:
            if cand["params"].get(key) == value and all(cand["params"].get(k) == job["params"].get(k) for k in others):
                return cand["summary"], f"{key}={value}"
    inner = job["summary"].get("baseline")
    if isinstance(inner, dict):  # `run compare=X`: the baseline decoded in the same process
        return inner, f"same run: {inner.get('strategy')}"
    return None, "-"


def table(jobs: list[dict], rule_text: str | None) -> tuple[list[dict], list[str], list[tuple]]:
    """One row per job: sweep, swept keys, strategy, baseline, figures and their ratios."""
    sweeps = list(dict.fromkeys(j["sweep"] for j in jobs))
    by_sweep = {s: [j for j in jobs if j["sweep"] == s] for s in sweeps}
    swept = {s: swept_keys(js) for s, js in by_sweep.items()}
    columns = list(dict.fromkeys(k for s in sweeps for k in swept[s] if k != "strategy"))
    figures = [f for f in FIGURES if any(isinstance(j["summary"].get(f[0]), (int, float)) for j in jobs)]
    rule = _baseline_rule(rule_text)
    rows = []
    for s in sweeps:
        for job in by_sweep[s]:
            base, described = find_baseline(job, by_sweep[s], swept[s], rule or format_baseline(job))
            row: dict[str, Any] = {"sweep": s} if len(sweeps) > 1 else {}
            row.update({k: job["params"].get(k) for k in columns})
            row["strategy"] = job["summary"].get("strategy", job["params"].get("strategy"))
            row["pages"] = job["pages"]
            row["baseline"] = described
            for key, _ in LISTS:
                if isinstance(job["summary"].get(key), list):
                    row[key] = "/".join("-" if v is None else f"{v:.2f}" for v in job["summary"][key])
            for key, _, how in figures:
                row[key] = job["summary"].get(key)
                row[f"{key}_vs_baseline"] = _ratio(row[key], base.get(key), how) if base else None
            rows.append(row)
    return rows, (["sweep"] if len(sweeps) > 1 else []) + columns, figures


# what makes two jobs' figures comparable: (job field, words, the overrides that set it on purpose)
_SAME = (("pages", "pages", ("data.pages", "data")), ("seeds", "seeds (seed/data.seed)", ("seed", "data.seed")),
         ("weights", "model weights (sha256)", ("model", "model.path")), ("cpu", "CPU (meta.cpu)", ()))


def mismatch(jobs: list[dict]) -> str | None:
    """One line when the jobs differ in pages, seeds, model weights or CPU where no swept key says
    so (a sweep over data.pages differs on purpose), else None."""
    swept = {k for s in {j["sweep"] for j in jobs} for k in swept_keys([j for j in jobs if j["sweep"] == s])}
    parts = []
    for field, words, keys in _SAME:
        values = list(dict.fromkeys(str(j[field])[:12] if field == "weights" else str(j[field])
                                    for j in jobs if j[field] is not None))
        if len(values) > 1 and not swept & set(keys):
            parts.append(f"{words}: {', '.join(values[:4])}{' ...' if len(values) > 4 else ''}")
    if not parts:
        return None
    return f"warning: the runs compared differ in {'; '.join(parts)}: their ratios compare unlike runs"


def _fmt(value, how: str | None = None) -> str:
    if value is None:
        return ""
    if how == "delta":
        return f"{value:+.3f}"
    if how:
        return f"{value:.2f}x"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def markdown(rows: list[dict], keys: list[str], figures: list[tuple]) -> str:
    lists = [(k, label) for k, label in LISTS if any(k in r for r in rows)]
    head = [*keys, "strategy", "pages", "baseline", *(label for _, label, _ in figures),
            *(label for _, label in lists)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r.get(k, "")) for k in [*keys, "strategy", "pages", "baseline"]]
        for key, _, how in figures:
            v, x = r.get(key), r.get(f"{key}_vs_baseline")
            cells.append(_fmt(v) + (f" ({_fmt(x, how)})" if x is not None else ""))
        cells += [r.get(k, "") for k, _ in lists]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def html_rows(rows: list[dict], keys: list[str], figures: list[tuple]) -> list[dict]:
    """The report's table: the job's keys, then each figure as `value (ratio)`, the ratio
    coloured by direction (better or worse than the baseline)."""
    lists = [(k, label) for k, label in LISTS if any(k in r for r in rows)]
    out = []
    for r in rows:
        cells: dict = {k: r.get(k) for k in [*keys, "strategy", "pages", "baseline"]}
        for key, label, how in figures:
            v, x = r.get(key), r.get(f"{key}_vs_baseline")
            if x is None:
                cells[label] = Mark(_fmt(v))
                continue
            better = x if how != "delta" else (1 + (-x if key in LOWER_IS_BETTER else x))
            shown = _fmt(x, how)
            cells[label] = Mark(f"{_fmt(v)} ({shown})", direction(better, "1.00x" if shown in ("+0.000", "-0.000")
                                                                  else shown))
        cells.update({label: r.get(k, "") for k, label in lists})
        out.append(cells)
    return out


PLOT_COLUMNS = 3  # panels a row: the plot stays about 1200 px wide, legible at a laptop's width
BAR_COLOURS = {"better": "#067d17", "worse": "#b3261e", "same": "#777777"}


def plot(rows: list[dict], keys: list[str], figures: list[tuple], path: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [(k, label, how) for k, label, how in figures if how != "delta"
             and any(r.get(f"{k}_vs_baseline") is not None for r in rows)]
    if not shown:
        return None
    labels = [", ".join(f"{k}={r[k]}" for k in keys if r.get(k) is not None) or r["strategy"] for r in rows]
    labels = [f"{lab} [{r['strategy']}]" if "strategy" not in keys else lab for lab, r in zip(labels, rows)]
    ncols = min(PLOT_COLUMNS, len(shown))
    nrows = -(-len(shown) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.9 * ncols, nrows * (1.0 + 0.3 * len(rows))), squeeze=False)
    for i, (key, label, _) in enumerate(shown):
        ax = axes[i // ncols][i % ncols]
        vals = [r.get(f"{key}_vs_baseline") for r in rows]
        ax.barh(range(len(rows)), [v or 0.0 for v in vals],
                color=[BAR_COLOURS[direction(v, "" if v is None else f"{v:.2f}x")] for v in vals])
        ax.axvline(1.0, color="k", lw=0.8, ls="--")
        ax.set_yticks(range(len(rows)), labels if i % ncols == 0 else [""] * len(rows), fontsize=9)
        ax.invert_yaxis()
        ax.set_title(f"{label} vs baseline (> 1 better)", fontsize=10)
    for j in range(len(shown), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(cfg, out: RunOutput) -> dict:
    runs = cfg.runs
    roots = [str(runs)] if isinstance(runs, str) else [str(r) for r in runs]
    jobs = load_jobs(roots)
    rows, keys, figures = table(jobs, cfg.get("baseline"))
    md = markdown(rows, keys, figures)
    (out.dir / "compare.md").write_text(md, encoding="utf-8")
    png = plot(rows, keys, figures, out.dir / "compare.png")
    notes = ["Ratios against each job's baseline, > 1 better: steps, depth and latency baseline / job; pages/s and "
             "accepted per step job / baseline; quality figures as job - baseline.",
             "Baseline: the job of the same sweep with " + ("=".join(_baseline_rule(cfg.baseline))
                                                            if cfg.get("baseline") else "its format's baseline "
                                                            "strategy (sequential; crops in two-stage formats)") +
             " and the same other swept keys; else a `run compare=X` job's own baseline."]
    warning = mismatch(jobs)
    write_report(out.dir, {"jobs": len(rows), "sweeps": len(roots)}, {}, [png] if png else [],
                 title="treedec compare", tables={"Jobs": html_rows(rows, keys, figures)}, notes=notes,
                 alerts=[warning] if warning else [])
    print(md)
    if warning:
        print(warning, file=sys.stderr)
    return {"jobs": len(rows), "sweeps": roots, "swept_keys": keys, "rows": rows,
            **({"warnings": [warning]} if warning else {})}
