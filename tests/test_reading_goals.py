"""The reading goals' rules (issue 51 item 2; issue 48 item 2), on measures made up here: which page each goal
holds for, and when. tests/test_browser.py measures the real pages in Chromium and applies the same rules."""

from __future__ import annotations

import pytest

from page_metrics import Goals, goal_problems, headline_repeats, ratio_appearances, reading_table

pytestmark = pytest.mark.unit


def measure(height=6_000, gpu=1, interval=1, repeats=1, status_words=20, record_link=True, carets=(),
            current=True) -> dict:
    return {"height_1440": height, "height_390": 2 * height, "gpu": gpu, "interval": interval, "repeats": repeats,
            "repeated": "0.96× (a vs b)", "status_words": status_words, "record_link": record_link,
            "carets": list(carets), "current": current}


def test_every_status_line_is_short_and_links_the_record_converted_or_not():
    found = goal_problems({"a": measure(status_words=31), "b": measure(record_link=False)}, converted=(),
                          not_yet={})
    assert found == ["a: the status line has 31 words (at most 30)", "b: the status line does not link the record"]


def test_a_converted_page_is_held_to_every_goal_once_its_gpu_run_is_current():
    page = measure(height=12_001, gpu=4, interval=3, repeats=2, carets=["4096^3"])
    found = goal_problems({"a": page, "b": dict(page)}, converted=("a",), not_yet={})
    assert [f.split(":")[0] for f in found] == ["a"] * 5  # b is not converted: only its status line counts
    assert any("12,001 px tall" in f for f in found) and any("4 mentions of the GPU model" in f for f in found)
    assert any("2 times one headline number (at most 1): 0.96× (a vs b)" in f for f in found)
    assert any("carets in the prose a reader sees: 4096^3" in f for f in found)


def test_until_the_recording_round_only_the_pages_own_goals_hold():
    """A converted page whose GPU run is of an older source shows that run's machine and date beside each result,
    marked: the GPU named, a repeated number and a recorded label's caret wait for the round; height and the
    interval's words do not."""
    page = measure(height=12_001, gpu=9, interval=3, repeats=4, carets=["4096^3"], current=False)
    found = goal_problems({"a": page, "z": measure()}, converted=("a",), not_yet={})
    assert len(found) == 2 and "px tall" in found[0] and '"95 % interval"' in found[1]


def test_a_listed_miss_passes_and_a_listed_goal_that_is_met_fails():
    not_yet = {("a", "height_1440"): "a pilot"}
    others = {"z": measure()}  # not converted: the course's median is not held yet
    assert goal_problems({"a": measure(height=16_000), **others}, converted=("a",), not_yet=not_yet) == []
    assert goal_problems({"a": measure(), **others}, converted=("a",), not_yet=not_yet) == [
        "NOT_YET lists a's height_1440, which it meets now: take it off"]


def test_the_course_median_holds_once_every_lesson_is_converted():
    pages = {"a": measure(height=9_000), "b": measure(height=9_000), "c": measure(height=7_000)}
    assert goal_problems(pages, converted=("a", "b"), not_yet={}) == []
    assert goal_problems(pages, converted=("a", "b", "c"), not_yet={}) == [
        "the course's median height at 1440 px is 9,000 px (at most 8,000)"]
    assert goal_problems(pages, converted=("a", "b", "c", "zz"), not_yet={},
                         goals=Goals(median_height=9_000)) == ["CONVERTED names 'zz', which is no lesson"]
    listed = {("course", "median_height_1440"): "the helpers cut the pages"}
    assert goal_problems(pages, converted=("a", "b", "c"), not_yet=listed) == []
    assert goal_problems(pages, converted=("a", "b", "c"), not_yet=listed, goals=Goals(median_height=9_000)) == [
        "NOT_YET lists the course's median height, which it meets now: take it off"]


def test_the_table_names_each_page_and_the_course_heights():
    table = reading_table({"a": measure(height=7_000), "b": measure(current=False)}, converted=("a", "b"))
    assert "| a | yes | 7,000 |" in table and "| b | yes, GPU run awaited |" in table
    assert "at 1440 px: median height 6,500 px, max 7,000 px (a)" in table


def test_a_goal_threshold_of_the_same_number_is_no_repeat_of_the_measured_ratio():
    line = "a vs b: 655 TFLOP/s, 1.00× cuBLAS (1.00–1.01) · gate 0.90×: met; stretch 1.00×: met"
    assert ratio_appearances("1.00", line) == 1
    assert ratio_appearances("1.00", line + "; again 1.00x") == 2
    assert ratio_appearances("0.95", "0.95× copy · goal 0.95×: within noise") == 1


def test_one_kernel_value_against_two_baselines_shows_once_per_comparison():
    numbers = [("add vs torch", "1.00", 3087.03, 3086.98), ("add vs copy", "1.02", 3087.03, 3024.6)]
    table = "add vs torch\t3,087 GB/s\t3,087 GB/s\nadd vs copy\t3,087 GB/s\t3,025 GB/s\n"
    assert headline_repeats(None, table, numbers) == (1, "3087 (add vs torch)")
    assert headline_repeats(None, table + "the add reached 3,087 GB/s", numbers) == (2, "3087 (add vs torch)")
    assert headline_repeats(None, "1.00× and 1.00×", numbers) == (2, "1.00× (add vs torch)")


def test_one_kernel_timed_in_two_benchmarks_reads_once_per_benchmark_as_the_page_writes_it():
    """cross-entropy's fused kernel, timed against PyTorch (3.616 ms) and against Liger (3.620 ms) in rounds of
    their own: the page writes both 3.62, once per comparison; a third 3.62 is a repeat."""
    numbers = [("fused vs torch", "2.24", 3.616, 8.11), ("fused vs liger", "1.00", 3.620, 3.608)]
    table = "fused vs torch\t3.62 ms\t8.11 ms\nfused vs liger\t3.62 ms\t3.61 ms\n"
    assert headline_repeats(None, table, numbers) == (1, "3.616 (fused vs torch)")
    assert headline_repeats(None, table + "the kernel took 3.62 ms", numbers)[0] == 2
