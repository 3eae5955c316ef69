"""A real VLM's BPE under treedec's tokenizer API (`treedec.models.bpe_tokenizer`), as `depth`
and experiments/tokenizer_depth.py use it: built here from tiny tiktoken rank files."""
import json
import string
import subprocess
import sys

import pytest

from cli_helpers import treedec
from conftest import DEMO, ROOT, write_tiktoken
from treedec.errors import UserError
from treedec.formats.contract import BLOCK, CATEGORY_TOKENS, CHILD, EOS, FORK, page_to_flat
from treedec.models.bpe_tokenizer import bpe_tokenizer
from treedec.models.vlm import vlm_tokenizer
from treedec.results.depth import page_depth
from treedec.strategies.base import STRATEGIES

MERGES = (b"he", b"the", b" the")  # each a pair of lower-ranked tokens: t+he, " "+the


def test_control_tokens_stay_single_merges_apply_and_text_round_trips(tmp_path, synth_pages):
    tok = bpe_tokenizer(write_tiktoken(tmp_path / "t.tiktoken", MERGES))
    for t in (BLOCK, FORK, CHILD, EOS, *CATEGORY_TOKENS):
        assert len(tok.encode(t)) == 1, t
    assert tok.count("the") == 1 and tok.count("on the") == 3 and tok.count("thethe") == 2
    for page in synth_pages[:10]:
        flat = page_to_flat(page)
        assert tok.decode(tok.encode(flat)) == flat
    text = "Größe 5 € — 表格"  # bytes beyond ASCII: byte-level, nothing unknown
    assert tok.decode(tok.encode(text)) == text and tok.count(text) == len(text.encode())


def test_without_merges_depths_equal_the_character_tokenizer_s(tmp_path, synth_pages):
    """One byte a token: on ASCII pages without tables (treedec's own tokenizer has HTML table tags as
    one token each) every depth equals the character tokenizer's exactly (control tokens, box digits
    and content counted alike), for sequential and the forked targets; merges only shorten them."""
    plain = bpe_tokenizer(write_tiktoken(tmp_path / "bytes.tiktoken"))
    merged = bpe_tokenizer(write_tiktoken(tmp_path / "merged.tiktoken", MERGES))
    char = vlm_tokenizer()
    pages = [p for p in synth_pages if page_to_flat(p).isascii() and "<table>" not in page_to_flat(p)]
    assert len(pages) >= 20
    shorter = 0
    for name in ("padoc", "crops"):
        for page in pages:
            want = page_depth(page, STRATEGIES.get(name)(char))
            assert page_depth(page, STRATEGIES.get(name)(plain)) == want
            got = page_depth(page, STRATEGIES.get(name)(merged))
            assert got["sequential_depth"] <= want["sequential_depth"] and got["fork_depth"] <= want["fork_depth"]
            shorter += got["sequential_depth"] < want["sequential_depth"]
    assert shorter >= 10  # the merges did apply on these pages


def test_table_rows_needs_its_tags_added(tmp_path, synth_pages):
    path = write_tiktoken(tmp_path / "t.tiktoken")
    page = next(p for p in synth_pages if "<tr>" in page_to_flat(p) and page_to_flat(p).isascii())
    with pytest.raises(UserError, match="no token '<tr>'"):
        page_depth(page, STRATEGIES.get("table_rows")(bpe_tokenizer(path)))
    want = page_depth(page, STRATEGIES.get("table_rows")(vlm_tokenizer()))
    got = page_depth(page, STRATEGIES.get("table_rows")(bpe_tokenizer(path, extra=("<tr>", "</tr>"))))
    # the other tags cost a token a byte here, one in treedec's
    assert got["sequential_depth"] > want["sequential_depth"] and got["fork_depth"] >= want["fork_depth"]


@pytest.mark.parametrize("text, says", [("", "no tiktoken rank lines"), ("QUJD x\n", "not a tiktoken rank line"),
                                        ("!!! 3\n", "not a tiktoken rank line")])
def test_bad_rank_files_are_user_errors(tmp_path, text, says):
    (tmp_path / "bad.tiktoken").write_text(text)
    with pytest.raises(UserError, match=says):
        bpe_tokenizer(tmp_path / "bad.tiktoken")


def test_depth_command_takes_a_tokenizer(tmp_path):
    letters = string.ascii_letters.encode()
    path = write_tiktoken(tmp_path / "t.tiktoken", [bytes([a, b]) for a in letters for b in letters])
    runs = {}
    for name, extra in (("char", []), ("bpe", [f"tokenizer={path}"])):
        r = treedec("depth", "data.pages=6", f"out={tmp_path / name}", *extra)
        assert r.returncode == 0, r.stderr[-2000:]
        runs[name] = json.loads((tmp_path / name / "summary.json").read_text())
    assert runs["bpe"]["tokenizer"] == str(path) and runs["char"]["tokenizer"] == "treedec char-level"
    assert runs["bpe"]["mean_sequential_depth"] < runs["char"]["mean_sequential_depth"]
    assert runs["bpe"]["page_stats"]["content_per_layout"][1] < runs["char"]["page_stats"]["content_per_layout"][1]
    r = treedec("depth", "tokenizer=/no/such.tiktoken", f"out={tmp_path / 'x'}", here=False,
                timeout=300)  # one line, as a fresh process prints it
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(lines) == 1 and "no such file" in lines[0], r.stderr


def test_tokenizer_depth_script_on_the_demo_pages(tmp_path):
    """experiments/tokenizer_depth.py with a one-byte-a-token BPE: layout tokens equal the character
    tokenizer's on every real page (specials single, boxes ASCII), content no fewer (CJK costs 3 bytes)."""
    if not DEMO.is_dir():
        pytest.skip("../shared/omnidocbench_demo is absent")
    path = write_tiktoken(tmp_path / "bytes.tiktoken")
    r = subprocess.run([sys.executable, "experiments/tokenizer_depth.py", "--data", str(DEMO), "--bpe", str(path),
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads((tmp_path / "out" / "tokenizer_depth.json").read_text())
    assert len(d["pages"]) == 12 and (tmp_path / "out" / "tokenizer_depth.png").stat().st_size > 10_000
    for p in d["pages"]:
        assert p["bpe:layout"] == p["char:layout"] and p["bpe:content"] >= p["char:content"]
        if p["language"] == "simplified_chinese":
            assert p["bpe:sequential"] > p["char:sequential"]
    assert set(d["summary"]["bpe_over_char_content"]) == {"english", "simplified_chinese"}
    assert "| padoc: x fewer steps than sequential" in (tmp_path / "out" / "tokenizer_depth.md").read_text()
