"""Headless Chromium for the viewer's tests, benchmark and screenshots.

Debian's ``chromium`` package (``make browser``) driven by playwright, whose wheel bundles its
driver: no browser is downloaded (never ``playwright install``). The flags keep it offline and
quiet in a container: no sandbox (containers lack the namespaces it needs), no GPU, no QUIC, no
background updates or sync. Playwright gives each launch a fresh profile folder.
"""

from __future__ import annotations

__all__ = ["CHROMIUM", "launch_chromium"]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
)


def launch_chromium(playwright):
    """A headless ``Browser`` of Debian's Chromium from a ``sync_playwright()`` context."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_FLAGS))
