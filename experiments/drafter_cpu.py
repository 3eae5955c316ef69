"""The pipeline drafter's CPU per page, end to end: every image of a folder drafted in this one
process by whichever treedec is importable (so a checkout of an earlier version, put first on
PYTHONPATH, is measured the same way), ONNX Runtime's defaults of that version (1 intra-op
thread); the process's user + sys CPU, start-up and model loading included, over the pages.
Run it on a quiet machine (docs/results.md, "Where the drafter's CPU goes").

    python experiments/drafter_cpu.py DIR [--ocr JSON] [--pages 0:6] [--out FILE.json]

`--ocr` sets the drafter's options (version 4's drafts: '{"int8_det": false, "int8_rec": false,
"rec_squeeze": 1.0}'). The int8 models are made on the drafter's first use on a machine (a few
CPU-s, once, into ~/.cache/treedec/models): run once before measuring.
"""
from __future__ import annotations

import argparse
import json
import resource
from pathlib import Path

from PIL import Image

from treedec.ocr.pipeline import PipelineOCR

IMAGES = (".png", ".jpg", ".jpeg")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--ocr", default="{}", help="drafter options as JSON (default: the drafter's defaults)")
    ap.add_argument("--pages", default=None, help="only these pages of the sorted folder, e.g. 0:6 or 6:12")
    ap.add_argument("--out", type=Path, help="write the figures and each page's block texts as JSON")
    args = ap.parse_args()
    if not args.folder.is_dir():
        raise SystemExit(f"drafter_cpu.py: no folder {args.folder}")
    files = sorted(p for p in args.folder.iterdir() if p.suffix.lower() in IMAGES)
    if not files:
        raise SystemExit(f"drafter_cpu.py: no images ({', '.join(IMAGES)}) in {args.folder}")
    if args.pages:
        a, _, b = args.pages.partition(":")
        files = files[int(a or 0):int(b) if b else None]
    ocr = PipelineOCR(**json.loads(args.ocr))
    texts = {f.name: [b.content for b in ocr.draft(Image.open(f).convert("RGB"), f.name).blocks] for f in files}
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    print(f"{args.folder} {args.ocr}: {len(files)} pages, {cpu:.1f} CPU-s, {cpu / len(files):.2f} CPU-s a page")
    if args.out:
        args.out.write_text(json.dumps({"pages": len(files), "cpu_s": cpu, "cpu_s_per_page": cpu / len(files),
                                        "texts": texts}))


if __name__ == "__main__":
    main()
