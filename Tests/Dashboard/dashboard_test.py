#!/usr/bin/env python3
"""The dashboard in a real headless Chromium (Debian's chromium and chromium-driver, selenium from PyPI).

Starts TestOrigin and a `haul serve` with a token on loopback, opens the page, gives it the token, adds a download
through the form, pauses and resumes it from its buttons, watches the bar reach 100%, checks the file's sha256,
restarts the server under the page (the page must reconnect its event stream by itself), and saves a screenshot.

Usage: dashboard_test.py BUILD_DIR [SCREENSHOT]
"""
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

TOKEN = "dashboard-test-token-0123456789"


def start(argv, log):
    """Starts a server that prints '... listening on http://HOST:PORT' first; returns (process, base URL)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    if "http://" not in line:
        raise RuntimeError(f"{argv[0]} did not start: {line!r}")
    return proc, line[line.index("http://"):].strip()


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1200,800", "--no-first-run", "--disable-extensions"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def main():
    build = sys.argv[1]
    screenshot = sys.argv[2] if len(sys.argv) > 2 else os.path.join(build, "dashboard.png")
    work = tempfile.mkdtemp(prefix="haul-dashboard-")
    os.makedirs(f"{work}/www")
    data = os.urandom(2 << 20)
    with open(f"{work}/www/debian.iso", "wb") as f:
        f.write(data)
    log = open(f"{work}/servers.log", "w")
    origin, origin_url = start([f"{build}/TestOrigin", "--root", f"{work}/www"], log)
    haul_argv = [f"{build}/haul", "serve", "--download-dir", f"{work}/dl", "--data-dir", f"{work}/data",
                 "--min-free-space", "16M",
                 "--token", TOKEN, "--connections", "2"]
    haul, base = start(haul_argv + ["--listen", "127.0.0.1:0"], log)
    driver = None
    ok = False
    try:
        driver = browser()
        wait = WebDriverWait(driver, 30, poll_frequency=0.1)
        driver.get(base + "/")

        # The API answers 401 without the token: the page asks for it once and keeps it.
        wait.until(lambda d: d.find_element(By.ID, "token-form").is_displayed())
        driver.find_element(By.ID, "token").send_keys(TOKEN)
        driver.find_element(By.CSS_SELECTOR, "#token-form button").click()
        wait.until(lambda d: d.find_element(By.ID, "connection").get_attribute("data-state") == "live")
        assert driver.execute_script("return localStorage.getItem('haul.token')") == TOKEN

        # A bad URL gets the server's problem under the form.
        driver.find_element(By.ID, "url").send_keys("ftp://example.com/x")
        driver.find_element(By.ID, "add").click()
        wait.until(lambda d: "url" in d.find_element(By.ID, "add-problem").text)
        driver.find_element(By.ID, "url").clear()

        # Add: 2 MiB trickled at 256 KiB/s takes about 8 s, time enough to pause it on the way.
        driver.find_element(By.ID, "url").send_keys(f"{origin_url}/files/debian.iso?rate=262144")
        driver.find_element(By.ID, "add").click()
        item = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "li.download"))
        wait.until(lambda d: item.get_attribute("data-state") == "downloading" and percent(item) > 0)
        assert item.find_element(By.CSS_SELECTOR, ".name").text == "debian.iso"
        wait.until(lambda d: item.find_element(By.CSS_SELECTOR, ".speed").text.endswith("/s"))

        item.find_element(By.CSS_SELECTOR, ".pause").click()
        wait.until(lambda d: item.get_attribute("data-state") == "paused")
        paused_at = percent(item)
        time.sleep(1)
        assert percent(item) == paused_at, "a paused download moved on"
        assert percent(item) < 100

        # Resume: restart the server under the page first, so the rest arrives over a reconnected stream.
        stop(haul)
        port = base.rsplit(":", 1)[1]
        haul, _ = start(haul_argv + ["--listen", f"127.0.0.1:{port}"], log)
        wait.until(lambda d: d.find_element(By.ID, "connection").get_attribute("data-state") == "live")
        item.find_element(By.CSS_SELECTOR, ".resume").click()
        WebDriverWait(driver, 60, poll_frequency=0.2).until(lambda d: item.get_attribute("data-state") == "completed")
        assert percent(item) == 100, item.text
        width = driver.execute_script("return arguments[0].style.width", item.find_element(By.CSS_SELECTOR, ".fill"))
        assert float(width.rstrip("%")) == 100, width
        with open(f"{work}/dl/debian.iso", "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == hashlib.sha256(data).hexdigest(), "file differs"

        # A failing download shows its error and a Retry button.
        driver.find_element(By.ID, "url").send_keys(f"{origin_url}/files/missing.iso")
        driver.find_element(By.ID, "add").click()
        failed = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "li.download[data-state=failed]"))
        assert "http_404" in failed.find_element(By.CSS_SELECTOR, ".error").text
        assert failed.find_element(By.CSS_SELECTOR, ".retry").is_displayed()
        assert "2 downloads" in driver.find_element(By.ID, "totals").text
        driver.save_screenshot(screenshot)

        failed.find_element(By.CSS_SELECTOR, ".remove").click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "li.download")) == 1)

        # Nothing the page did was refused by its own Content-Security-Policy or threw.
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"
                  and "Failed to load resource" not in e["message"]]
        assert not errors, errors
        ok = True
        print(f"dashboard: passed (screenshot {screenshot})")
    finally:
        if driver is not None:
            if not ok:
                driver.save_screenshot(screenshot)
                print(f"dashboard: FAILED, screenshot {screenshot}", file=sys.stderr)
            driver.quit()
        stop(haul)
        stop(origin)
        log.close()
        if not ok:
            sys.stderr.write(open(f"{work}/servers.log").read()[-4000:])
        shutil.rmtree(work, ignore_errors=True)


def percent(item):
    text = item.find_element(By.CSS_SELECTOR, ".percent").text.rstrip("%")
    return int(text) if text else -1


if __name__ == "__main__":
    main()
