"""How big `seal view`'s page gets and how fast it opens in headless Chromium; optionally its screenshot.

    python benchmarks/bench_view.py                                        # the table below
    python benchmarks/bench_view.py --screenshot docs/images/seal_view.png  # also the docs' picture of it

Builds, through the writers the project uses (tests/support/view_pages.py), and views:
  eval-300        a `seal eval` output of the 300 test tasks
  run-10-dumps    a run's 10 validation dumps of the 100 val tasks (1,000 episodes; a policy that improves,
                  so plays repeat across steps, as they do in a real run)
  distinct-1000   1,000 episodes whose action logs all differ (the 800 tasks, and 200 of them played
                  another way), the page's worst case for its size
and prints per page: episodes, size, the time `seal view` took, and the load time in the browser (from the
start of navigation until the table is shown and all data decoded; the page's own clock), the median of
--repeats loads. Needs `bash install.sh --dev` (Debian's chromium and playwright).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from seal.view.command import main as view_main  # noqa: E402
from seal.view.command import make_parser  # noqa: E402
from tests.support.view_pages import EXAMPLES, chromium, eval_folder, opened, run_folder  # noqa: E402


def inputs(scratch: Path) -> dict[str, Callable[[], list[Path]]]:
    return {
        "eval-300": lambda: [eval_folder(scratch / "eval", 300)],
        "run-10-dumps": lambda: [run_folder(scratch / "run", 10)],
        "distinct-1000": lambda: [
            eval_folder(scratch / "all", 800, split="all"),
            eval_folder(scratch / "again", 200, split="all", shift=1),
        ],
    }


def view(folders: list[Path], out: Path) -> float:
    """Seconds `seal view` took to write `out`."""
    args = make_parser().parse_args([*map(str, folders), "--out", str(out)])
    start = time.perf_counter()
    if view_main(args) != 0:
        raise SystemExit(f"bench_view: seal view {' '.join(map(str, folders))} failed")
    return time.perf_counter() - start


def screenshot(browser: object, scratch: Path, path: Path) -> None:
    """The examples' page with the filter on failures and a wrong play open at its failing turn."""
    page_file = scratch / "examples.html"
    view([Path(os.path.relpath(EXAMPLES))], page_file)
    tab, _, _ = opened(browser, page_file)
    tab.set_viewport_size({"width": 1400, "height": 1250})
    tab.select_option("#f-outcome", "fail")
    tab.fill("#f-search", "long_context")
    tab.click("#episodes tbody tr:not([hidden]) >> nth=1")
    tab.evaluate("document.querySelector('#table-wrap').style.maxHeight = '14em'; window.scrollTo(0, 0)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(path))
    tab.close()
    print(f"wrote {path}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3, help="loads per page (the median is shown)")
    parser.add_argument("--screenshot", type=Path, help="also write a PNG of the examples' page here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as name, chromium() as browser:
        scratch = Path(name)
        rows = []
        for label, folders in inputs(scratch).items():
            out = scratch / f"{label}.html"
            seconds = view(folders(), out)
            loads = []
            for _ in range(args.repeats):
                tab, errors, load_ms = opened(browser, out)
                episodes = tab.eval_on_selector_all("#episodes tbody tr", "rows => rows.length")
                if errors:
                    raise SystemExit(f"bench_view: the {label} page failed: {errors[0]}")
                loads.append(load_ms)
                tab.close()
            rows.append((label, episodes, out.stat().st_size / 1e6, seconds, statistics.median(loads)))
        if args.screenshot:
            screenshot(browser, scratch, args.screenshot)
    print(f"{'page':<15}{'episodes':>9}{'size MB':>9}{'seal view s':>13}{'load ms':>9}")
    for label, episodes, size, seconds, load in rows:
        print(f"{label:<15}{episodes:>9}{size:>9.2f}{seconds:>13.1f}{load:>9.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
