"""Fingerprint the pipeline drafter: draft N default synthetic pages (`data=synth`, held-out
seeds) with `PipelineOCR` directly (no draft cache, so every page is really drafted) and
append the SHA-256 of each draft's OmniDocBench JSON to a JSON-lines file (first line: the
drafter tag), one line per page as it is drafted. Run it before and after a change to the
drafter, then compare: any page that differs, or a different tag, exits 1.

    nice -n 10 python experiments/draft_hashes.py --pages 200 --out before.jsonl
    nice -n 10 python experiments/draft_hashes.py --pages 200 --out after.jsonl
    python experiments/draft_hashes.py --compare before.jsonl after.jsonl
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path



def page_digest(page) -> str:
    from treedec.io.omnidocbench import page_to_omnidocbench

    data = page_to_omnidocbench(page)
    return hashlib.sha256(json.dumps(data, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def read(path: str) -> tuple[str, dict[str, str]]:
    lines = [json.loads(l) for l in Path(path).read_text(encoding="utf-8").splitlines() if l.strip()]
    return lines[0]["drafter"], {l["name"]: l["sha256"] for l in lines[1:]}


def compare(a: str, b: str) -> int:
    (tag_a, ha), (tag_b, hb) = read(a), read(b)
    common = sorted(set(ha) & set(hb))
    differ = [n for n in common if ha[n] != hb[n]]
    print(f"{len(common)} pages in both ({len(ha)} in {a}, {len(hb)} in {b}): {len(common) - len(differ)} identical, "
          f"{len(differ)} differ{': ' + ', '.join(differ[:10]) if differ else ''}; drafter tag "
          f"{'same' if tag_a == tag_b else f'differs ({tag_a} vs {tag_b})'}")
    return 1 if differ or tag_a != tag_b or not common else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1_000_000)
    ap.add_argument("--out", help="the JSON-lines file to write")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two --out files (pages in both)")
    args = ap.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if not args.out:
        ap.error("--out or --compare is needed")

    from tqdm import tqdm

    from treedec.data import SynthDataset
    from treedec.ocr import PipelineOCR

    drafter = PipelineOCR()
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(json.dumps({"drafter": drafter.tag, "pages": args.pages, "seed": args.seed}) + "\n")
        for sample in tqdm(SynthDataset(pages=args.pages, seed=args.seed), total=args.pages, desc="drafting"):
            digest = page_digest(drafter.draft(sample.image, f"{sample.name}.png"))
            f.write(json.dumps({"name": sample.name, "sha256": digest}) + "\n")
            f.flush()
    print(f"wrote {args.out}: {args.pages} pages, drafter {drafter.tag}")


if __name__ == "__main__":
    main()
