"""Search on both engines: which boundary replaced each compacted hit in a session compacted
several times (partial compactions included), ranking where the best hit is neither the shortest
nor the newest message, and CJK beyond Japanese."""

from __future__ import annotations

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact
from sessionstore.storage.read.history import boundaries, summarized_messages
from sessionstore.storage.write.session import Session
from tests.support.convo import tool_result, tool_use

PHASES = ("alpha", "bravo", "charlie", "delta")


def _phase(session: Session, name: str, rounds: int = 4) -> list[str]:
    """Rounds that each carry the phase's marker word; the uuids of its user messages."""
    users = []
    for i in range(rounds):
        users.append(session.append({"role": "user", "content": f"{name}marker step {i} " + "filler " * 80}).uuid)
        session.append({"role": "assistant", "content": [tool_use(f"{name}{i}", "Bash", command=f"echo {name}{i}")]})
        session.append({"role": "user", "content": [tool_result(f"{name}{i}", f"{name}output {i} " + "z " * 400)]})
        session.append({"role": "assistant", "content": f"{name}done {i}"})
    return users


def _compacted(session: Session) -> Session:
    """alpha: full compaction 1. bravo: partial --up-to (2) keeps its last rounds, a later full
    compaction (3) summarizes them. charlie: partial --from (4) summarizes its tail, keeps its head.
    delta stays in the active view."""
    _phase(session, "alpha")
    compact(session)  # boundary 1: alpha
    bravo = _phase(session, "bravo")
    compact(session, up_to_uuid=bravo[2])  # boundary 2: up to bravo's third round
    compact(session)  # boundary 3: bravo's kept rounds
    charlie = _phase(session, "charlie")
    compact(session, from_uuid=charlie[2])  # boundary 4: charlie after its third message
    _phase(session, "delta")
    return session


def _first_summarizer(session: Session) -> dict[int, int]:
    """seq -> the first boundary whose summarized messages include it (from the history API)."""
    first: dict[int, int] = {}
    for index in range(1, len(boundaries(session, summaries=False)) + 1):
        for message in summarized_messages(session, index):
            first.setdefault(message.seq, index)
    return first


def test_each_compacted_hit_names_the_boundary_that_replaced_it(store: SessionStore) -> None:
    session = _compacted(store.create_session(title="many boundaries"))
    assert len(boundaries(session, summaries=False)) == 4
    first = _first_summarizer(session)
    # By construction: which boundary replaced each phase's original messages.
    expected_by_phase = {"alpha": {1}, "bravo": {2, 3}, "charlie": {None, 4}, "delta": {None}}
    for phase, expected in expected_by_phase.items():
        hits = [h for h in store.search(f"{phase}marker", limit=50) if h.role == "user"]
        originals = [h for h in hits if h.snippet.startswith(f"«{phase}marker» step")]
        assert len(originals) == 4, (phase, [h.snippet[:40] for h in hits])
        assert {h.boundary for h in originals} == expected, phase
        for hit in originals:
            assert hit.boundary == first.get(hit.seq), (phase, hit.seq)
    # bravo: its first rounds went at boundary 2, the rounds that boundary kept went at 3.
    bravo = sorted(
        (h.seq, h.boundary) for h in store.search("bravomarker", limit=50) if h.snippet.startswith("«bravomarker» step")
    )
    assert [b for _, b in bravo] == [2, 2, 3, 3]
    # charlie: the head that boundary 4 kept is active, the tail it summarized names it.
    charlie = sorted(
        (h.seq, h.boundary)
        for h in store.search("charliemarker", limit=50)
        if h.snippet.startswith("«charliemarker» step")
    )
    assert [b for _, b in charlie] == [None, None, None, 4]  # `from` keeps the pivot itself
    # Every compacted hit of any kind (summaries replaced later included) names its first summarizer.
    for hit in store.search("marker", limit=200, in_="compacted"):
        assert hit.boundary == first[hit.seq], (hit.seq, hit.role, hit.snippet[:40])


def test_the_best_hit_is_neither_the_shortest_nor_the_newest(store: SessionStore) -> None:
    session = store.create_session(title="ranking")
    prose = " ".join(f"word{i}" for i in range(120))
    session.append({"role": "user", "content": f"{prose} kubernetes " * 1 + prose})  # older, one mention
    best = session.append(
        {
            "role": "assistant",
            "content": ("kubernetes rollout of the kubernetes cluster: " + "kubernetes " * 25 + prose),
        }
    )  # many mentions, long
    shortest = session.append({"role": "user", "content": "kubernetes?"})  # shortest
    session.append({"role": "assistant", "content": f"{prose} then kubernetes once {prose} {prose}"})
    newest = session.append({"role": "user", "content": f"{prose} a final word on kubernetes {prose}"})
    hits = store.search("kubernetes", limit=10)
    assert len(hits) == 5
    assert hits[0].seq == best.seq, [(h.seq, h.snippet[:30]) for h in hits]
    assert hits[0].seq not in (shortest.seq, newest.seq)
    # Two terms: the message holding both, often, beats one holding each once, newer and shorter.
    both = session.append({"role": "assistant", "content": "postgres migration " * 12 + prose})
    session.append({"role": "user", "content": "postgres migration?"})
    two = store.search("postgres migration", limit=5)
    assert two[0].seq == both.seq, [(h.seq, h.snippet[:30]) for h in two]


CJK = {
    "zh": ("我们需要修复数据库迁移中的错误，然后重新运行测试。", ["数据库迁移", "错误", "数据 测试"]),
    "ko": (
        "데이터베이스 마이그레이션 오류를 수정한 뒤 테스트를 다시 실행해야 합니다.",
        ["마이그레이션", "오류", "데이터 실행"],
    ),
    "mixed": (
        "部署 pipeline 失败了：kubectl rollout 超时，回滚到上一个版本。",
        ["pipeline 失败", "回滚", "kubectl 超时"],
    ),
}


@pytest.mark.parametrize("language", sorted(CJK))
def test_chinese_korean_and_mixed_short_and_long_terms(store: SessionStore, language: str) -> None:
    text, queries = CJK[language]
    session = store.create_session(title=language)
    session.append({"role": "user", "content": "unrelated english words about nothing in particular"})
    target = session.append({"role": "assistant", "content": text})
    session.append({"role": "user", "content": "数 데 部 a b c"})  # single characters of the terms, not the terms
    for query in queries:
        hits = store.search(query, limit=5)
        assert [h.seq for h in hits] == [target.seq], (language, query)
        for term in query.split():
            assert f"«{term}»" in hits[0].snippet, (language, query, hits[0].snippet)
