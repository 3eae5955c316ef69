import sys, random, time, torch, torch.nn.functional as F
from reading_data import render, sample_page
from transformers import Idefics3ForConditionalGeneration
from treedec.models.tiny import tiny_idefics3_config, tiny_tokenizer
torch.set_num_threads(1); torch.manual_seed(0)
tok = tiny_tokenizer(); g = 8
cfg = tiny_idefics3_config(tok, image_size=128, patch_size=16, scale_factor=1)
m = Idefics3ForConditionalGeneration(cfg)
vis = m.model.vision_model
print("patch w std", vis.embeddings.patch_embedding.weight.std().item(), "pos std", vis.embeddings.position_embedding.weight.std().item())
mode = sys.argv[1]
head = torch.nn.Linear(cfg.vision_config.hidden_size, len(tok))
params = list(head.parameters()) + (list(vis.parameters()) if mode != "pixels" else [])
lin = torch.nn.Linear(256, len(tok))
if mode == "pixels": params = list(lin.parameters())
opt = torch.optim.AdamW(params, lr=1e-3)
rng = random.Random(0)
for step in range(101):
    pages = [sample_page(rng, g, int(sys.argv[2])) for _ in range(16)]
    imgs = torch.tensor(__import__('numpy').stack([render(p, g, 16, 13) for p in pages])).float().div(255).sub(.5).div(.5)
    lab = torch.full((16, g * g), tok.pad_id)
    for b, pg in enumerate(pages):
        for r in pg:
            for i, t in enumerate(tok.encode(r.text)):
                lab[b, (r.cy + i // r.w) * g + r.cx + i % r.w] = t
    if mode == "pixels":
        x = imgs.unfold(1, 16, 16).unfold(2, 16, 16).reshape(16, g * g, 256)
        logits = lin(x)
    else:
        pix = imgs[:, None].expand(-1, 3, -1, -1)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=sys.argv[3] == "1"):
            logits = head(vis(pixel_values=pix).last_hidden_state).float()
    loss = F.cross_entropy(logits.flatten(0, 1), lab.flatten())
    opt.zero_grad(); loss.backward(); opt.step()
    gm = lab != tok.pad_id
    if step % 25 == 0 or step == 149:
        print(mode, step, round(loss.item(), 3), "glyph acc", (logits.argmax(-1)[gm] == lab[gm]).float().mean().item(), flush=True)
