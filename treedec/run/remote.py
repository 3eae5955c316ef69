"""`out=` as a filesystem URL fsspec opens (`s3://bucket/run`, `gs://...`, `file:///mnt/shared/run`,
`memory://run`): a command writes into a local mirror of it (`$TREEDEC_RUNS/remote/PROTOCOL/PATH`,
or `runs/remote/...`), as into any folder, and the mirror is copied to the URL:

- before `run` starts: what earlier sittings left at the URL (the resume fingerprint and journal,
  the journaled pages, the summary) is copied into the emptied mirror, so a sitting on another
  machine resumes where the last one stopped;
- as each page is done: its files, then its journal entry (`resume/done/<name>.json`, one object a
  page: object stores have no append), each written to a temporary name and moved into place, so
  the URL holds a page whole or not at all, and a journal entry only for a page whose files are
  there;
- at the end, finished or not: everything else (summary, report, plots, config, log, documents).

`resume=false` removes the URL's earlier pages, documents, summary and journal, as it does a
local folder's. A plain path (no `://`) is a local folder: the mirror is not used."""
from __future__ import annotations

import json
import re
import shutil
import uuid
from pathlib import Path
from urllib.parse import quote

from treedec.errors import UserError

JOURNAL_DIR = "resume/done"  # at the URL: one object a page (the mirror's resume/done.jsonl, line by line)
RESTARTED = ("pages", "documents", "resume", "summary.json")
PAGE_FILES = (".md", ".omnidocbench.json", ".json")  # a page's files, its figures last (what `run` writes of it)  # what a sitting reads back or a fresh start removes


def is_url(out: str | Path) -> bool:
    return isinstance(out, str) and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", out) is not None


def mirror_of(url: str, runs: str | Path) -> Path:
    """The local folder a command writes into for `url` (under `runs`)."""
    protocol, _, path = url.partition("://")
    parts = [quote(p, safe="-_.=,") for p in path.split("/") if p not in ("", ".", "..")]
    return Path(runs) / "remote" / protocol.replace("+", "_").replace(":", "_") / Path(*(parts or ["root"]))


class RemoteOut:
    """The URL a command's outputs go to, and the local mirror they are written into first."""

    def __init__(self, url: str, mirror: str | Path):
        import fsspec

        try:
            self.fs, self.root = fsspec.core.url_to_fs(url)
        except (ValueError, ImportError) as e:  # an unknown protocol, or its package not installed
            raise UserError(f"out={url}: fsspec cannot open it ({str(e).splitlines()[0]})") from None
        self.url, self.mirror = url, Path(mirror)
        self.pushed: dict[str, tuple[int, int]] = {}  # a file's (mtime, size) when it was last copied to the URL

    def _remote(self, rel: str) -> str:
        return f"{self.root.rstrip('/')}/{rel}"

    def pull(self, resume: bool = True) -> int:
        """The mirror emptied of what a sitting reads back, then refilled from the URL (nothing
        with `resume=false`, whose earlier pages are removed at the URL too). The pages pulled."""
        for name in RESTARTED:
            path = self.mirror / name
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        if not resume:
            self.clear()
            return 0
        entries = self._journal()
        files = ["resume/fingerprint.json", "summary.json",
                 *(f"pages/{name}{ext}" for name in entries for ext in PAGE_FILES)]
        for rel in files:
            (self.mirror / rel).parent.mkdir(parents=True, exist_ok=True)
            try:
                self.fs.get_file(self._remote(rel), str(self.mirror / rel))
            except FileNotFoundError:  # none there yet (a page whose file is gone is not kept: resume.journal)
                continue
        if entries:
            (self.mirror / "resume").mkdir(parents=True, exist_ok=True)
            (self.mirror / "resume" / "done.jsonl").write_text(
                "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries.values()), encoding="utf-8")
        return len(entries)

    def _journal(self) -> dict[str, dict]:
        folder = self._remote(JOURNAL_DIR)
        if not self.fs.isdir(folder):
            return {}
        entries = {}
        for path, data in sorted(self.fs.cat([p for p in self.fs.ls(folder, detail=False)
                                              if p.endswith(".json")]).items()):
            try:
                entry = json.loads(data)
                entries[entry["name"]] = entry
            except (ValueError, KeyError, TypeError):
                continue  # an entry cut short: its page is not done
        return entries

    def clear(self) -> None:
        """The URL's earlier pages, documents, summary and journal removed."""
        for name in RESTARTED:
            path = self._remote(name)
            if self.fs.exists(path):
                self.fs.rm(path, recursive=self.fs.isdir(path))

    def push_page(self, name: str, entry: dict) -> None:
        """A page done: the run's fingerprint (once: what decides its pages, without which a later
        sitting keeps none), the page's files, then its journal entry."""
        fingerprint = self.mirror / "resume" / "fingerprint.json"
        if fingerprint.is_file():
            self._put(fingerprint, "resume/fingerprint.json")
        for ext in PAGE_FILES:
            local = self.mirror / "pages" / f"{name}{ext}"
            if local.is_file():
                self._put(local, f"pages/{name}{ext}")
        self._put_bytes(json.dumps(entry, ensure_ascii=False).encode(), f"{JOURNAL_DIR}/{quote(name, safe='')}.json")

    def push_rest(self) -> None:
        """Everything in the mirror not copied since it last changed, but the journal file (at the
        URL: one object a page)."""
        for local in sorted(p for p in self.mirror.rglob("*") if p.is_file()):
            rel = local.relative_to(self.mirror).as_posix()
            if rel != "resume/done.jsonl" and not local.name.endswith(".tmp"):
                self._put(local, rel)

    def pull_results(self) -> Path:
        """Every job's result.json under the URL (the results store's files, what `compare` reads)
        copied into the mirror, in the same folders; the mirror."""
        for path in self.fs.glob(self._remote("**/result.json")):
            local = self.mirror / Path(path).relative_to(self.root.rstrip("/") or "/")
            local.parent.mkdir(parents=True, exist_ok=True)
            self.fs.get_file(path, str(local))
        return self.mirror

    def _put(self, local: Path, rel: str) -> None:
        stat = local.stat()
        if self.pushed.get(rel) == (stat.st_mtime_ns, stat.st_size):
            return
        self._put_bytes(local.read_bytes(), rel)
        self.pushed[rel] = (stat.st_mtime_ns, stat.st_size)

    def _put_bytes(self, data: bytes, rel: str) -> None:
        final = self._remote(rel)
        parent, _, base = final.rpartition("/")
        tmp = f"{parent}/.{base}.{uuid.uuid4().hex[:8]}.tmp"
        self.fs.makedirs(parent, exist_ok=True)
        self.fs.pipe_file(tmp, data)
        self.fs.mv(tmp, final)
