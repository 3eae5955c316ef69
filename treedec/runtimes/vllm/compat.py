"""What stands between a checkpoint's architecture and vLLM here, found by trying, and said
in one line: `vllm_refusal(model_dir)` imports the vLLM module that serves the checkpoint's
architecture and builds its processor, and names what fails (on CPU torch: torchvision,
which vLLM 0.32's Qwen2/2.5/3-VL, InternVL, dots.ocr and GLM-OCR modules import through
transformers' torchvision image processors; PyPI's torchvision is CUDA-linked and fails
beside CPU torch).

Nothing here changes vLLM or transformers when imported: `ready_to_serve(model_dir)`, called
where the vLLM runtime starts an engine for a checkpoint (`engine.start_engine`), refuses what
cannot be served here and applies the mends of the checkpoint's family alone
(`align_with_transformers`: once per process and family, said once in this module's log).

`align_with_transformers(model_type)` mends, in this process (where the engine runs:
`VLLM_ENABLE_V1_MULTIPROCESSING=0`), what was measured to keep vLLM 0.32 from decoding as
transformers 5.19 does (fp32 log-probs differing by > 1e-2 before, < 1e-5 after, on the
tiny replicas, `tests/test_vllm_archs.py`):
- `paddleocr_vl`: vLLM resamples the vision tower's learned position grid with
  `align_corners=False`, transformers with `align_corners=True` (any page whose patch grid
  is not the learned grid's, 27x27 on PaddleOCR-VL): vLLM's resampling is replaced by
  transformers' own (`transformers.vision_utils`);
- `hunyuan_vl`: transformers marks HunYuanVL's PIL image processor as needing torchvision
  (it does not use it), so `AutoProcessor` (and vLLM's Transformers backend) fails without
  it: `treedec.models.pil_processors` registers the PIL one; and the vision patch merger hands vLLM's
  CPU linear kernel (oneDNN, contiguous rows only) a transposed tensor: vLLM's plain linear
  layers get their input contiguous (a no-op for the contiguous inputs of every other layer);
  and an eager engine leaves transformers' HunYuanVL text model class undecorated for
  torch.compile (`_compile_decoration_only_when_compiling`: otherwise transformers cannot
  build the model again in this process, e.g. `check` or a test after the engine).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from treedec.errors import UserError

log = logging.getLogger(__name__)

TORCHVISION = ("install the torchvision built for this torch: on CPU `pip install torchvision --index-url "
               "https://download.pytorch.org/whl/cpu`, on CUDA the wheel of the torch's CUDA index; or use "
               "runtime=embedded")


def _architecture(model_dir: Path) -> tuple[str, str]:
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    return str(cfg.get("model_type")), str((cfg.get("architectures") or ["?"])[0])


def _missing(e: BaseException) -> str | None:
    """The missing module an import error names (torchvision, ...), None for other errors."""
    while e is not None:
        if isinstance(e, ModuleNotFoundError) and e.name:
            return e.name.split(".")[0]
        e = e.__cause__ or e.__context__
    return None


def ready_to_serve(model_dir: Path, tensor_parallel_size: int = 1) -> None:
    """This process made ready for vLLM to serve the checkpoint in `model_dir`: refused in one
    line (`UserError`) where it cannot be here (`parallel_refusal`, `vllm_refusal`), else with
    the mends of its family applied (`align_with_transformers`), before its module and processor
    are tried as the engine builds them."""
    if why := parallel_refusal(model_dir, tensor_parallel_size):
        raise UserError(why)
    align_with_transformers(_architecture(model_dir)[0])
    if why := vllm_refusal(model_dir):
        raise UserError(why)


def parallel_refusal(model_dir: Path, tensor_parallel_size: int = 1) -> str | None:
    """Why the checkpoint's family cannot run on `tensor_parallel_size` workers (one line), None
    when it can: a family that decodes as transformers does only with this module's mends runs
    in this process alone (tensor-parallel workers are processes of their own, without them)."""
    kind, _ = _architecture(model_dir)
    if kind in _MENDS and tensor_parallel_size > 1:
        return (f"runtime=vllm serves model_type {kind} with tensor_parallel_size=1 only: vLLM 0.32 decodes it as "
                "transformers does only with treedec's mends (treedec/runtimes/vllm/compat.py), made in this process, "
                "which its tensor-parallel workers would not have")
    return None


def vllm_refusal(model_dir: Path) -> str | None:
    """Why vLLM cannot serve the checkpoint in `model_dir` here (one line), None when it can:
    its architecture's vLLM module and its processor are built here, as the engine would (the
    family's mends applied first: `ready_to_serve`)."""
    import importlib

    from vllm.model_executor.models.registry import ModelRegistry

    kind, arch = _architecture(model_dir)
    entry = ModelRegistry.models.get(arch)
    if entry is None:  # vLLM may still serve it through its Transformers backend; its own error says if not
        return None
    try:
        importlib.import_module(entry.module_name)
        from transformers import AutoProcessor

        AutoProcessor.from_pretrained(model_dir)
    except ImportError as e:
        what = _missing(e) or str(e).splitlines()[0]
        fix = TORCHVISION if what == "torchvision" else f"install {what}, or use runtime=embedded"
        return f"runtime=vllm cannot serve model_type {kind} here: vLLM's {entry.module_name} needs {what}, which " \
               f"does not import here ({type(e).__name__}): {fix}"
    except (ValueError, OSError) as e:
        if "torchvision" in str(e):
            return f"runtime=vllm cannot serve model_type {kind} here: its image processor needs torchvision: {TORCHVISION}"
        raise UserError(f"{model_dir}: the processor cannot be built: {str(e).splitlines()[0]}") from None
    return None


_ALIGNED: set[str] = set()


def align_with_transformers(model_type: str) -> None:
    """Apply, once per process, the module docstring's mends for `model_type` (none for a family
    that needs none), each said once in this module's log."""
    if model_type in _ALIGNED or model_type not in _MENDS:
        return
    mend, what = _MENDS[model_type]
    mend()
    _ALIGNED.add(model_type)
    log.info("vLLM mended in this process for model_type %s: %s", model_type, what)


def _paddleocr_vl() -> None:
    import torch
    from transformers.vision_utils import get_vision_interpolation_indices_and_weights
    from vllm.model_executor.models.paddleocr_vl import SiglipVisionEmbeddings

    def interpolate_pos_encoding(self, embeddings, height, width, is_after_patchify=False):
        """transformers' resampling of the learned grid (PaddleOCRVisionEmbeddings.forward)."""
        if not is_after_patchify:
            height, width = height // self.patch_size, width // self.patch_size
        side = int(self.position_embedding.weight.shape[0] ** 0.5)
        grid = torch.tensor([[1, int(height), int(width)]], device=self.position_embedding.weight.device)
        index, weight = get_vision_interpolation_indices_and_weights(grid, num_grid_per_side=side, mode="bilinear",
                                                                     align_corners=True)
        return (self.position_embedding(index) * weight[:, :, None]).sum(1).unsqueeze(0)

    SiglipVisionEmbeddings.interpolate_pos_encoding = interpolate_pos_encoding


def _hunyuan_vl() -> None:
    from vllm.model_executor.layers.linear import UnquantizedLinearMethod

    from treedec.models.pil_processors import use_pil_image_processors

    use_pil_image_processors()
    apply = UnquantizedLinearMethod.apply

    def contiguous_apply(self, layer, x, bias=None):
        return apply(self, layer, x.contiguous(), bias)

    UnquantizedLinearMethod.apply = contiguous_apply
    _compile_decoration_only_when_compiling()
    _one_image_per_encoder_call()


def _one_image_per_encoder_call() -> None:
    """vLLM's Transformers backend cuts the features of a batch of images at each image's
    patch count (grid t*h*w), but HunYuan-VL's encoder yields another count per image (patches
    merged 2x2, a newline per row, begin and end): past the first image of a batch, an image
    gets another's features (vLLM warns "padding or truncating to fit"). Encoded one at a time,
    each image gets its own (the first `n` rows of the padded tensor, as for a lone image)."""
    import torch
    from vllm.model_executor.models.transformers.multimodal import MultiModalMixin

    process = MultiModalMixin._process_vision_input

    def one_at_a_time(self, modality, pixel_values, num_patches, **kwargs):
        sizes = num_patches.flatten().tolist()
        if not isinstance(pixel_values, torch.Tensor) or len(sizes) < 2 or pixel_values.shape[0] != sum(sizes):
            return process(self, modality, pixel_values, num_patches, **kwargs)
        return [e for i, rows in enumerate(torch.split(pixel_values, sizes))
                for e in process(self, modality, rows, num_patches.flatten()[i:i + 1],
                                 **self._select_item_kwargs(kwargs, i, len(sizes)))]

    MultiModalMixin._process_vision_input = one_at_a_time


def _compile_decoration_only_when_compiling() -> None:
    """vLLM's Transformers backend marks transformers' decoder class itself for torch.compile
    (`support_torch_compile` rewrites the class: its `__init__` then wants a vLLM config), so
    after an engine served the model, transformers cannot build that model in this process.
    An eager engine (compilation mode NONE: the CPU default) compiles nothing with it: there
    the class is left as transformers wrote it."""
    from vllm.config import get_current_vllm_config
    from vllm.config.compilation import CompilationMode
    from vllm.model_executor.models.transformers.base import Base

    decorate = Base._decorate_cls_for_torch_compile

    def decorate_when_compiling(self, cls, *args, **kwargs):
        if get_current_vllm_config().compilation_config.mode == CompilationMode.NONE:
            return None
        return decorate(self, cls, *args, **kwargs)

    Base._decorate_cls_for_torch_compile = decorate_when_compiling


# model_type -> (its mends, what they patch)
_MENDS = {
    "paddleocr_vl": (_paddleocr_vl, "vllm.model_executor.models.paddleocr_vl.SiglipVisionEmbeddings"
                                    ".interpolate_pos_encoding (transformers' resampling, align_corners=True)"),
    "hunyuan_vl": (_hunyuan_vl, "transformers' HunYuanVL PIL image processor registered (no torchvision); "
                                "vllm UnquantizedLinearMethod.apply (inputs made contiguous); "
                                "vllm Transformers backend Base._decorate_cls_for_torch_compile (eager: no decoration) "
                                "and MultiModalMixin._process_vision_input (one image per encoder call)"),
}
