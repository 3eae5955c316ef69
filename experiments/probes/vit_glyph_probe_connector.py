import sys, random, torch, numpy as np, torch.nn.functional as F
from reading_data import render, sample_page
from transformers import Idefics3ForConditionalGeneration
from treedec.models.tiny import tiny_idefics3_config, tiny_tokenizer
torch.set_num_threads(1); torch.manual_seed(0)
tok = tiny_tokenizer(); g = 8
cfg = tiny_idefics3_config(tok, image_size=128, patch_size=16, scale_factor=1)
tie = sys.argv[1] == "tie"
if tie: cfg.tie_word_embeddings = cfg.text_config.tie_word_embeddings = True
m = Idefics3ForConditionalGeneration(cfg)
if tie: m.lm_head.weight = m.model.text_model.embed_tokens.weight
print("lm_head std", m.lm_head.weight.std().item(), "proj std", m.model.connector.modality_projection.proj.weight.std().item())
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
rng = random.Random(0)
for step in range(101):
    pages = [sample_page(rng, g, 2) for _ in range(16)]
    imgs = torch.tensor(np.stack([render(p, g, 16, 13) for p in pages])).float().div(255).sub(.5).div(.5)
    lab = torch.full((16, g * g), tok.pad_id)
    for b, pg in enumerate(pages):
        for r in pg:
            for i, t in enumerate(tok.encode(r.text)):
                lab[b, (r.cy + i // r.w) * g + r.cx + i % r.w] = t
    pix = imgs[:, None, None].expand(-1, 1, 3, -1, -1)
    emb = m.model.get_image_features(pix, return_dict=True).pooler_output.view(16, g * g, -1)
    logits = m.lm_head(emb)
    loss = F.cross_entropy(logits.flatten(0, 1), lab.flatten())
    opt.zero_grad(); loss.backward(); opt.step()
    gm = lab != tok.pad_id
    if step % 25 == 0:
        print(sys.argv[1], step, round(loss.item(), 3), "glyph acc", (logits.argmax(-1)[gm] == lab[gm]).float().mean().item(), "emb std", emb.std().item(), flush=True)
