from treedec.serialize import page_to_flat, page_to_tree
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


def test_unknown_characters_cost_one_token_each():
    tok = Tokenizer()
    assert tok.encode("a中文b") == [tok.encode("a")[0], tok.unk_id, tok.unk_id, tok.encode("b")[0]]
