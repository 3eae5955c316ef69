"""How the HF Idefics3 processor handles our tiny config (image-token count, non-square pages)."""
import numpy as np
import torch
from PIL import Image
from transformers import Idefics3ImageProcessor, Idefics3Processor, PreTrainedTokenizerFast

from treedec.models.tiny import image_seq_len, tiny_tokenizer

torch.set_num_threads(1)
tok = tiny_tokenizer()
hf = PreTrainedTokenizerFast(tokenizer_object=tok.hf, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>",
                             bos_token="<bos>")
size, patch, scale = 256, 16, 1
n = image_seq_len(size, patch, scale)
ip = Idefics3ImageProcessor(do_image_splitting=False, max_image_size={"longest_edge": size},
                            size={"longest_edge": size}, do_resize=True)
proc = Idefics3Processor(image_processor=ip, tokenizer=hf, image_seq_len=n)
for w, h in ((256, 256), (256, 128), (200, 300)):
    im = Image.fromarray(np.full((h, w, 3), 255, np.uint8))
    out = proc(text=["<image>hi"], images=[[im]], return_tensors="pt")
    ids = out["input_ids"][0].tolist()
    print(f"page {w}x{h}: pixel_values {tuple(out['pixel_values'].shape)}",
          f"mask={tuple(out['pixel_attention_mask'].shape) if 'pixel_attention_mask' in out else None}",
          f"n_image_tokens={ids.count(tok.image_id)} (expected {n})", "prefix:", hf.convert_ids_to_tokens(ids[:3]),
          "suffix:", hf.convert_ids_to_tokens(ids[-4:]))
