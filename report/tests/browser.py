"""Headless Chromium driven over --remote-debugging-pipe (the DevTools protocol), and PNG
pixels read with zlib: what the report tests need, with no package beyond the standard
library.

    with Browser() as b:
        page = b.open("file:///path/to/seg.html")  # waits for window.swiReady
        png = page.screenshot(selector="#gl")
        b.errors                                  # console errors, exceptions, log errors
        b.requests                                # every URL the page asked for
"""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
import zlib
import struct

SKIP = 77


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class Browser:
    def __init__(self, offline=False, size=(1280, 900)):
        self.offline = offline
        self.size = size
        self.errors = []
        self.requests = []
        self.console = []
        self._id = 0
        self._buf = b""
        self._events = []

    def __enter__(self):
        exe = chromium()
        if not exe:
            raise RuntimeError("chromium not found")
        self.profile = tempfile.mkdtemp(prefix="swi-chromium-")
        args = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--use-angle=swiftshader",
                "--enable-unsafe-swiftshader", "--remote-debugging-pipe", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--metrics-recording-only",
                "--user-data-dir=" + self.profile, "--window-size=%d,%d" % self.size, "about:blank"]
        if self.offline == "proxy":
            # no route anywhere: every request goes to a port nobody listens on
            args[1:1] = ["--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]
        elif self.offline:
            # a network namespace of its own with no interface: nothing can be reached
            args = ["unshare", "-n"] + args
        r_cmd, w_cmd = os.pipe()  # we write commands to w_cmd; chromium reads fd 3
        r_res, w_res = os.pipe()  # chromium writes fd 4; we read r_res

        def child():
            # out of the way of 3 and 4 first, then onto them (dup2 clears close-on-exec;
            # every other descriptor of ours is close-on-exec already)
            a = fcntl.fcntl(r_cmd, fcntl.F_DUPFD_CLOEXEC, 10)
            b = fcntl.fcntl(w_res, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.log = open(os.path.join(self.profile, "chromium.log"), "wb")
        self.proc = subprocess.Popen(args, close_fds=False, preexec_fn=child, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        os.close(r_cmd)
        os.close(w_res)
        self.w = w_cmd
        self.r = r_res
        os.set_blocking(self.r, True)
        return self

    def log_tail(self):
        try:
            with open(os.path.join(self.profile, "chromium.log"), "rb") as f:
                return f.read()[-2000:].decode(errors="replace")
        except OSError:
            return ""

    def __exit__(self, *exc):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.w, self.r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    # ---- the protocol: JSON messages ended by NUL -------------------------------------
    def _send(self, msg):
        data = json.dumps(msg).encode() + b"\0"
        while data:
            n = os.write(self.w, data)
            data = data[n:]

    def _recv(self, deadline):
        import select
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium")
            ready, _, _ = select.select([self.r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe: " + self.log_tail())
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def _event(self, m):
        method, p = m.get("method"), m.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            self.console.append((p.get("type"), text))
            if p.get("type") in ("error", "assert"):
                self.errors.append("console.%s: %s" % (p.get("type"), text))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.errors.append("exception: %s %s" % (d.get("text"), d.get("exception", {}).get("description", "")))
        elif method == "Log.entryAdded":
            e = p.get("entry", {})
            if e.get("level") == "error":
                self.errors.append("log: %s %s" % (e.get("text"), e.get("url", "")))
        elif method == "Network.requestWillBeSent":
            self.requests.append(p.get("request", {}).get("url", ""))
        elif method == "Network.loadingFailed":
            self.errors.append("network: failed %s" % p.get("errorText"))
        self._events.append(m)

    def call(self, method, params=None, session=None, timeout=60):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._send(msg)
        deadline = time.monotonic() + timeout
        while True:
            m = self._recv(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self._event(m)

    def pump(self, seconds):
        """Take the events that arrive within `seconds`."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self._event(self._recv(deadline))
        except TimeoutError:
            pass

    def open(self, url, ready="window.swiReady === true", timeout=60):
        t = self.call("Target.createTarget", {"url": "about:blank"})
        s = self.call("Target.attachToTarget", {"targetId": t["targetId"], "flatten": True})["sessionId"]
        page = Page(self, s)
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.call(domain + ".enable", session=s)
        w, h = self.size
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False}, session=s)
        self.call("Page.navigate", {"url": url}, session=s)
        page.wait(ready, timeout)
        return page


class Page:
    def __init__(self, browser, session):
        self.b = browser
        self.s = session

    def eval(self, expr, timeout=60):
        r = self.b.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True},
                        session=self.s, timeout=timeout)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"]))
        return r.get("result", {}).get("value")

    def wait(self, expr, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.eval("!!(%s)" % expr):
                return
            if self.eval("document.getElementById('error') && "
                         "document.getElementById('error').style.display === 'block'"):
                raise RuntimeError("the page reports: " + self.eval("document.getElementById('error').textContent"))
            self.b.pump(0.2)
        raise TimeoutError("the page never got ready (%s); errors: %s" % (expr, self.b.errors))

    def settle(self, seconds=0.3):
        """Let a few frames draw (NiiVue redraws on the next animation frame)."""
        self.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        self.b.pump(seconds)

    def screenshot(self, selector=None):
        params = {"format": "png"}
        if selector:
            r = self.eval("(() => { const r = document.querySelector(%s).getBoundingClientRect();"
                          " return [r.x, r.y, r.width, r.height]; })()" % json.dumps(selector))
            params["clip"] = {"x": r[0], "y": r[1], "width": r[2], "height": r[3], "scale": 1}
        return base64.b64decode(self.b.call("Page.captureScreenshot", params, session=self.s)["data"])


# ---- PNG pixels -----------------------------------------------------------------------
def png_pixels(data):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    i, idat, w = 8, b"", None
    while i < len(data):
        n, = struct.unpack(">I", data[i:i + 4])
        kind, chunk = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        i += 12 + n
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and ctype in (2, 6), "PNG of depth %d type %d" % (depth, ctype)
        elif kind == b"IDAT":
            idat += chunk
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows, p = [], 0
    for _ in range(h):
        f = raw[p]
        line = bytearray(raw[p + 1:p + 1 + stride])
        p += 1 + stride
        if f == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 255
        elif f == 2:
            for x in range(stride):
                line[x] = (line[x] + prev[x]) & 255
        elif f == 3:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                line[x] = (line[x] + ((a + prev[x]) >> 1)) & 255
        elif f == 4:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                c = prev[x - bpp] if x >= bpp else 0
                b = prev[x]
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def hue_sat(rgb):
    r, g, b = (v / 255.0 for v in rgb)
    mx, mn = max(r, g, b), min(r, g, b)
    if mx == mn:
        return 0.0, 0.0
    d = mx - mn
    if mx == r:
        h = ((g - b) / d) % 6
    elif mx == g:
        h = (b - r) / d + 2
    else:
        h = (r - g) / d + 4
    return h * 60.0, d / mx


def count_hues(rows, colors, tol=10.0, min_sat=0.35):
    """How many pixels show each colour: a label drawn over grey keeps its hue whatever the
    opacity, so a pixel counts for the colour whose hue it has (within tol degrees)."""
    want = {k: hue_sat(c)[0] for k, c in colors.items()}
    counts = {k: 0 for k in colors}
    for row in rows:
        for px in row:
            h, s = hue_sat(px)
            if s < min_sat or max(px) < 60:
                continue
            for k, wh in want.items():
                dh = abs(h - wh)
                if min(dh, 360 - dh) <= tol:
                    counts[k] += 1
    return counts
