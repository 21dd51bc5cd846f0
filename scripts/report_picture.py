"""Make the README's picture of `replay report`: a real page, rendered by a real browser.

    python scripts/report_picture.py [--out docs/report.png] [--browser chromium]

It runs `replay report` as a user does, on two of the sample cassettes (`cassettes/`): the
same question, "What is the weather in Paris?", answered by Anthropic Messages (thinking,
text, a tool_use block) and by the OpenAI Responses API (reasoning, text, a function call).
Headless Chromium (`apt-get install chromium`; Google Chrome works too) opens the page from
its file and takes the screenshot. The page is the same bytes on every run; the pixels
depend on the fonts installed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PICTURE = ROOT / "docs" / "report.png"
CASSETTES = (
    "cassettes/anthropic-thinking-tool-use.msgpack",
    "cassettes/responses-reasoning-tool-call.msgpack",
)
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# The page is at most 1060 px wide with its margins; this height holds one compared pair.
WINDOW = (1100, 1250)


def browser(named: str | None) -> str:
    """The browser to run: the one named, else the first of `BROWSERS` installed."""
    for name in [named] if named else BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    wanted = named or " or ".join(BROWSERS)
    raise SystemExit(f"report_picture: no {wanted} found: apt-get install chromium")


def report(page: Path) -> None:
    """Write the page with the `replay report` command, from the repository's root."""
    command = [sys.executable, "-m", "replay.cli", "report", *CASSETTES, "-o", str(page)]
    subprocess.run(command, cwd=ROOT, check=True)


def screenshot(executable: str, page: Path, out: Path) -> None:
    """Render `page` headless and save what the window shows as a PNG."""
    width, height = WINDOW
    with tempfile.TemporaryDirectory() as profile:
        command = [
            executable,
            "--headless",
            "--no-sandbox",  # root in a container has no user namespace to sandbox in
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={out}",
            page.as_uri(),
        ]
        subprocess.run(command, check=True, capture_output=True, timeout=120)


def main(argv: Sequence[str] | None = None) -> int:
    """Make the picture (default: docs/report.png)."""
    parser = argparse.ArgumentParser(description="Render a replay report to a PNG.")
    parser.add_argument("--out", type=Path, default=PICTURE, help="default: docs/report.png")
    parser.add_argument("--browser", help="the browser to run (default: the first found)")
    args = parser.parse_args(argv)
    executable = browser(args.browser)
    with tempfile.TemporaryDirectory() as scratch:
        page = Path(scratch) / "report.html"
        report(page)
        out = args.out.resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        screenshot(executable, page, out)
    print(f"{args.out}: {out.stat().st_size:,} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
