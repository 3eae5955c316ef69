"""The files a checkpoint needs besides its weights so that a serving stack that reads
standard HF folders (vLLM, `AutoProcessor`, `AutoTokenizer`) gives exactly our prompt.

- `tokenizer_config.json`: the project tokenizer as a fast tokenizer (`tokenizer.json`
  stays treedec's own), with its special tokens named;
- `processor_config.json`: `Idefics3Processor` with `image_seq_len` = the spec's image
  tokens, and its image processor set so that one page becomes exactly our pixels: no
  splitting, longest edge = max image size = `spec.image_size` (our canvas is already that
  square, so the resize is the identity), rescale 1/255 then normalize mean 0.5 / std 0.5
  (= x/127.5 - 1). A prompt holding one `<image>` token is then expanded by the processor
  to `<fake_token_around_image><global-img>` + n `<image>` + `<fake_token_around_image>`,
  which is `treedec.models.tiny.image_prompt_ids`.

Serving callers pass the page as `canvas(image, spec.image_size)` (the same white square
the embedded engine builds its pixels from); `tests/test_vllm_backend.py` checks both.
"""
from __future__ import annotations

from pathlib import Path

from treedec.tokenizer import BOS, EOS, PAD, UNK, Tokenizer


def hf_tokenizer(tokenizer: Tokenizer, max_length: int):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tokenizer.hf, bos_token=BOS, eos_token=EOS, unk_token=UNK,
                                   pad_token=PAD, model_max_length=max_length)


def hf_processor(tokenizer: Tokenizer, image_size: int, image_tokens: int, max_length: int):
    """The HF `Idefics3Processor` that expands one `<image>` into our image prompt."""
    from transformers import Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    edge = {"longest_edge": image_size}
    images = Idefics3ImageProcessorPil(do_image_splitting=False, size=edge, max_image_size=edge, do_resize=True,
                                       do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
                                       image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], do_pad=True,
                                       do_convert_rgb=True)
    return Idefics3Processor(image_processor=images, tokenizer=hf_tokenizer(tokenizer, max_length),
                             image_seq_len=image_tokens)


def write_serving_files(directory: str | Path, tokenizer: Tokenizer, image_size: int, image_tokens: int,
                        max_length: int) -> None:
    """Write tokenizer_config.json and processor_config.json into `directory`; the
    project's `tokenizer.json` is rewritten last so it stays byte-for-byte ours."""
    d = Path(directory)
    hf_processor(tokenizer, image_size, image_tokens, max_length).save_pretrained(d)
    tokenizer.save(d)
