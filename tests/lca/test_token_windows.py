"""lca.token_windows: consecutive texts grouped to fit a short context."""

from __future__ import annotations

from lca.token_windows import windows_by_tokens


def test_windows_keep_order_fit_the_budget_and_never_drop_an_item():
    items = [f"line {n} " + "x" * (4 * n) for n in range(1, 9)]
    windows = windows_by_tokens(items, 20)
    assert [i for w in windows for i in w] == items
    assert all(sum(max(1, len(i) // 4) + 4 for i in w) <= 20 for w in windows if len(w) > 1)
    assert len(windows) > 1


def test_an_item_larger_than_the_budget_gets_a_window_of_its_own():
    big, small = "y" * 400, "z"
    assert windows_by_tokens([small, big, small], 10) == [[small], [big], [small]]
    assert windows_by_tokens([], 10) == []


def test_the_text_of_an_item_is_taken_by_the_given_function():
    items = [{"t": "a" * 40}, {"t": "b" * 40}]
    assert windows_by_tokens(items, 20, text=lambda item: item["t"]) == [[items[0]], [items[1]]]
    assert windows_by_tokens(items, 40, text=lambda item: item["t"]) == [items]
