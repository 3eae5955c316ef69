"""Image processors that work without torchvision but that transformers will not build
without it. transformers 5.19 marks HunYuanVL's PIL image processor
(`HunYuanVLImageProcessorPil`) as needing torchvision, which it never imports, so
`AutoProcessor.from_pretrained` on a HunyuanOCR folder fails beside CPU torch (PyPI's
torchvision is CUDA-linked and does not load there). `use_pil_image_processors()`
registers the PIL class for its config, so the checkpoint's own processor loads (in this
process: the embedded engine's loader and vLLM's in-process engine alike)."""
from __future__ import annotations


def use_pil_image_processors() -> None:
    """Register the PIL image processors that transformers wrongly gates on torchvision;
    nothing when torchvision imports (then the torchvision ones load as transformers wants)."""
    from transformers import AutoImageProcessor, HunYuanVLConfig
    from transformers.utils import is_torchvision_available

    if is_torchvision_available():
        return
    from transformers.models.hunyuan_vl.image_processing_pil_hunyuan_vl import HunYuanVLImageProcessorPil

    AutoImageProcessor.register(HunYuanVLConfig, image_processor_classes={"pil": HunYuanVLImageProcessorPil,
                                                                         "torchvision": None}, exist_ok=True)
