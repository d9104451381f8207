#!/usr/bin/env python3
"""Checks a page written by `run --report` (python3's standard library only):

  check_report.py stages GOLDEN REPORT    the first step's sampling stages against the reference's
  check_report.py forward GOLDEN REPORT   attention, logit lens and norms of `fwd --tokens --report`
  check_report.py dom DOM REPORT          a page as Chromium drew it (--dump-dom): no error, and the
                                          token view, heat map and logit-lens table have their cells
  check_report.py png FILE                a screenshot that is not blank: many colours, much drawn

Prints what differs and exits 1, or exits 0. GOLDEN is tests/data/inside_golden.json
(scripts/make_inside_golden.py)."""
import json, re, struct, sys, zlib

problems = []

def problem(msg):
    if len(problems) < 20:
        print(msg)
    problems.append(msg)

def close(got, want, rel=1e-4, abs_=1e-6):
    return got is not None and abs(got - want) <= abs_ + rel * abs(want)

def report_data(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S)
    if not m:
        raise SystemExit(path + ": no data script")
    return json.loads(m.group(1))

def stages(golden, report):
    want = json.load(open(golden))["stages"]["stages"]
    steps = report_data(report)["steps"]
    if not steps:
        return problem("the report has no step")
    got = steps[0]["stages"]
    if [s["name"] for s in got] != [s["name"] for s in want]:
        return problem("stages %s, expected %s" % ([s["name"] for s in got], [s["name"] for s in want]))
    for g, w in zip(got, want):
        ref = {i: p for i, p in zip(w["ids"], w["probs"]) if p > 0}
        if "left" in w and g["left"] != w["left"]:
            problem("%s: %d tokens left, expected %d" % (g["name"], g["left"], w["left"]))
        if len(g["ids"]) != min(10, len(ref)):
            problem("%s: %d tokens shown, expected %d" % (g["name"], len(g["ids"]), min(10, len(ref))))
        for i, p in zip(g["ids"], g["probs"]):
            if i not in ref or not close(p, ref[i]):
                problem("%s: token %d has probability %r, the reference %r" % (g["name"], i, p, ref.get(i)))

def forward(golden, report):
    want = json.load(open(golden))["forward"]
    d = report_data(report)
    T, layers = len(want["ids"]), d["layers"]
    if d["tokens"] != want["ids"]:
        problem("tokens differ")
    if d["attention"]["positions"] != T or layers["positions"] != T:
        return problem("positions: attention %d, statistics %d, expected %d" % (d["attention"]["positions"], layers["positions"], T))
    worst = 0
    for l, heads in enumerate(want["attention"]):
        for h, rows in enumerate(heads):
            got = d["attention"]["weights"][l][h]
            for q in range(T):
                for k in range(q + 1):
                    diff = abs(got[q * (q + 1) // 2 + k] - rows[q][k])
                    worst = max(worst, diff)
                    if diff > 1e-4:
                        problem("attention layer %d head %d query %d key %d: %r, the reference %r" % (l, h, q, k, got[q * (q + 1) // 2 + k], rows[q][k]))
    print("largest attention difference %.2g" % worst)
    for p in range(T):
        if not close(layers["embed_norm"][p], want["embed_norms"][p]):
            problem("|embedding| at %d: %r, the reference %r" % (p, layers["embed_norm"][p], want["embed_norms"][p]))
        for l in range(len(want["lens_id"])):
            if layers["lens_id"][l][p] != want["lens_id"][l][p] or not close(layers["lens_prob"][l][p], want["lens_prob"][l][p]):
                problem("logit lens layer %d position %d: %r %r, the reference %r %r" % (
                    l, p, layers["lens_id"][l][p], layers["lens_prob"][l][p], want["lens_id"][l][p], want["lens_prob"][l][p]))
            if not close(layers["resid"][l][p], want["resid_norms"][l][p]):
                problem("|x| layer %d position %d: %r, the reference %r" % (l, p, layers["resid"][l][p], want["resid_norms"][l][p]))
            if layers["outliers"][l][p][0::2] != want["outlier_dims"][l][p]:
                problem("outliers layer %d position %d: %r, the reference %r" % (l, p, layers["outliers"][l][p][0::2], want["outlier_dims"][l][p]))
        # The lens of the last layer is the model's own prediction.
        last = len(want["lens_id"]) - 1
        if layers["lens_id"][last][p] != want["final_id"][p] or not close(layers["lens_prob"][last][p], want["final_prob"][p]):
            problem("the last layer's lens at %d is not the final logits' top token" % p)

def dom(dom_path, report):
    page = open(dom_path, encoding="utf-8").read()
    d = report_data(report)
    T, P, L = d["attention"]["positions"], d["layers"]["positions"], d["model"]["layers"]
    if 'data-drawn="yes"' not in page:
        problem("the page's script did not finish drawing")
    m = re.search(r'<div id="errors"[^>]*>(.*?)</div>', page, re.S)
    if not m or m.group(1).strip():
        problem("errors on the page: %r" % (m.group(1) if m else "no error box"))
    counts = {name: len(re.findall(r'class="%s[" ]' % name, page)) for name in ("hm-cell", "lens-cell", "stat-cell", "tok gen", "tok prompt", "mini")}
    if T <= 160 and counts["hm-cell"] != T * (T + 1) // 2:
        problem("heat map: %d cells, expected %d" % (counts["hm-cell"], T * (T + 1) // 2))
    if T > 160 and not re.search(r'<canvas [^>]*id="heatmap-canvas"', page):
        problem("no heat map canvas for %d positions" % T)
    if counts["lens-cell"] != L * min(P, 512) or counts["stat-cell"] != L * min(P, 512):
        problem("logit lens / statistics: %d / %d cells, expected %d" % (counts["lens-cell"], counts["stat-cell"], L * min(P, 512)))
    n_tokens = len(d["tokens"]) + (1 if any(s["pos"] == len(d["tokens"]) for s in d["steps"]) else 0)
    if counts["tok gen"] + counts["tok prompt"] != n_tokens or counts["tok gen"] != len(d["steps"]):
        problem("token view: %d prompt + %d generated chips, expected %d with %d generated" % (
            counts["tok prompt"], counts["tok gen"], n_tokens, len(d["steps"])))
    if d["steps"] and 'id="step-table"' not in page:
        problem("no sampling table for the selected step")
    if counts["mini"] < L * d["model"]["heads"]:
        problem("the layers x heads grid has %d maps, expected %d" % (counts["mini"], L * d["model"]["heads"]))

def png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return problem(path + ": not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, colour = header[:4]
    if depth != 8 or colour not in (2, 6):
        return problem("unexpected PNG format: depth %d, colour type %d" % (depth, colour))
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), w * bpp
    prev, colours, background, drawn = bytearray(stride), set(), None, 0
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):   # undo the row's filter (PNG spec, 9.2)
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for x in range(0, stride, bpp * 4):
            px = bytes(line[x:x + 3])
            colours.add(px)
            background = background or px
            drawn += px != background
        prev = line
    print("%dx%d, %d colours, %d of %d sampled pixels drawn" % (w, h, len(colours), drawn, w * h // 4))
    if len(colours) < 50 or drawn < w * h // 4 // 20:
        problem("the screenshot looks blank")

def main():
    what = sys.argv[1]
    if what == "png":
        png(sys.argv[2])
    else:
        {"stages": stages, "forward": forward, "dom": dom}[what](sys.argv[2], sys.argv[3])
    sys.exit(1 if problems else 0)

main()
