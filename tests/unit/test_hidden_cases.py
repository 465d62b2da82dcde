"""Hidden cases: drawn where eager accepts them, never a shown case, two disjoint sets dealt by a
secret, flagged when they fail, and reported apart from the shown cases."""

from __future__ import annotations

from evaluator.cases.hidden_cases import eager_accepts, hidden_sets, perturb
from evaluator.cases.suites import select_operators
from evaluator.cases.testcase import parse_case
from evaluator.config import EvalConfig
from evaluator.reports.report import compute_scores
from evaluator.results import OperatorResult, Status, TestResult

MM = parse_case("((T([768, 4096], bf16, [1, 768]), T([4096, 768], bf16)), {})")
RELU = [parse_case("((T([37, 129], f32),), {})"), parse_case("((T([64, 128], f32),), {})")]


def test_variants_keep_equal_sizes_equal_so_eager_accepts_them() -> None:
    variants = [v.serialize() for v in perturb(MM)]
    assert variants == [
        "((T([768, 4097], bf16), T([4097, 768], bf16)), {})",  # an odd size, both sides
        "((T([769, 4096], bf16), T([4096, 769], bf16)), {})",  # one more row
        "((T([768, 4096], bf16, [1, 768]), T([4096, 768], bf16, [1, 4096])), {})",  # layout
    ]
    assert all(eager_accepts("mm.default", v) for v in perturb(MM))


def test_a_variant_eager_refuses_is_not_a_hidden_case() -> None:
    bad = parse_case("((T([4, 5], f32), T([6, 7], f32)), {})")
    assert not eager_accepts("mm.default", bad)
    view = parse_case("((T([4, 6], f32), [24]), {})")
    # growing the tensor but not the size list makes an invalid view: only the layout variant
    # could stay, and a view of a non-contiguous tensor is refused too
    assert not [v for v in perturb(view) if eager_accepts("view.default", v)]


def test_two_disjoint_sets_of_unseen_cases_dealt_by_the_secret() -> None:
    spare = [parse_case("((T([3, 5, 7], f32),), {})"), parse_case("((T([1000], f32),), {})")]
    rounds, final = hidden_sets("relu.default", RELU, spare, 3, "secret-a")
    shown = {c.serialize() for c in RELU}
    r_keys, f_keys = {c.serialize() for c in rounds}, {c.serialize() for c in final}
    assert len(rounds) == len(final) == 3
    assert not (r_keys & f_keys) and not ((r_keys | f_keys) & shown)
    assert all(c.hidden for c in rounds + final)
    again = hidden_sets("relu.default", RELU, spare, 3, "secret-a")
    assert [c.serialize() for c in again[1]] == [c.serialize() for c in final]
    other = {c.serialize() for c in hidden_sets("relu.default", RELU, spare, 3, "secret-b")[1]}
    assert other != f_keys or len(r_keys | f_keys) == len(other)


def test_selection_deals_hidden_sets_and_the_backendbench_profile_has_none() -> None:
    sel = select_operators("smoke", max_cases_per_op=2, hidden_per_set=2, hidden_salt="s")
    assert all(oc.hidden_round and oc.hidden_final for oc in sel.ops), [
        oc.op for oc in sel.ops if not oc.hidden_final
    ]
    for oc in sel.ops:
        shown = {c.serialize() for c in oc.cases}
        assert not shown & {c.serialize() for c in oc.hidden_round + oc.hidden_final}
    cfg = EvalConfig()
    assert cfg.hidden_per_set() == 2
    cfg.correctness.tolerance_profile = "backendbench"
    assert cfg.hidden_per_set() == 0


def test_shown_and_hidden_pass_rates_are_reported_apart() -> None:
    fitted = OperatorResult(
        op="relu.default",
        folder="relu__default",
        status=Status.FAILED,
        tests=4,
        passed=2,
        hidden_tests=2,
        hidden_passed=0,
        results=[TestResult(args="a", passed=True)] * 2
        + [TestResult(args="b", passed=False, hidden=True, flags=["hidden_case"])] * 2,
    )
    scores = compute_scores([fitted])
    assert scores["shown_pass_rate"] == 1.0
    assert scores["hidden_pass_rate"] == 0.0
    assert scores["num_hidden_tests"] == 2
