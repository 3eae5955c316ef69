import pytest

from treedec.graph import DecodingGraph


def _tree():
    """root: prompt [P0 P1] + layout [a F b F c]; branch x forks at first F; branch y at
    second F; branch z is nested: forks from x at its 2nd token."""
    g = DecodingGraph()
    r = g.root([100, 101])
    g.append(r.id, [1, 9])  # a F
    x = g.fork(r.id, at=3, first=[50])
    g.append(r.id, [2, 9])  # b F
    y = g.fork(r.id, at=5, first=[50])
    g.append(r.id, [3])
    g.append(x.id, [11, 12, 13])
    z = g.fork(x.id, at=2, first=[60])
    g.append(z.id, [21, 22])
    g.append(y.id, [31])
    return g, r, x, y, z


def test_context_is_ancestors_only():
    g, r, x, y, z = _tree()
    assert g.context(x.id) == [100, 101, 1, 50, 11, 12, 13]
    assert g.context(y.id) == [100, 101, 1, 9, 2, 50, 31]
    assert g.context(z.id) == [100, 101, 1, 50, 11, 60, 21, 22]  # nested: sees x up to its fork point
    assert g.context(r.id) == [100, 101, 1, 9, 2, 9, 3]


def test_positions_continue_from_fork_point():
    g, r, x, y, z = _tree()
    assert list(g.positions(r.id)) == list(range(7))
    assert list(g.positions(x.id)) == [3, 4, 5, 6]  # <CHILD> takes the FORK's position 3
    assert list(g.positions(y.id)) == [5, 6]
    assert list(g.positions(z.id)) == [5, 6, 7]  # forks at x's token index 2 (position 5)


def test_can_see_matches_context():
    g, r, x, y, z = _tree()
    # every token's visible set equals its own prefix plus the ancestors' prefixes
    for s in g.streams:
        for i in range(len(s.tokens)):
            seen = [(t.id, j) for t in g.streams for j in range(len(t.tokens)) if g.can_see(s.id, i, t.id, j)]
            expect = []
            for a, end in g.ancestors(s.id)[:-1]:
                expect += [(a, j) for j in range(end)]
            expect += [(s.id, j) for j in range(i + 1)]
            assert sorted(seen) == sorted(expect)
    assert not g.can_see(y.id, 0, x.id, 0)  # siblings never see each other
    assert not g.can_see(x.id, 0, r.id, 3)  # the FORK token itself is hidden from the child


def test_critical_path_nested():
    g, r, x, y, z = _tree()
    # root generates 5 tokens at steps 1..5; x starts after step 2 (its F) -> steps 3,4,5;
    # z forks at x's token index 2 (made at step 4) -> z at 5,6; y after step 4 -> step 5
    assert g.gen_steps(r.id) == [0, 0, 1, 2, 3, 4, 5]
    assert g.gen_steps(x.id) == [0, 3, 4, 5]
    assert g.gen_steps(z.id) == [0, 5, 6]
    assert g.gen_steps(y.id) == [0, 5]
    assert g.critical_path() == 6
    assert g.total_generated() == 5 + 3 + 2 + 1
    g.append(z.id, [23, 24, 25])
    assert g.critical_path() == 9


def test_flatten_splices_children_in_place_of_fork_tokens():
    g, r, x, y, z = _tree()
    assert g.flatten() == [1, 50, 11, 60, 21, 22, 13, 2, 50, 31, 3]
    assert g.flatten(drop_tail=[22, 31]) == [1, 50, 11, 60, 21, 13, 2, 50, 3]
    assert g.flatten(replace_fork_token=False) == [1, 50, 11, 60, 21, 22, 12, 13, 9, 2, 50, 31, 9, 3]


def test_verbs_reject_misuse():
    g, r, x, y, z = _tree()
    with pytest.raises(ValueError):
        g.fork(r.id, at=99)
    g.finish(y.id)
    with pytest.raises(ValueError):
        g.append(y.id, [1])
    with pytest.raises(ValueError):
        g.root([1])
    assert {s.id for s in g.live()} == {r.id, x.id, z.id}
    g.finish(r.id), g.finish(x.id), g.finish(z.id, "limit", cut=True)
    assert g.done and g[z.id].status == "cut"
