"""Screenshot of `dlzero dashboard` for a run, taken with the system's headless Chromium (for docs/).

    python scripts/dashboard_screenshot.py --run runs/tiny --out docs/dashboard.png [--ply 30]

Needs the dashboard extra, selenium, and Debian's `chromium` + `chromium-driver`; it serves the run
on a free loopback port, waits until the page, the latest game and a gating game's evaluation graph
are drawn, steps the replay to `--ply`, and saves the whole page.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from pathlib import Path

import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

from dlzero.dashboard.app import create_app


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="run directory")
    ap.add_argument("--out", required=True, help="PNG file to write")
    ap.add_argument("--width", type=int, default=1500)
    ap.add_argument("--ply", type=int, default=30, help="step the gating replay to this ply")
    args = ap.parse_args()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(args.run), host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={args.width},1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(f"http://127.0.0.1:{port}/")
        wait = WebDriverWait(driver, 120, poll_frequency=0.2)
        wait.until(lambda d: d.execute_script("return document.body.dataset.loaded === '1'"))
        wait.until(lambda d: d.execute_script("return document.querySelectorAll('#latest-moves li').length > 0"))
        wait.until(lambda d: d.execute_script("return document.querySelectorAll('#gating-eval polyline').length > 0"))
        for _ in range(args.ply):
            driver.find_element("id", "gating-next").click()
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(args.width, height + 20)
        driver.execute_script("window.scrollTo(0, 0)")
        time.sleep(0.5)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(args.out)
    finally:
        driver.quit()
        server.should_exit = True
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
