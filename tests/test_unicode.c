/* test_unicode.c - character classes, lossy UTF-8 and NFC against the
 * Unicode Standard: NormalizationTest.txt's NFC cases (tests/data/nfc_tests.txt,
 * written by scripts/gen_unicode.py) and the standard's own examples. Classes
 * of characters newer than the UCD files follow what Hugging Face's regex
 * does (checked for every code point against tokenizers 0.23.2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unicode.h"
#include "test.h"

static void test_classes(void) {
    struct {
        uint32_t c;
        unsigned want;
        const char *what;
    } cases[] = {
        {'a', UNICODE_LETTER, "a"},
        {'Z', UNICODE_LETTER, "Z"},
        {'7', UNICODE_NUMBER, "7"},
        {' ', UNICODE_SPACE, "space"},
        {'\t', UNICODE_SPACE, "tab"},
        {'\n', UNICODE_SPACE, "newline"},
        {'\'', 0, "apostrophe"},
        {0x00, 0, "NUL"},
        {0x85, UNICODE_SPACE, "U+0085 NEXT LINE is White_Space"},
        {0xA0, UNICODE_SPACE, "U+00A0 NO-BREAK SPACE"},
        {0x3000, UNICODE_SPACE, "U+3000 IDEOGRAPHIC SPACE"},
        {0x200B, 0, "U+200B ZERO WIDTH SPACE is not White_Space"},
        {0xFEFF, 0, "U+FEFF BOM is not White_Space"},
        {0x180E, 0, "U+180E MONGOLIAN VOWEL SEPARATOR (not White_Space since 6.3)"},
        {0x4E2D, UNICODE_LETTER, "U+4E2D CJK ideograph (range in UnicodeData)"},
        {0x3002, 0, "U+3002 IDEOGRAPHIC FULL STOP"},
        {0xFF0C, 0, "U+FF0C FULLWIDTH COMMA"},
        {0x0663, UNICODE_NUMBER, "U+0663 ARABIC-INDIC DIGIT THREE"},
        {0x2167, UNICODE_NUMBER, "U+2167 ROMAN NUMERAL EIGHT (Nl)"},
        {0x00BD, UNICODE_NUMBER, "U+00BD VULGAR FRACTION ONE HALF (No)"},
        {0x1F600, 0, "U+1F600 emoji"},
        {0x31350, UNICODE_LETTER, "U+31350 CJK Extension H (Unicode 15.0)"},
        {0x11F04, UNICODE_LETTER, "U+11F04 KAWI LETTER A (Unicode 15.0)"},
        {0x2EBF0, UNICODE_LETTER, "U+2EBF0 CJK Extension I (Unicode 15.1)"},
        {0x14040, UNICODE_LETTER, "U+14040 Egyptian hieroglyph (Unicode 16.0), a letter to HF's regex"},
        {0x1E5F1, UNICODE_NUMBER, "U+1E5F1 OL ONAL DIGIT ONE (Unicode 16.0)"},
        {0x323B0, 0, "U+323B0 CJK Extension J (Unicode 17.0): not yet a letter to HF's regex"},
        {0xE000, 0, "private use"},
        {0x10FFFF, 0, "U+10FFFF noncharacter"},
        {0x110000, 0, "past Unicode"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned got = unicode_class(cases[i].c) & (UNICODE_LETTER | UNICODE_NUMBER | UNICODE_SPACE);
        CHECK(got == cases[i].want, "class of %s: got %u, want %u", cases[i].what, got, cases[i].want);
    }
    for (unsigned c = 0; c < 0x80; c++)
        CHECK(unicode_ascii_class((unsigned char)c) == unicode_class(c), "the ASCII fast path agrees for %u", c);
    CHECK(unicode_ccc(0x0301) == 230, "ccc of U+0301 COMBINING ACUTE is 230");
    CHECK(unicode_ccc(0x0316) == 220, "ccc of U+0316 COMBINING GRAVE BELOW is 220");
    CHECK(unicode_ccc(0x1DFB) == 230, "ccc of U+1DFB (Unicode 9.0) is 230");
    CHECK(unicode_ccc(0x1DF6) == 0, "U+1DF6 (Unicode 10.0) is left alone by 9.0 normalization");
    CHECK(unicode_ccc('a') == 0, "ccc of a is 0");
}

/* Lossy decoding of s[0..n) must give want (NUL-terminated), with n_bad
 * replacements. */
static void check_lossy(const char *s, size_t n, const char *want, size_t n_bad, const char *what) {
    char *out;
    size_t len;
    size_t bad = utf8_lossy(s, n, &out, &len);
    CHECK(bad == n_bad, "%s: %zu replacements, want %zu", what, bad, n_bad);
    const char *got = out ? out : s;
    size_t got_len = out ? len : n;
    CHECK(got_len == strlen(want) && memcmp(got, want, got_len) == 0, "%s: lossy text", what);
    free(out);
}

#define FFFD "\xEF\xBF\xBD"

static void test_lossy(void) {
    /* The example of the Unicode Standard, section 3.9 (U+FFFD Substitution
     * of Maximal Subparts): 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64. */
    const char example[] = "a\xF1\x80\x80\xE1\x80\xC2" "b\x80" "c\x80\xBF" "d";
    check_lossy(example, sizeof example - 1, "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d", 6, "standard example");
    check_lossy("plain", 5, "plain", 0, "valid ASCII");
    check_lossy("\xE4\xB8\xAD" FFFD, 6, "\xE4\xB8\xAD" FFFD, 0, "valid CJK and a real U+FFFD");
    check_lossy("\xC0\xAF", 2, FFFD FFFD, 2, "overlong C0 AF");
    check_lossy("\xE0\x80\xAF", 3, FFFD FFFD FFFD, 3, "overlong E0 80 AF");
    check_lossy("\xED\xA0\x80", 3, FFFD FFFD FFFD, 3, "surrogate ED A0 80");
    check_lossy("\xF4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD, 4, "F4 90 80 80 past U+10FFFF");
    check_lossy("\xF5\x80", 2, FFFD FFFD, 2, "F5 lead byte");
    check_lossy("x\xF0\x9F\x98", 4, "x" FFFD, 1, "truncated emoji at the end");
    check_lossy("\xF0\x9F\x98x", 4, FFFD "x", 1, "truncated emoji before x");
    char *out;
    size_t len;
    CHECK(utf8_lossy("\x00\xFF", 2, &out, &len) == 1 && len == 4 && memcmp(out, "\0" FFFD, 4) == 0,
          "NUL is kept, FF replaced");
    free(out);

    uint32_t c;
    bool truncated;
    CHECK(utf8_next("\xF0\x9F\x98", 3, &c, &truncated) == 3 && c == UTF8_INVALID && truncated,
          "F0 9F 98 is a truncated prefix");
    CHECK(utf8_next("\xF0\x9F\x98\x80", 4, &c, &truncated) == 4 && c == 0x1F600 && !truncated, "F0 9F 98 80 is U+1F600");
    CHECK(utf8_next("\xC3", 1, &c, &truncated) == 1 && c == UTF8_INVALID && truncated, "C3 alone is truncated");
    CHECK(utf8_next("\x80", 1, &c, &truncated) == 1 && c == UTF8_INVALID && !truncated, "80 alone is not truncated");
    CHECK(utf8_next("\xE0\x9F", 2, &c, &truncated) == 1 && c == UTF8_INVALID && !truncated,
          "E0 9F: the subpart is E0 alone");
}

/* Parses "0041 0301" into UTF-8. */
static size_t hex_to_utf8(const char *hex, char *out) {
    size_t len = 0;
    char *end;
    for (const char *p = hex; *p;) {
        unsigned long c = strtoul(p, &end, 16);
        if (end == p) break;
        len += utf8_put((uint32_t)c, out + len);
        p = end;
    }
    return len;
}

static void test_nfc_file(void) {
    unsigned long size;
    char *data = test_data("nfc_tests.txt", &size);
    int n_cases = 0, n_wrong = 0, n_quick_wrong = 0;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        char *semi = strchr(line, ';');
        if (!semi) continue;
        *semi = '\0';
        char source[256], want[256];
        size_t source_len = hex_to_utf8(line, source), want_len = hex_to_utf8(semi + 1, want);
        size_t got_len;
        char *got = nfc_normalize(source, source_len, &got_len);
        bool same = got_len == want_len && memcmp(got, want, want_len) == 0;
        if (!same && n_wrong++ < 5) CHECK(false, "NFC of %s gives %s", line, semi + 1);
        /* The quick check may say "not sure" but never "NFC" wrongly. */
        bool is_nfc = source_len == want_len && memcmp(source, want, want_len) == 0;
        if (nfc_quick_check(source, source_len) && !is_nfc && n_quick_wrong++ < 5)
            CHECK(false, "quick check calls %s NFC", line);
        free(got);
        n_cases++;
    }
    free(data);
    CHECK(n_cases > 90000, "NormalizationTest cases read: %d", n_cases);
    CHECK(n_wrong == 0, "NFC wrong on %d of %d NormalizationTest cases", n_wrong, n_cases);
    CHECK(n_quick_wrong == 0, "quick check wrong on %d cases", n_quick_wrong);
}

static void check_nfc(const char *s, const char *want, const char *what) {
    size_t len;
    char *got = nfc_normalize(s, strlen(s), &len);
    CHECK(len == strlen(want) && memcmp(got, want, len) == 0, "NFC of %s", what);
    free(got);
}

static void test_nfc_cases(void) {
    check_nfc("e\xCC\x81", "\xC3\xA9", "e + U+0301 composes to U+00E9");
    check_nfc("\xC3\xA9", "\xC3\xA9", "U+00E9 stays");
    check_nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81", "Hangul L V T jamo compose to U+AC01");
    check_nfc("\xEA\xB0\x80\xE1\x86\xA8", "\xEA\xB0\x81", "Hangul LV + T composes to U+AC01");
    check_nfc("\xEA\xB0\x81", "\xEA\xB0\x81", "Hangul syllable U+AC01 stays");
    check_nfc("a\xCC\x81\xCC\x96", "\xC3\xA1\xCC\x96", "a + acute (230) + grave below (220): reordered, composed");
    check_nfc("\xE2\x84\xAB", "\xC3\x85", "U+212B ANGSTROM SIGN (singleton) becomes U+00C5");
    check_nfc("\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC", "U+0958 (composition exclusion) stays decomposed");
    check_nfc("a\xE1\xB7\xB6\xCC\x96", "a\xE1\xB7\xB6\xCC\x96", "U+1DF6 (after Unicode 9.0) is not reordered");
    check_nfc("\xCC\x81" "a", "\xCC\x81" "a", "a leading combining mark stays");

    /* A long hostile run of marks of alternating classes must stay fast
     * (sorted in O(n log n)) and come out grouped by class. */
    size_t n = 200000;
    char *s = malloc(4 * n + 1);
    for (size_t i = 0; i < n; i++) memcpy(s + 4 * i, "\xCC\x81\xCC\x96", 4);
    size_t len;
    char *got = nfc_normalize(s, 4 * n, &len);
    CHECK(len == 4 * n && memcmp(got, "\xCC\x96", 2) == 0 && memcmp(got + 2 * n, "\xCC\x81", 2) == 0,
          "long run of marks reordered by class");
    free(got);
    free(s);

    CHECK(nfc_quick_check("plain ASCII", 11), "ASCII passes the quick check");
    CHECK(nfc_quick_check("\xE4\xB8\xAD\xE6\x96\x87", 6), "CJK passes the quick check");
    CHECK(!nfc_quick_check("e\xCC\x81", 3), "e + U+0301 fails the quick check");
}

int main(void) {
    test_classes();
    test_lossy();
    test_nfc_file();
    test_nfc_cases();
    return test_summary("test_unicode");
}
