#!/usr/bin/env python3
"""tests/hub_server.py - a stand-in for the Hugging Face hub on 127.0.0.1.

Serves ROOT/<org>/<name>/<file> at /<org>/<name>/resolve/main/<file>, the
URL layout scripts/download.sh uses, so the download tests (and anyone
without internet) can point HF_ENDPOINT at it. It answers the way the hub
does in the cases the script must handle:

  - small files come straight from the resolve URL; *.safetensors files (the
    hub keeps those in LFS) are answered with a 302 to a "CDN" URL under
    /cdn/ that serves the bytes, and the 302 carries the size in
    X-Linked-Size, as the hub's does;
  - GET and HEAD, Content-Length, and byte ranges (Range: bytes=N- or
    bytes=N-M answered with 206 and Content-Range; 416 past the end);
  - 404 for a missing repo or file, with the hub's X-Error-Code header
    (RepoNotFound, EntryNotFound);
  - a gated repo: 401 (X-Error-Code: GatedRepo) without a bearer token,
    403 with a wrong one.

Fault injection, for testing the client's recovery:
  --cut REPO/FILE    the first GET of FILE's bytes sends the headers of the
                     whole answer but only half of the body, then closes the
                     connection (as a dropped download does)
  --short REPO/FILE  every GET of FILE sends only half of it, as a complete
                     answer with a matching Content-Length, while HEAD still
                     announces the whole size (a server that disagrees with
                     itself)
  --cdn-refuses-head REPO/FILE
                     HEAD on FILE's CDN URL is answered 403, as a CDN whose
                     URLs are signed for GET only does
  --no-cdn-length    HEAD answers on /cdn/ carry no Content-Length, so the
                     client must fall back to X-Linked-Size
  --cdn-host HOST    redirect to the CDN URL on another host name for this
                     server (e.g. localhost), as the hub's CDN is another
                     host: a client must not send its token there
  --missing-repo-status 401
                     answer a missing repo with 401 instead of 404, as the
                     real hub does for requests without a token (it does
                     not reveal whether a private repo exists)

usage: hub_server.py ROOT [--port N] [--port-file FILE] [--log FILE]
                          [--gated REPO=TOKEN]... [--cut REPO/FILE]...
                          [--short REPO/FILE]... [--cdn-refuses-head REPO/FILE]...
                          [--no-cdn-length]
                          [--cdn-host HOST] [--missing-repo-status CODE]

It listens on 127.0.0.1 only, on --port (default 0: a free port chosen by
the system), prints "serving ROOT on http://127.0.0.1:PORT" and writes PORT
to --port-file once it accepts connections. --log gets one line per request:
"METHOD PATH STATUS RANGE AUTH", RANGE being "-" when the request had none
and AUTH "auth" when it carried an Authorization header, else "-".
Only the Python standard library is used.
"""
import argparse
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/main/(.+)$")
CDN = re.compile(r"^/cdn/([^/]+/[^/]+)/(.+)$")
RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class Hub:
    """What the handler needs to know: the options and the state of the faults."""

    def __init__(self, args):
        self.root = os.path.realpath(args.root)
        self.gated = dict(g.split("=", 1) for g in args.gated)
        self.cut_pending = set(args.cut)  # each path is cut once, then served whole
        self.short = set(args.short)
        self.refuses_head = set(args.cdn_refuses_head)
        self.no_cdn_length = args.no_cdn_length
        self.cdn_host = args.cdn_host
        self.missing_repo_status = args.missing_repo_status
        self.lock = threading.Lock()
        self.log = open(args.log, "a", encoding="utf-8") if args.log else None

    def take_cut(self, path):
        """True the first time a cut path is asked for."""
        with self.lock:
            if path in self.cut_pending:
                self.cut_pending.discard(path)
                return True
            return False

    def record(self, line):
        if self.log:
            with self.lock:
                self.log.write(line + "\n")
                self.log.flush()


class Handler(BaseHTTPRequestHandler):
    server_version = "hub_server"
    hub = None  # set in main()

    def log_message(self, *args):
        pass  # requests go to --log instead of stderr

    def do_HEAD(self):
        self.answer(send_body=False)

    def do_GET(self):
        self.answer(send_body=True)

    # ---- routing ----

    def answer(self, send_body):
        path = self.path.split("?", 1)[0]
        status = 404
        try:
            m = RESOLVE.match(path)
            c = CDN.match(path)
            if m:
                status = self.resolve(m.group(1), m.group(2))
            elif c and not send_body and "%s/%s" % (c.group(1), c.group(2)) in self.hub.refuses_head:
                status = self.error(403, "", "Signature does not match")
            elif c:
                status = self.serve_file(c.group(1), c.group(2), send_body, cdn=True)
            else:
                status = self.error(404, "", "Not found")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away; nothing to answer
        finally:
            self.hub.record("%s %s %d %s %s" % (self.command, path, status, self.headers.get("Range", "-"),
                                                "auth" if "Authorization" in self.headers else "-"))

    def resolve(self, repo, name):
        """The hub's resolve URL: checks access, then serves or redirects."""
        if not self.repo_dir(repo):
            return self.error(self.hub.missing_repo_status, "RepoNotFound", "Repository not found")
        token = self.hub.gated.get(repo)
        if token is not None:
            auth = self.headers.get("Authorization")
            if auth is None:
                return self.error(401, "GatedRepo", "Access to model %s is restricted. You must have access to it and be authenticated to access it. Please log in." % repo)
            if auth != "Bearer " + token:
                return self.error(403, "GatedRepo", "Access to model %s is restricted and you are not in the authorized list." % repo)
        file = self.file_path(repo, name)
        if file is None:
            return self.error(404, "EntryNotFound", "Entry not found")
        if name.endswith(".safetensors"):
            # Large files live in LFS: the hub redirects to its CDN.
            self.send_response(302)
            cdn = "/cdn/%s/%s" % (repo, name)
            if self.hub.cdn_host:
                cdn = "http://%s:%d%s" % (self.hub.cdn_host, self.server.server_address[1], cdn)
            self.send_header("Location", cdn)
            self.send_header("X-Linked-Size", str(os.path.getsize(file)))
            self.send_header("X-Linked-Etag", '"%x"' % os.path.getsize(file))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return 302
        return self.serve_file(repo, name, self.command == "GET", cdn=False)

    # ---- answers ----

    def serve_file(self, repo, name, send_body, cdn):
        file = self.file_path(repo, name)
        if file is None:
            return self.error(404, "", "Not found")
        key = "%s/%s" % (repo, name)
        size = os.path.getsize(file)
        if send_body and key in self.hub.short:
            size //= 2  # the whole answer is the first half, and says so
        start, end = 0, size  # the bytes [start, end) are sent
        status = 200
        m = RANGE.match(self.headers.get("Range", ""))
        if m:
            start = int(m.group(1))
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return 416
            if m.group(2):
                end = min(size, int(m.group(2)) + 1)
            status = 206
        self.send_response(status)
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size))
        self.send_header("Accept-Ranges", "bytes")
        if send_body or not (cdn and self.hub.no_cdn_length):
            self.send_header("Content-Length", str(end - start))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if not send_body:
            return status
        if self.hub.take_cut(key):
            end = start + (end - start) // 2
            self.close_connection = True
        with open(file, "rb") as f:
            f.seek(start)
            left = end - start
            while left > 0:
                chunk = f.read(min(left, 1 << 16))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)
        return status

    def error(self, status, code, message):
        body = ('{"error": "%s"}\n' % message).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(body)
        return status

    # ---- the served folder ----

    def repo_dir(self, repo):
        d = os.path.realpath(os.path.join(self.hub.root, repo))
        return d if d.startswith(self.hub.root + os.sep) and os.path.isdir(d) else None

    def file_path(self, repo, name):
        """ROOT/repo/name when it is a file inside the repo's folder."""
        d = self.repo_dir(repo)
        if d is None:
            return None
        f = os.path.realpath(os.path.join(d, name))
        return f if f.startswith(d + os.sep) and os.path.isfile(f) else None


def main():
    p = argparse.ArgumentParser(description="Serve a folder of repos in the Hugging Face hub's URL layout on 127.0.0.1.")
    p.add_argument("root")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--log")
    p.add_argument("--gated", action="append", default=[], metavar="REPO=TOKEN")
    p.add_argument("--cut", action="append", default=[], metavar="REPO/FILE")
    p.add_argument("--short", action="append", default=[], metavar="REPO/FILE")
    p.add_argument("--cdn-refuses-head", action="append", default=[], metavar="REPO/FILE")
    p.add_argument("--no-cdn-length", action="store_true")
    p.add_argument("--cdn-host")
    p.add_argument("--missing-repo-status", type=int, default=404, choices=[401, 404])
    args = p.parse_args()

    Handler.hub = Hub(args)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    if args.port_file:
        # Written whole under another name first, so a reader never sees half of it.
        with open(args.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.replace(args.port_file + ".tmp", args.port_file)
    print("serving %s on http://127.0.0.1:%d" % (args.root, port), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
