#!/usr/bin/env python3
"""Writes the C headers of the pages built into run (the build runs it when
a page changes; python3's standard library only):

  report_page.h  from report_page.html: the page of `run --report` as two C
                 strings, the text before its DATA line (report_page_head)
                 and after it (report_page_tail); report.c writes the run's
                 JSON between them.
  chat_page.h    from chat_page.html: the chat page `run serve` answers GET /
                 with (chat_page), and the Content-Security-Policy it is sent
                 with (chat_page_csp), which lets it run only its own <style>
                 and <script>, named by their SHA-256 hashes.

usage: scripts/embed_page.py [--check]
  --check: write nothing; exit 1 naming each header that is not what its
           page makes (tests/test_page.sh checks that they are in step)
"""
import base64, hashlib, os, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "<!-- DATA -->\n"


def c_string(text):
    """text as adjacent C string literals, a line each; bytes past ASCII as octal escapes."""
    out = []
    for line in text.splitlines(keepends=True):
        s = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        s = "".join(c if 32 <= ord(c) < 127 else "".join("\\%03o" % b for b in c.encode()) for c in s)
        out.append('    "' + s + '"')
    return "\n".join(out) if out else '    ""'


def report_header(page):
    head, tail = page.split(MARK)
    return ("/* report_page.h - the page of `run --report` (report_page.html), made by\n"
            " * scripts/embed_page.py: do not edit; edit report_page.html and rerun it. */\n"
            "#ifndef REPORT_PAGE_H\n#define REPORT_PAGE_H\n\n"
            "static const char report_page_head[] =\n" + c_string(head) + ";\n\n"
            "static const char report_page_tail[] =\n" + c_string(tail) + ";\n\n#endif\n")


def source_hash(page, tag):
    """The CSP source of the page's one <tag> element: 'sha256-...' of its text."""
    found = re.findall(r"<%s>(.*?)</%s>" % (tag, tag), page, re.S)
    if len(found) != 1 or re.search(r"<%s[\s>]" % tag, page.replace("<%s>" % tag, "", 1)):
        sys.exit("chat_page.html: expected exactly one <%s> element without attributes" % tag)
    return "'sha256-%s'" % base64.b64encode(hashlib.sha256(found[0].encode()).digest()).decode()


def chat_header(page):
    csp = ("default-src 'none'; script-src %s; style-src %s; connect-src 'self'; img-src data:; "
           "base-uri 'none'; form-action 'none'; frame-ancestors 'none'") % (source_hash(page, "script"),
                                                                             source_hash(page, "style"))
    return ("/* chat_page.h - the chat page of `run serve` (chat_page.html), made by\n"
            " * scripts/embed_page.py: do not edit; edit chat_page.html (make reruns it). */\n"
            "#ifndef CHAT_PAGE_H\n#define CHAT_PAGE_H\n\n"
            "/* The Content-Security-Policy the page is sent with: its own style and\n"
            " * script alone (by their hashes), requests to the server alone. */\n"
            "static const char chat_page_csp[] =\n" + c_string(csp) + ";\n\n"
            "static const char chat_page[] =\n" + c_string(page) + ";\n\n#endif\n")


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] and not check:
        sys.exit(__doc__)
    stale = []
    for html, header, make in (("report_page.html", "report_page.h", report_header),
                               ("chat_page.html", "chat_page.h", chat_header)):
        text = make(open(os.path.join(ROOT, html), encoding="utf-8").read())
        path = os.path.join(ROOT, header)
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if check and old != text:
            stale.append("%s is not what %s makes: run scripts/embed_page.py" % (header, html))
        elif not check:  # written even when unchanged, so that make sees it newer than its page
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    for line in stale:
        print(line)
    sys.exit(1 if stale else 0)


main()
