#!/usr/bin/env python3
"""gen_unicode.py - writes unicode_tables.h, the character data unicode.c needs,
from the Unicode Character Database (Debian's unicode-data package).

    python3 scripts/gen_unicode.py [UCD_DIR]     (default /usr/share/unicode)

It writes two files, both committed:
  unicode_tables.h            two-stage lookup tables and the composition pairs
  tests/data/nfc_tests.txt.gz the NFC cases of NormalizationTest.txt that apply
                              to these tables, for tests/test_unicode.c

Two Unicode versions meet here, because Hugging Face's tokenizer (version
0.23, which made the golden files) uses two:
  - its pre-tokenizer regex (Oniguruma) classes letters and numbers as
    Unicode 16.0 does. Letters and numbers assigned later are left out
    (DerivedAge.txt says which); those of 15.1 and 16.0, which a UCD older
    than 16.0 lacks, come from ADDED_IN_16 below. White_Space has not
    changed since Unicode 6.3;
  - its NFC normalizer uses Unicode 9.0 data. Unicode's stability policy
    freezes the decomposition, combining class and composition exclusion of
    every assigned character, so Unicode 9.0's NFC is the current NFC with
    every character assigned after 9.0 left alone (no decomposition, class 0,
    never composed).

Standard library only. The output is deterministic: run it again after an
upgrade of unicode-data and review the diff.
"""
import bz2
import gzip
import os
import re
import sys

NORMALIZATION_AGE = (9, 0)
CLASSES_AGE = (16, 0)

# The letters (General_Category L*) and numbers (N*) that Unicode 15.1 and
# 16.0 assigned, as Unicode 16.0.0's DerivedGeneralCategory.txt lists them:
# used when the UCD at hand predates them (Debian 12 ships Unicode 15.0).
# The resulting classes were checked against Hugging Face's regex for every
# code point.
ADDED_IN_16 = {
    "L": ["1C89..1C8A", "A7CB..A7CD", "A7DA..A7DC", "105C0..105F3", "10D4A..10D65", "10D6F..10D85",
          "10EC2..10EC4", "11380..11389", "1138B", "1138E", "11390..113B5", "113B7", "113D1", "113D3",
          "11BC0..11BE0", "13460..143FA", "16100..1611D", "16D40..16D6C", "18CFF", "1E5D0..1E5ED", "1E5F0",
          "2EBF0..2EE5D"],
    "N": ["10D40..10D49", "116D0..116E3", "11BF0..11BF9", "16130..16139", "16D70..16D79", "1CCF0..1CCF9",
          "1E5F1..1E5FA"],
}
MAX_CP = 0x110000
# Hangul vowel and final consonant jamo, which compose with what precedes
# them (by arithmetic, not by the tables): U+1161.. and U+11A8...
HANGUL_V, HANGUL_V_COUNT = 0x1161, 21
HANGUL_T, HANGUL_T_COUNT = 0x11A7, 28

# The flag names unicode.h gives the bits of a character's class.
LETTER, NUMBER, SPACE, NFC_UNSURE = 1, 2, 4, 8
FLAG_NAMES = [(LETTER, "UNICODE_LETTER"), (NUMBER, "UNICODE_NUMBER"), (SPACE, "UNICODE_SPACE"),
              (NFC_UNSURE, "UNICODE_NFC_UNSURE")]


def data_lines(path):
    """The fields of each data line of a UCD file, comments stripped."""
    opener = bz2.open if path.endswith(".bz2") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                yield [field.strip() for field in line.split(";")]


def code_range(field):
    """'0041' or '0041..005A' as a range of code points."""
    lo, _, hi = field.partition("..")
    return range(int(lo, 16), int(hi or lo, 16) + 1)


def read_version(ucd):
    with open(os.path.join(ucd, "ReadMe.txt"), encoding="utf-8") as f:
        m = re.search(r"for Version (\d+\.\d+\.\d+) of the Unicode Standard", f.read())
    if not m:
        sys.exit("gen_unicode.py: no version in ReadMe.txt")
    return m.group(1)


def read_unicode_data(ucd):
    """General category, combining class and canonical decomposition of each
    assigned code point (ranges written as First/Last pairs expanded)."""
    category, ccc, decomposition = {}, {}, {}
    first = None
    for f in data_lines(os.path.join(ucd, "UnicodeData.txt")):
        cp, name = int(f[0], 16), f[1]
        if name.endswith(", First>"):
            first = cp
            continue
        cps = range(first, cp + 1) if name.endswith(", Last>") else [cp]
        for c in cps:
            category[c] = f[2]
            ccc[c] = int(f[3])
        if f[5] and not f[5].startswith("<"):
            decomposition[cp] = [int(x, 16) for x in f[5].split()]
    return category, ccc, decomposition


def read_ages(ucd):
    age = {}
    for f in data_lines(os.path.join(ucd, "DerivedAge.txt")):
        version = tuple(int(x) for x in f[1].split("."))
        for c in code_range(f[0]):
            age[c] = version
    return age


def read_property(ucd, filename, name, value=None):
    """Code points having a binary property, or a property with a value."""
    out = set()
    for f in data_lines(os.path.join(ucd, filename)):
        if f[1] == name and (value is None or f[2] == value):
            out.update(code_range(f[0]))
    return out


def full_decomposition(cp, decomposition):
    if cp not in decomposition:
        return [cp]
    return [d for part in decomposition[cp] for d in full_decomposition(part, decomposition)]


def build_normalization(ucd, category, ccc_all, decomposition_all, age):
    """Combining classes, full decompositions, composition pairs and the NFC
    quick-check flag, all as of NORMALIZATION_AGE; checked against the
    UCD's own derived properties."""
    old = {c for c, a in age.items() if a <= NORMALIZATION_AGE}
    ccc = {c: v for c, v in ccc_all.items() if v and c in old}
    decomposition = {c: d for c, d in decomposition_all.items() if c in old}
    excluded = {c for f in data_lines(os.path.join(ucd, "CompositionExclusions.txt")) for c in code_range(f[0])}
    # Characters never recomposed: listed exclusions, singletons, and those
    # whose decomposition starts with a non-starter.
    full_exclusion = {c for c, d in decomposition.items()
                      if c in excluded or len(d) == 1 or ccc.get(d[0], 0) or ccc.get(c, 0)}
    derived = read_property(ucd, "DerivedNormalizationProps.txt", "Full_Composition_Exclusion") & old
    assert full_exclusion == derived, "composition exclusions disagree with DerivedNormalizationProps.txt"
    pairs = sorted((d[0], d[1], c) for c, d in decomposition.items() if c not in full_exclusion)

    # NFC_Quick_Check: No for characters that never survive NFC, Maybe for
    # those that may compose with what precedes them (Hangul V and T jamo too).
    qc_no = set(full_exclusion)
    qc_maybe = {second for _, second, _ in pairs}
    qc_maybe.update(range(HANGUL_V, HANGUL_V + HANGUL_V_COUNT))
    qc_maybe.update(range(HANGUL_T + 1, HANGUL_T + HANGUL_T_COUNT))
    derived_no = read_property(ucd, "DerivedNormalizationProps.txt", "NFC_QC", "N") & old
    derived_maybe = read_property(ucd, "DerivedNormalizationProps.txt", "NFC_QC", "M") & old
    assert qc_no == derived_no and qc_maybe == derived_maybe, "NFC_QC disagrees with DerivedNormalizationProps.txt"

    full = {c: full_decomposition(c, decomposition) for c in decomposition}
    return ccc, full, pairs, qc_no | qc_maybe


def two_stage(values, shift):
    """Splits a per-code-point list into blocks of 1 << shift entries, sharing
    identical blocks: stage1[cp >> shift] is a block number, and the value is
    stage2[block << shift | (cp & mask)]."""
    size = 1 << shift
    blocks, stage1, stage2 = {}, [], []
    for start in range(0, MAX_CP, size):
        block = tuple(values[start:start + size])
        if block not in blocks:
            blocks[block] = len(blocks)
            stage2.extend(block)
        stage1.append(blocks[block])
    return stage1, stage2


def smallest_two_stage(values, stage2_bytes):
    """The block size that makes the two tables smallest (stage1 is uint16)."""
    best = None
    for shift in range(4, 11):
        stage1, stage2 = two_stage(values, shift)
        size = 2 * len(stage1) + stage2_bytes * len(stage2)
        if best is None or size < best[0]:
            best = (size, shift, stage1, stage2)
    return best[1:]


def c_array(ctype, name, items, per_line=16):
    items = list(items)
    lines = [f"static const {ctype} {name}[{len(items)}] = {{"]
    for i in range(0, len(items), per_line):
        lines.append("    " + ", ".join(str(x) for x in items[i:i + per_line]) + ",")
    lines.append("};")
    return "\n".join(lines)


def flag_expr(flags):
    names = [n for bit, n in FLAG_NAMES if flags & bit]
    return " | ".join(names) if names else "0"


def regex_classes(category, age):
    """The General_Category major class ("L", "N", ...) of each code point as
    the regex sees it: as of CLASSES_AGE, with ADDED_IN_16 for an older UCD."""
    major = {c: gc[0] for c, gc in category.items() if age.get(c, (99,)) <= CLASSES_AGE}
    for cls, ranges in ADDED_IN_16.items():
        for field in ranges:
            for c in code_range(field):
                assert major.get(c, cls) == cls, f"U+{c:04X} is {major[c]} in this UCD, not {cls}"
                major[c] = cls
    return major


def write_tables(path, version, major, white_space, ccc, full, pairs, nfc_unsure):
    # Character classes: one small record per distinct (flags, ccc).
    records, record_of = [], {}
    values = []
    for c in range(MAX_CP):
        gc = major.get(c, "C")
        flags = (LETTER if gc == "L" else 0) | (NUMBER if gc == "N" else 0)
        flags |= (SPACE if c in white_space else 0) | (NFC_UNSURE if c in nfc_unsure else 0)
        key = (flags, ccc.get(c, 0))
        if key not in record_of:
            record_of[key] = len(records)
            records.append(key)
        values.append(record_of[key])
    assert len(records) < 256
    prop_shift, prop_stage1, prop_stage2 = smallest_two_stage(values, 1)

    # Decompositions: a 1-based index into decomp_start, 0 for none.
    decomp_chars, decomp_start, index = [], [0], [0] * MAX_CP
    for c in sorted(full):
        decomp_chars.extend(full[c])
        decomp_start.append(len(decomp_chars))
        index[c] = len(decomp_start) - 1
    assert len(decomp_start) < 65536
    dec_shift, dec_stage1, dec_stage2 = smallest_two_stage(index, 2)
    assert max(prop_stage1) < 65536 and max(dec_stage1) < 65536

    age = ".".join(str(x) for x in NORMALIZATION_AGE)
    out = [
        f"/* unicode_tables.h - generated by scripts/gen_unicode.py from the Unicode {version}",
        " * Character Database; do not edit. Included by unicode.c only.",
        " *",
        f" * Letter and number classes follow Unicode {'.'.join(map(str, CLASSES_AGE))} (as Hugging Face's regex",
        f" * does), white space Unicode {version}; combining classes, decompositions",
        f" * and compositions follow Unicode {age} (characters assigned after {age} are",
        " * left alone), as Hugging Face's NFC does.",
        " * Sizes: " + f"{2 * len(prop_stage1) + len(prop_stage2) + 2 * len(records)} bytes of classes, "
        f"{2 * len(dec_stage1) + 2 * len(dec_stage2) + 4 * len(decomp_chars) + 2 * len(decomp_start)} "
        f"bytes of decompositions, {12 * len(pairs)} bytes of compositions. */",
        "",
        f"enum {{ PROP_SHIFT = {prop_shift}, DECOMP_SHIFT = {dec_shift} }};",
        "",
        "/* The class and canonical combining class of a code point c are",
        " * prop_records[prop_stage2[prop_stage1[c >> PROP_SHIFT] << PROP_SHIFT | (c & mask)]]. */",
        c_array("uint16_t", "prop_stage1", prop_stage1),
        c_array("uint8_t", "prop_stage2", prop_stage2, 32),
        f"static const CharRecord prop_records[{len(records)}] = {{",
    ]
    out += [f"    {{{flag_expr(flags)}, {cc}}}," for flags, cc in records]
    out += [
        "};",
        "",
        "/* The full canonical decomposition of c, when k = decomp_stage2[...] (as",
        " * above) is not 0, is decomp_chars[decomp_start[k - 1] .. decomp_start[k]). */",
        c_array("uint16_t", "decomp_stage1", dec_stage1),
        c_array("uint16_t", "decomp_stage2", dec_stage2),
        c_array("uint16_t", "decomp_start", decomp_start),
        c_array("uint32_t", "decomp_chars", (f"0x{c:04X}" for c in decomp_chars), 8),
        "",
        "/* Canonical composition: (first, second) -> composite, sorted by first then",
        " * second, without the composition exclusions (Hangul is algorithmic). */",
        f"static const CompositionPair compositions[{len(pairs)}] = {{",
    ]
    out += [f"    {{0x{a:04X}, 0x{b:04X}, 0x{c:04X}}}," for a, b, c in pairs]
    out += ["};", ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out))


def write_nfc_tests(ucd, path, age):
    """Each NFC case of NormalizationTest.txt as 'source;nfc' (hex code points),
    for the cases whose characters all predate NORMALIZATION_AGE's end."""
    lines = []
    for f in data_lines(os.path.join(ucd, "NormalizationTest.txt.bz2")):
        if f[0].startswith("@"):
            continue
        columns = [[int(x, 16) for x in col.split()] for col in f[:5]]
        if all(age.get(c, (99,)) <= NORMALIZATION_AGE for col in columns for c in col):
            # NFC(c1) = NFC(c2) = NFC(c3) = c2 and NFC(c4) = NFC(c5) = c4.
            for source, want in ((0, 1), (1, 1), (2, 1), (3, 3), (4, 3)):
                lines.append(" ".join(f"{c:04X}" for c in columns[source]) + ";" +
                             " ".join(f"{c:04X}" for c in columns[want]))
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(("\n".join(lines) + "\n").encode())


def main():
    ucd = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    version = read_version(ucd)
    category, ccc_all, decomposition = read_unicode_data(ucd)
    age = read_ages(ucd)
    white_space = read_property(ucd, "PropList.txt", "White_Space")
    ccc, full, pairs, nfc_unsure = build_normalization(ucd, category, ccc_all, decomposition, age)
    write_tables(os.path.join(root, "unicode_tables.h"), version, regex_classes(category, age), white_space, ccc,
                 full, pairs, nfc_unsure)
    write_nfc_tests(ucd, os.path.join(root, "tests", "data", "nfc_tests.txt.gz"), age)


if __name__ == "__main__":
    main()
