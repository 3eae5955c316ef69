"""Measure the activation ranges the drafter's int8 models are made with (treedec/ocr/int8.py):
the fp32 drafter (int8 off) drafts the first six OmniDocBench demo pages (by sorted name: the
tuning pages; the other six stay held out), every input its text detector and recogniser are
given is recorded (every third recogniser batch), and ONNX Runtime's MinMax calibration
writes one JSON table per model into treedec/ocr/int8_ranges/.

    python experiments/int8_calibration.py [--pages 6]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image

from treedec.ocr.int8 import calibrate, ranges_path
from treedec.ocr.pipeline import PipelineOCR, rapidocr_model

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT.parent / "shared" / "omnidocbench_demo" / "images"


class Recorder:
    """Stands in for a rapidocr model session: records each input, then runs it."""

    def __init__(self, session, every: int = 1):
        self.session, self.every, self.inputs, self._n = session, every, [], 0

    def __call__(self, x):
        if self._n % self.every == 0:
            self.inputs.append({self.session.get_input_names()[0]: x.copy()})
        self._n += 1
        return self.session(x)

    def __getattr__(self, name):
        return getattr(self.session, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=6, help="the first N demo pages by sorted name")
    args = ap.parse_args()
    files = sorted(DEMO.iterdir())[: args.pages]
    ocr = PipelineOCR(int8_det=False, int8_rec=False, rec_squeeze=1.0)
    ocr._load()
    det, rec = ocr._ocr.text_det, ocr._ocr.text_rec
    det.session, rec.session = Recorder(det.session), Recorder(rec.session, every=3)
    for f in files:
        ocr.draft(Image.open(f).convert("RGB"), f.name)
    for name, recorder in (("det", det.session), ("rec", rec.session)):
        model = rapidocr_model(name)
        out = ranges_path(model)
        calibrate(model, recorder.inputs, out)
        shapes = sorted({tuple(np.shape(next(iter(x.values())))) for x in recorder.inputs})
        print(f"{name}: {len(recorder.inputs)} inputs ({len(shapes)} shapes) -> {out}")


if __name__ == "__main__":
    main()
