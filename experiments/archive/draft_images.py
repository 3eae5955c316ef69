"""Draft pickled page images (experiments/archive/make_images.py) with whichever treedec is on PYTHONPATH; one
JSON line per page: its OmniDocBench JSON. Before/after a drafter change (e.g. the split of
treedec/drafters/pipeline.py into treedec/ocr at 848f8c4):

    python experiments/archive/make_images.py /tmp/images.pkl
    git worktree add /tmp/old 848f8c4^ && (cd /tmp/old && PYTHONPATH=/tmp/old python /path/to/draft_images.py /tmp/images.pkl old.jsonl)
    PYTHONPATH=. python experiments/archive/draft_images.py /tmp/images.pkl new.jsonl && cmp old.jsonl new.jsonl
"""
import json, pickle, sys
from PIL import Image
try:  # the drafter before the split first: an editable install may resolve treedec.ocr to main's
    from treedec.drafters.pipeline import PipelineOCR
except ImportError:
    from treedec.ocr import PipelineOCR
import treedec, sys as _s
print("drafter from", PipelineOCR.__module__, _s.modules[PipelineOCR.__module__].__file__, treedec.__file__, flush=True)
from treedec.io.omnidocbench import page_to_omnidocbench
pages = pickle.load(open(sys.argv[1], "rb"))
d = PipelineOCR()
with open(sys.argv[2], "w") as f:
    f.write(json.dumps({"drafter": d.tag}) + "\n")
    for name, arr in pages:
        page = d.draft(Image.fromarray(arr), f"{name}.png")
        f.write(json.dumps({"name": name, "page": page_to_omnidocbench(page)}, sort_keys=True, ensure_ascii=False) + "\n")
        f.flush()
