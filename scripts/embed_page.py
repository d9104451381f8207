#!/usr/bin/env python3
"""Writes report_page.h from report_page.html: the page of `run --report` as
two C strings, the text before its DATA line (report_page_head) and after it
(report_page_tail); report.c writes the run's JSON between them. Rerun after
editing report_page.html (the build does not: it needs no Python).

usage: scripts/embed_page.py
"""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "<!-- DATA -->\n"

def c_string(text):
    out = []
    for line in text.splitlines(keepends=True):
        s = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        s = "".join(c if 32 <= ord(c) < 127 else "".join("\\%03o" % b for b in c.encode()) for c in s)
        out.append('    "' + s + '"')
    return "\n".join(out) if out else '    ""'

def main():
    page = open(os.path.join(ROOT, "report_page.html"), encoding="utf-8").read()
    head, tail = page.split(MARK)
    with open(os.path.join(ROOT, "report_page.h"), "w") as f:
        f.write("/* report_page.h - the page of `run --report` (report_page.html), made by\n"
                " * scripts/embed_page.py: do not edit; edit report_page.html and rerun it. */\n"
                "#ifndef REPORT_PAGE_H\n#define REPORT_PAGE_H\n\n")
        f.write("static const char report_page_head[] =\n" + c_string(head) + ";\n\n")
        f.write("static const char report_page_tail[] =\n" + c_string(tail) + ";\n\n#endif\n")

main()
