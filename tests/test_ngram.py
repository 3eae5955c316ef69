from treedec.drafters.ngram import NgramMatcher


def test_one_match_proposes_the_rest_capped():
    m = NgramMatcher(max_depth=4)
    tree = m.propose([9, 1, 2, 3], [[7, 1, 2, 3, 4, 5, 6, 7, 8]])
    assert tree.tokens == [4, 5, 6, 7] and tree.parents == [-1, 0, 1, 2]


def test_window_grows_to_disambiguate():
    drafts = [[5, 1, 2, 3, 10, 11], [6, 1, 2, 3, 20, 21]]
    m = NgramMatcher()
    assert sorted(m.matches([6, 1, 2, 3], drafts)) == [(1, 4)]  # w=4 singles out the second draft
    assert m.propose([6, 1, 2, 3], drafts).tokens == [20, 21]


def test_several_matches_build_a_prefix_tree():
    drafts = [[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 7], [9, 2, 3, 4, 8]]
    tree = NgramMatcher().propose([0, 2, 3, 4], drafts)  # w=3 matches all three; w=4 matches none
    # continuations 5 6 | 5 7 | 8 share their first token where they agree
    assert tree.tokens == [5, 6, 7, 8]
    assert tree.parents == [-1, 0, 0, -1]


def test_no_match_no_draft_and_node_cap():
    m = NgramMatcher(max_nodes=3)
    assert m.propose([1, 2], [[1, 2, 3]]) is None  # shorter than w_min
    assert m.propose([4, 5, 6], [[1, 2, 3]]) is None
    tree = m.propose([1, 2, 3], [[1, 2, 3, 4, 5], [1, 2, 3, 6, 7]])
    assert len(tree) == 3


def test_fuzzy_matching_resyncs_after_a_misread_token():
    """A draft with one wrong token: exact matching proposes nothing until w_min tokens past
    the error; with `fuzzy` the window may differ in one token, so the rest of the draft is
    proposed right after the target corrected it."""
    draft = [[1, 2, 3, 4, 5, 99, 7, 8, 9, 10]]  # the target reads 6 where the draft has 99
    history = [1, 2, 3, 4, 5, 6]
    assert NgramMatcher().propose(history, draft) is None
    tree = NgramMatcher(fuzzy=5).propose(history, draft)
    assert tree.tokens == [7, 8, 9, 10]
    assert NgramMatcher(fuzzy=5).propose([1, 2, 0, 4, 0, 6], draft) is None  # two differences: no match
    assert NgramMatcher(fuzzy=5).propose([2, 3, 4, 5, 99], draft).tokens == [7, 8, 9, 10]  # exact first
