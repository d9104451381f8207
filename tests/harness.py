"""tests/harness.py - what the python test scripts share: a tally of checks
that prints each failure and the closing "NAME: N passed, N failed" line,
and a `run serve` process on a free port with its stderr in a file.
python3 standard library only."""
import atexit
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time


class Checks:
    """check(ok, what) counts a check and prints FAIL with `what` (and the
    hint, e.g. how to repeat a random run) when ok is false; returns ok."""

    def __init__(self, name, hint=""):
        self.name, self.hint = name, hint
        self.passed = self.failed = 0

    def __call__(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL", what, self.hint, flush=True)
        return ok

    def finish(self):
        """The closing line; exits 1 when a check failed."""
        print(f"{self.name}: {self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)


class Server:
    """`RUN serve MODEL --port 0 FLAGS...`, up and listening; its stderr in
    TMP/NAME.log. A test that fails halfway leaves no server behind."""

    def __init__(self, run, tmp, name, model, *flags):
        self.log = os.path.join(tmp, name + ".log")
        self.proc = subprocess.Popen([run, "serve", model, "--port", "0", *flags], stdout=subprocess.DEVNULL,
                                     stderr=open(self.log, "w"))
        atexit.register(self.proc.kill)
        m = self.wait_log(r"listening on http://127\.0\.0\.1:(\d+)", 60, self.proc)
        if not m:
            raise SystemExit("the server did not start: " + self.text())
        self.port = int(m.group(1))

    def text(self):
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return f.read()

    def wait_log(self, pattern, seconds=5, proc=None):
        """The first match of regex pattern in the log, waiting up to
        `seconds` for it to be written (and no longer than proc lives)."""
        deadline = time.time() + seconds
        while True:
            m = re.search(pattern, self.text())
            if m or time.time() > deadline or (proc and proc.poll() is not None):
                return m
            time.sleep(0.02)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, headers, body bytes) of one request on a fresh connection;
        a body that is not bytes is sent as JSON."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        c.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        r = c.getresponse()
        out = (r.status, dict(r.getheaders()), r.read())
        c.close()
        return out

    def post(self, path, body, headers=None, timeout=300):
        """(status, the JSON document, or the raw bytes of a stream)."""
        status, _, data = self.request("POST", path, body, headers, timeout)
        return status, json.loads(data) if data.startswith(b"{") else data

    def stop(self, timeout=60):
        """SIGTERM; the exit status, or None when it had to be killed."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None

    def sanitizer_clean(self):
        """Whether the log holds no AddressSanitizer or UBSan report."""
        return not re.search("Sanitizer|runtime error", self.text())
