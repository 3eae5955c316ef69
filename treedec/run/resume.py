"""Runs that resume: `run ... out=OUT` stopped at any moment (a crash, `kill -9`, a full
disk) and started again with the same `out=` decodes only the pages not yet written.

Each page's files are written atomically (`treedec.run.outputs.write_text_atomic`); a page counts
as done once its line is in `OUT/resume/done.jsonl`, written after all its files are in place,
with the sha256 of its Markdown and OmniDocBench JSON: a page whose files are missing, cut
short or changed since is decoded again, never kept. `OUT/resume/fingerprint.json`, written by
the first sitting, holds what decides the pages: the resolved config less the keys that only
change how the run goes (`OUT_OF_BAND`: concurrency, threads, logging, reporting, which pages
are selected), the sha256 of the model's files and the synthetic page settings. A later
sitting whose fingerprint differs is refused in one line (another `out=`, or `resume=false`,
which removes the folder's earlier pages and decodes every page again). `compare=` does not
resume (its baseline would see only the pages left): refused in one line where pages are done."""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Iterator, Mapping

from treedec.data import FilesDataset
from treedec.errors import UserError
from treedec.io.omnidocbench import page_from_omnidocbench
from treedec.records import PageRecord, RunResult
from treedec.results.store import code_version, effective_pages, plain, weights_sha256
from treedec.run.outputs import write_text_atomic

FOLDER = "resume"
FINGERPRINT = "fingerprint.json"
JOURNAL = "done.jsonl"
HASHED = {"md": ".md", "omnidocbench": ".omnidocbench.json"}  # a page's files that hold the page (no timings)
SPEED_COVERS = "pages decoded in this sitting"
STEPS_COVER = "every page"  # a page's steps are its own: earlier sittings' read back (treedec.run.summary)
# keys that change how a run goes, not what its pages are: where and how it is logged and reported, how many pages
# are in flight and on how many threads or processes (executor=ray), drafting's workers and cache, which pages of
# the data are selected
OUT_OF_BAND = {
    "": ("out", "logger", "force", "command", "compare", "timelines", "report_pages", "concurrency", "cold_drafts",
         "cost_model", "fresh_process", "resume", "hydra", "executor", "ray"),
    "runtime": ("threads", "max_pages"),
    "strategy": ("cache_dir", "draft_workers", "draft_ahead"),
    "data": ("limit", "pages", "glob", "recursive"),
}


def fingerprint(cfg: Any) -> dict[str, Any]:
    """What decides a run's pages: the resolved config less `OUT_OF_BAND`, as dotted keys, plus
    the sha256 of the model's files and the synthetic page settings (`treedec.results.store`)."""
    config = plain(cfg)
    for group, keys in OUT_OF_BAND.items():
        node = config if not group else config.get(group)
        for key in keys if isinstance(node, dict) else ():
            node.pop(key, None)
    found = {"config": _dotted(config), "weights_sha256": weights_sha256(cfg.get("model")),
             "synth_pages": effective_pages(cfg)}
    return json.loads(json.dumps(found, sort_keys=True, default=str))  # as it reads back from the file


def _dotted(d: Mapping, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and v:
            out.update(_dotted(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The fingerprints' differences, one short phrase each ('strategy.name: padoc -> hsd')."""
    out = []
    keys = set(old.get("config", {})) | set(new.get("config", {}))
    for key in sorted(keys, key=lambda k: (not k.endswith(".name"), k)):  # a group's name says the most: first
        a, b = old.get("config", {}).get(key, "unset"), new.get("config", {}).get(key, "unset")
        if a != b:
            out.append(f"{key}: {a} -> {b}")
    if old.get("weights_sha256") != new.get("weights_sha256"):
        out.append(f"the model's weights (sha256 {str(old.get('weights_sha256'))[:12]} -> "
                   f"{str(new.get('weights_sha256'))[:12]})")
    if old.get("synth_pages") != new.get("synth_pages"):
        out.append("the synthetic pages' settings")
    return out


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Sitting:
    """One sitting of a run into `out`: the pages earlier sittings finished (`earlier`: page
    name -> its journal entry, its files checked), the pages left, and the journal."""

    def __init__(self, out: str | Path, earlier: dict[str, dict] | None = None, remote: Any = None):
        self.dir = Path(out)
        self.remote = remote  # out= a URL: each page done copied there, files then journal (treedec.run.remote)
        self.folder = self.dir / FOLDER
        self.earlier = earlier or {}

    @classmethod
    def open(cls, cfg: Any, out: str | Path, remote: Any = None) -> "Sitting":
        """The sitting `cfg` starts in `out`: what earlier sittings finished, refused in one line
        where their pages would differ from this config's (`check`); with `resume=false`, the
        folder's earlier pages removed first. Writes the fingerprint where nothing is done yet."""
        sitting = cls(out, remote=remote)
        if not cfg.get("resume", True):
            sitting.clear()
        sitting.earlier = check(cfg, out, say=False)  # said by the command's own check, before it writes
        if not sitting.earlier:
            sitting.start(fingerprint(cfg))
        for tmp in (sitting.dir / "pages").glob(".*.tmp"):  # files a killed sitting left half-written
            tmp.unlink(missing_ok=True)
        return sitting

    def start(self, found: Mapping[str, Any]) -> None:
        """A fresh start: the fingerprint written, the journal emptied."""
        self.folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.folder / FINGERPRINT, json.dumps({**found, "code": code_version()}, indent=1,
                                                                 ensure_ascii=False, default=str))
        (self.folder / JOURNAL).unlink(missing_ok=True)

    def clear(self) -> None:
        """`resume=false`: the earlier pages, documents, summary and journal removed."""
        done = len(journal(self.dir))
        for name in ("pages", "documents", FOLDER):
            shutil.rmtree(self.dir / name, ignore_errors=True)
        (self.dir / "summary.json").unlink(missing_ok=True)
        (self.dir / "pages").mkdir(parents=True, exist_ok=True)
        if done:
            print(f"note: resume=false: removed the {done} pages earlier sittings wrote to {self.dir}", file=sys.stderr)

    def done(self, rec: PageRecord) -> None:
        """Mark the page of `rec` done: called after all its files are in place; its journal line
        last. A page that could not be read is not marked: the next sitting tries it again."""
        if any(f.startswith("unreadable") for f in rec.flags):
            return
        pages, name = self.dir / "pages", rec.name
        entry = {"name": name, **{kind: sha256_file(pages / f"{name}{ext}") for kind, ext in HASHED.items()}}
        with (self.folder / JOURNAL).open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        if self.remote is not None:
            self.remote.push_page(name, entry)

    def remaining(self, samples):
        """The pages of `samples` left to decode (a data set of the same kind where it can be
        cut without reading the pages); `earlier` narrowed to the pages of `samples`."""
        names = page_names(samples)
        self.earlier = {n: self.earlier[n] for n in names if n in self.earlier}
        if not self.earlier:
            return samples
        if isinstance(samples, FilesDataset):
            left = copy.copy(samples)
            left.plan = [p for p in samples.plan if p.name not in self.earlier]
            return left
        return Remaining(samples, set(self.earlier), len(names) - len(self.earlier))

    def with_earlier(self, res: RunResult, samples) -> RunResult:
        """`res` with the earlier sittings' pages read back (from their files) before its own,
        in the data's order: what quality, documents and the report cover."""
        if not self.earlier:
            return res
        records = {r.name: r for r in res.records}
        records.update(self.earlier_records(samples))
        order = {name: i for i, name in enumerate(page_names(samples))}
        return dataclasses.replace(res, records=sorted(records.values(), key=lambda r: order.get(r.name, len(order))))

    def earlier_records(self, samples) -> dict[str, PageRecord]:
        """The earlier sittings' pages read back, each with its ground truth where `samples` has one."""
        if not self.earlier:
            return {}
        gts = {} if isinstance(samples, FilesDataset) else {s.name: s.page for s in samples if s.name in self.earlier}
        return {name: self.record(name, gts.get(name)) for name in self.earlier}

    def record(self, name: str, gt=None) -> PageRecord:
        """An earlier sitting's page, read back from its OmniDocBench JSON and per-page figures."""
        pages = self.dir / "pages"
        page = page_from_omnidocbench(json.loads((pages / f"{name}.omnidocbench.json").read_text(encoding="utf-8")))
        figures = json.loads((pages / f"{name}.json").read_text(encoding="utf-8"))
        # not decoded in this sitting (no decoding): its figures are the ones written then
        return PageRecord(name, page, "", gt=gt, flags=list(figures.get("flags") or []),
                          kept={k: v for k, v in figures.items() if k not in ("name", "flags")})

    def finished(self, samples, strategy: str) -> dict[str, Any] | None:
        """Where earlier sittings finished every page of `samples` and the last of them wrote
        its summary (not an interrupted one, of `strategy`, on as many pages): that summary,
        which stands as written (its speed covers the pages it decoded; decoding nothing again
        would measure nothing); said in one line. Else None: there are pages to decode."""
        if not self.earlier or len(self.remaining(samples)):
            return None
        try:
            kept = json.loads((self.dir / "summary.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if (not isinstance(kept, dict) or kept.get("interrupted") or kept.get("strategy") != strategy
                or kept.get("pages") != len(samples) or "meta" not in kept):  # as run_summary wrote it
            return None
        made = kept["meta"]
        print(f"note: earlier sittings decoded all {kept['pages']} pages into {self.dir}: nothing to decode; its "
              f"summary.json (git {str(made.get('git'))[:7]}, {made.get('finished')}) stands "
              "(resume=false decodes every page again)", file=sys.stderr)
        return kept

    def figures(self, decoded: int) -> dict[str, Any]:
        """summary.json's keys about the sittings."""
        return {"resumed_pages": len(self.earlier), "pages_decoded": decoded, "speed_covers": SPEED_COVERS,
                "steps_cover": STEPS_COVER}


def check(cfg: Any, out: str | Path, say: bool = True) -> dict[str, dict]:
    """The pages earlier sittings finished in `out` (name -> journal entry, files checked);
    a one-line UserError where this config's pages would differ from theirs, or where
    `compare=` asks for a baseline on a run that resumes. With `resume=false`: none. `say`:
    note on stderr where the code changed since the first sitting."""
    out = Path(out)
    done = journal(out) if cfg.get("resume", True) else {}
    stored = _stored(out)
    if not done or stored is None:
        return {}
    how = (f"start afresh with another out=DIR, or resume=false to decode every page again into {out} "
           "(its earlier pages are removed)")
    diff = differences(stored, fingerprint(cfg))
    if diff:
        more = f"; and {len(diff) - 3} more" if len(diff) > 3 else ""
        raise UserError(f"out={out} holds {len(done)} pages of a run whose pages would differ "
                        f"({'; '.join(diff[:3])}{more}): {how}")
    if cfg.get("compare"):
        raise UserError(f"out={out} holds {len(done)} pages of an earlier sitting and compare= does not resume "
                        f"(its baseline would see only the pages left): {how}")
    if say and stored.get("code") != code_version():
        print(f"note: treedec's code changed since the first sitting into {out}; its {len(done)} pages are kept",
              file=sys.stderr)
    return done


def resumes_in(cfg: Any, out: str | Path) -> bool:
    """For a job of a sweep, which the results store has decided to run: whether it resumes the
    pages its folder holds. Not with `+force=true` (recompute), `compare=`, or pages another config
    made: the job then starts afresh (`resume=false`) rather than being refused."""
    stored = _stored(Path(out))
    if stored is None or not journal(out):
        return True
    return not (cfg.get("force") or cfg.get("compare") or differences(stored, fingerprint(cfg)))


def _stored(out: Path) -> dict | None:
    try:
        return json.loads((out / FOLDER / FINGERPRINT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def journal(out: str | Path) -> dict[str, dict]:
    """The pages marked done in `out` whose files are all there, whole and unchanged (a line
    cut short by a kill, or a page whose files differ from its line, is not done)."""
    pages = Path(out) / "pages"
    try:
        lines = (Path(out) / FOLDER / JOURNAL).read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    done = {}
    for line in lines:
        try:
            entry = json.loads(line)
            name = entry["name"]
            whole = all(sha256_file(pages / f"{name}{ext}") == entry[kind] for kind, ext in HASHED.items())
            whole = whole and json.loads((pages / f"{name}.json").read_text(encoding="utf-8"))["name"] == name
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if whole:
            done[name] = entry
    return done


def page_names(samples) -> list[str]:
    """The page names of a data set, in order, without reading its images."""
    if isinstance(samples, FilesDataset):
        return [p.name for p in samples.plan]
    if isinstance(samples, Remaining):
        return [n for n in page_names(samples.samples) if n not in samples.skip]
    listing = copy.copy(samples)
    listing.render = False
    return [s.name for s in listing]


class Remaining:
    """The pages of `samples` not in `skip`, read lazily as `samples` reads them."""

    def __init__(self, samples, skip: set[str], n: int):
        self.samples, self.skip, self.n = samples, skip, n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator:
        return (s for s in self.samples if s.name not in self.skip)
