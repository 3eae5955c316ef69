"""Pages measured in a real browser: headless Chromium (the Debian package `chromium`,
installed by scripts/install_browser.sh) loads an HTML file at a given window width and
reports what sticks out: the page's scroll width against its width, the elements whose right
edge passes it outside a scrolling box, and each image's shown width against its own."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync")

_MEASURE = """<script>
window.addEventListener('load', () => {
  const doc = document.documentElement, width = doc.clientWidth;
  const boxed = el => { for (let p = el.parentElement; p; p = p.parentElement)
    if (['auto', 'scroll'].includes(getComputedStyle(p).overflowX)) return true; return false; };
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.right > width + 0.5 && !boxed(el)) out.push(el.tagName + (el.className ? '.' + el.className : '') +
      ' right=' + Math.round(r.right));
  }
  const images = [...document.images].map(im => ({alt: im.alt, natural: im.naturalWidth, shown: im.clientWidth}));
  const pre = document.createElement('pre');
  pre.id = 'treedec-measure';
  pre.textContent = JSON.stringify({width, scroll_width: doc.scrollWidth, outside: out.slice(0, 12), images});
  document.body.appendChild(pre);
});
</script>"""


def browser() -> str:
    """The Chromium binary, or skip the test saying how to get it."""
    found = next((b for b in map(shutil.which, BROWSERS) if b), None)
    if found is None:
        pytest.skip("no headless Chromium (chromium) on PATH: `bash scripts/install_browser.sh` installs it")
    return found


def measure(html_file: Path, width: int = 1280, height: int = 900) -> dict:
    """Load `html_file` in headless Chromium `width` px wide; return {width (the page's, less
    the scroll bar), scroll_width, outside (elements past the right edge, not in a scrolling
    box), images ({alt, natural, shown} widths)}."""
    text = Path(html_file).read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="treedec-browser-") as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(text.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
        r = subprocess.run([browser(), *FLAGS, f"--user-data-dir={tmp}/profile", f"--window-size={width},{height}",
                            "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
                           capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="treedec-measure">(.*?)</pre>', r.stdout, re.S)
    assert found, f"Chromium gave no measurement (exit {r.returncode}): {r.stderr[-1500:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                      .replace("&gt;", ">"))
