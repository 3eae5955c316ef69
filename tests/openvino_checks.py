"""The pipeline drafter on OpenVINO, checked in a process of its own (run by
tests/test_drafter_engine.py: a process that has run OpenVINO may crash when it later forks, so
the suite's workers never run it). Prints each check's name as it passes. On a CPU without
bfloat16 the same checks run in fp32 (the precision OpenVINO takes there)."""

import numpy as np


def main() -> None:
    from treedec.ocr import openvino as ovx

    import openvino as ov

    from treedec.ocr.pipeline import PipelineOCR, rapidocr_model

    # the recogniser's output length: OpenVINO 2026.4 serves wrong outputs ever after when a model's
    # first input is under 16 px wide (one output step); the drafter's are at least 48 (rec_width)
    core = ov.Core()
    run = core.compile_model(str(rapidocr_model("rec")), "CPU", {"INFERENCE_NUM_THREADS": 1}).create_infer_request()
    for width in range(48, 400, 9):
        run.infer([np.zeros((1, 3, 48, width), np.float32)])
        assert run.get_output_tensor().data.shape[1] == ovx.steps(width), width
    print("steps", flush=True)

    precision = "bf16" if ovx.bf16_cpu() else "fp32"
    hint = ov.Type.bf16 if precision == "bf16" else ov.Type.f32
    ocr = PipelineOCR(engine="openvino", precision=precision)
    ocr._load()
    for c in (ocr._ocr.text_det.session.session.get_compiled_model(),
              ocr._ocr.text_rec.session.session.session.get_compiled_model(), ocr._layout.session.compiled_model):
        assert c.get_property("INFERENCE_PRECISION_HINT") == hint
        assert int(c.get_property("INFERENCE_NUM_THREADS")) == 1
    print("precision", flush=True)

    # compiled again when its precision or threads differ from what was asked, else kept
    model = core.read_model(str(rapidocr_model("rec")))
    other = "fp32" if precision == "bf16" else "bf16"
    first = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "bf16" if other == "bf16" else "f32",
                                              "INFERENCE_NUM_THREADS": 2})
    again = ovx._pinned(first, model, 1, precision)
    assert again.get_property("INFERENCE_PRECISION_HINT") == hint
    assert int(again.get_property("INFERENCE_NUM_THREADS")) == 1
    assert ovx._pinned(again, model, 1, precision) is None  # already so: not compiled again
    print("pinning", flush=True)

    check_page(ocr)
    print("page", flush=True)

    from treedec.cpu import cpu_info
    from treedec.ocr.choice import MEASURED, choose

    assert (choose().engine, choose().precision) == MEASURED[cpu_info()["kind"]][0], (choose(), cpu_info())
    print("auto", flush=True)


def check_page(ocr) -> None:
    """OpenVINO's models, width buckets, batches of 2: the page read about as ONNX Runtime's fp32
    models read it (on this page one formula's crop reads differently) and no farther from the
    truth (the drafts differ: another drafter tag). docs/results.md measures it on the demo pages."""
    import Levenshtein

    from treedec.data.synth import SynthConfig, generate_page
    from treedec.ocr.pipeline import PipelineOCR

    sample = generate_page(1_000_003, SynthConfig())
    text = lambda page: "\n".join(b.content for b in page.blocks)
    ov_text, truth = text(ocr.draft(sample.image)), text(sample.page)
    ort = PipelineOCR(engine="onnxruntime", int8_det=False, int8_rec=False)
    ort_text = text(ort.draft(sample.image))
    assert len(ov_text) > 200 and ocr.tag != ort.tag, (len(ov_text), ocr.tag, ort.tag)
    assert Levenshtein.distance(ov_text, ort_text) <= 0.05 * len(ort_text), (ov_text, ort_text)
    assert Levenshtein.distance(ov_text, truth) <= Levenshtein.distance(ort_text, truth) + 0.01 * len(truth)


if __name__ == "__main__":
    main()
