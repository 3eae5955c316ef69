from treedec.formats.contract import page_to_flat, page_to_tree
from treedec.tokenizer import Tokenizer


def test_round_trip_and_control_tokens(synth_pages, tmp_path):
    tok = Tokenizer()
    for page in synth_pages[:20]:
        flat = page_to_flat(page)
        ids = tok.encode(flat)
        assert tok.decode(ids) == flat
        assert ids.count(tok.block_id) == len(page.blocks) and ids.count(tok.child_id) == len(page.blocks)
        assert tok.unk_id not in ids
        tree = page_to_tree(page)
        assert tok.encode(tree.layout).count(tok.fork_id) == len(page.blocks)
    tok.save(tmp_path)
    again = Tokenizer.load(tmp_path)
    assert again.encode(flat) == ids and len(again) == len(tok)
    assert tok.treedec_tokens is True and again.treedec_tokens is True  # what `model_format` reads plainly


def test_a_model_with_treedec_tokens_writes_treedec_format_unless_named():
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from treedec.formats.declare import model_format

    vlm = SimpleNamespace(tokenizer=Tokenizer(), directory=None)
    assert model_format(OmegaConf.create({}), vlm).name == "treedec"
    assert model_format(OmegaConf.create({"format": "markdown"}), vlm).name == "markdown"


def test_unknown_characters_cost_one_token_each():
    tok = Tokenizer()
    assert tok.encode("a中文b") == [tok.encode("a")[0], tok.unk_id, tok.unk_id, tok.encode("b")[0]]
