#!/usr/bin/env node
// make_sp_tokenizers.mjs - small SentencePiece-style tokenizers of the
// project's own, one for each part of the tokenizer.json pipeline that
// tokenizer.c reads, and their golden encodings made by Hugging Face's own
// tokenizers library (Rust, through its Node binding), for the tests.
//
//     npm ci --prefix tests/hf_tokenizers      (once: the oracles)
//     node scripts/make_sp_tokenizers.mjs      writes the fixtures
//
// Writes, in tests/data/sp/:
//   NAME.json   a tokenizer.json (see PIPELINES below for what each holds)
//   NAME.jsonl  TEXTS, each with "ids" (add_special_tokens=false),
//               "ids_with_special" (true), "decoded" (decode of "ids",
//               special tokens kept) and "decoded_with_special"
//
// The vocabulary and merges are learned here from CORPUS (plain BPE
// training), so nothing comes from another tokenizer's files. The goldens
// are the Rust library's; tokenizers.js (@huggingface/tokenizers), a second,
// independent implementation, is run on the same lines and the script
// prints how many lines it disagrees on (its Metaspace and Split follow the
// Rust library only in part: see the printout), as a check on the fixtures.
// The output is deterministic: rerunning the script rewrites the same files.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const OUT = path.join(ROOT, "tests", "data", "sp");
const require = createRequire(path.join(ROOT, "tests", "hf_tokenizers", "package.json"));
const rust = require("tokenizers");
const js_module = await import(require.resolve("@huggingface/tokenizers"));
const JsTokenizer = js_module.Tokenizer ?? js_module.default.Tokenizer;

const SPACE = "\u2581";  // SentencePiece's '▁'

const CORPUS = `The quick brown fox jumps over the lazy dog. A state-of-the-art design
is easy to read and hard to write. Hello world, hello there! The café near the
station serves tea and coffee; the tea is good. Numbers like 12 and 345 appear
too. Read the text, then write the text again: the reader reads what the writer
wrote. Naïve résumé, über cool, déjà vu. Well-known long-term plans go on and on.`;

// ---- training: BPE on the corpus's words, each with its leading '▁' ----

function train(merges_wanted) {
    const words = new Map();
    for (const w of CORPUS.replace(/\s+/g, " ").split(" ").filter(Boolean)) {
        const key = SPACE + w;
        words.set(key, (words.get(key) || 0) + 1);
    }
    let seqs = [...words.entries()].map(([w, n]) => [[...w], n]);
    const merges = [];
    while (merges.length < merges_wanted) {
        const counts = new Map();
        for (const [s, n] of seqs)
            for (let i = 0; i + 1 < s.length; i++) {
                const k = s[i] + "\u0000" + s[i + 1];
                counts.set(k, (counts.get(k) || 0) + n);
            }
        let best = null, best_n = 0;
        for (const [k, n] of [...counts.entries()].sort()) if (n > best_n) best = k, best_n = n;
        if (!best) break;
        const [a, b] = best.split("\u0000");
        merges.push([a, b]);
        seqs = seqs.map(([s, n]) => {
            const out = [];
            for (let i = 0; i < s.length; i++) {
                if (i + 1 < s.length && s[i] === a && s[i + 1] === b) out.push(a + b), i++;
                else out.push(s[i]);
            }
            return [out, n];
        });
    }
    return merges;
}

// The vocabulary: <unk> <s> </s>, the 256 byte tokens, the corpus's
// characters (and '▁'), then each merge's token.
function vocabulary(merges) {
    const vocab = {"<unk>": 0, "<s>": 1, "</s>": 2};
    let next = 3;
    const add = (t) => { if (!(t in vocab)) vocab[t] = next++; };
    for (let b = 0; b < 256; b++) add(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    add(SPACE);
    for (const c of [...new Set([...CORPUS.replace(/\s+/g, "")])].sort()) add(c);
    for (const [a, b] of merges) add(a + b);
    return vocab;
}

const MERGES = train(160);
const VOCAB = vocabulary(MERGES);

// ---- the pipelines ----

const added = (id, content, special = true) =>
    ({id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special});
const ADDED = [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")];
const replace = (from, to) => ({type: "Replace", pattern: {String: from}, content: to});
const template = (single) => ({
    type: "TemplateProcessing",
    single: single.map((x) => x === "$A" ? {Sequence: {id: "A", type_id: 0}} : {SpecialToken: {id: x, type_id: 0}}),
    pair: [],
    special_tokens: Object.fromEntries(["<s>", "</s>"].map((t) => [t, {id: t, ids: [VOCAB[t]], tokens: [t]}])),
});
const metaspace = (prepend_scheme, split) => ({type: "Metaspace", replacement: SPACE, prepend_scheme, split});
const split = (pattern, behavior, invert = false) => ({type: "Split", pattern, behavior, invert});
const sp_decoder = (...extra) => ({type: "Sequence", decoders: [replace(SPACE, " "), {type: "ByteFallback"}, {type: "Fuse"}, ...extra]});
const LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const model = (options) => ({
    type: "BPE", dropout: null, unk_token: "<unk>", continuing_subword_prefix: null, end_of_word_suffix: null,
    fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab: VOCAB, merges: MERGES, ...options,
});

// Each: [name, what it shows, normalizer, pre_tokenizer, model options, post_processor, decoder]
const PIPELINES = [
    ["llama2", "Llama 2's: Prepend + Replace, no pre-tokenizer, byte fallback, <s> first, Strip of the first space",
     {type: "Sequence", normalizers: [{type: "Prepend", prepend: SPACE}, replace(" ", SPACE)]}, null, {},
     template(["<s>", "$A"]), sp_decoder({type: "Strip", content: " ", start: 1, stop: 0})],
    ["gemma3", "Gemma 3's: Replace, Split on ' ' MergedWithPrevious, merges as \"a b\" strings",
     replace(" ", SPACE), split({String: " "}, "MergedWithPrevious"),
     {merges: MERGES.map(([a, b]) => a + " " + b)}, template(["<s>", "$A"]), sp_decoder()],
    ["metaspace-first", "NFC, Metaspace prepend_scheme first with split (legacy: false), unk not fused, no byte fallback, <s> $A </s>",
     {type: "NFC"}, metaspace("first", true), {byte_fallback: false, fuse_unk: false},
     template(["<s>", "$A", "</s>"]), {type: "Metaspace", replacement: SPACE, prepend_scheme: "first", split: true}],
    ["metaspace-always", "Metaspace always without split, unk fused, no byte fallback, EOS only",
     null, metaspace("always", false), {byte_fallback: false},
     template(["$A", "</s>"]), {type: "Metaspace", replacement: SPACE, prepend_scheme: "always", split: false}],
    ["metaspace-never", "Metaspace never, no unk token and no byte fallback (unknown characters vanish), Strip of a last space",
     null, metaspace("never", true), {unk_token: null, byte_fallback: false},
     null, {type: "Sequence", decoders: [{type: "ByteFallback"}, {type: "Metaspace", replacement: SPACE, prepend_scheme: "never", split: true}, {type: "Strip", content: " ", start: 0, stop: 1}]}],
    ...["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"].map((behavior) =>
        ["split-" + behavior.toLowerCase(), `Split on '-' ${behavior}, then Metaspace`,
         null, {type: "Sequence", pretokenizers: [split({String: "-"}, behavior), metaspace("always", false)]}, {},
         template(["<s>", "$A"]), sp_decoder()]),
    ["split-inverted", "Split on '-' inverted (the stretches between dashes are the matches), Contiguous",
     null, {type: "Sequence", pretokenizers: [split({String: "-"}, "Contiguous", true), metaspace("first", true)]}, {},
     null, sp_decoder()],
    ["split-regex", "Split by Llama 3's regex, Isolated, then Metaspace, in a SentencePiece-style vocabulary",
     null, {type: "Sequence", pretokenizers: [split({Regex: LLAMA3_REGEX}, "Isolated"), metaspace("never", false)]}, {},
     null, sp_decoder()],
];

// Texts for every pipeline: spaces at the ends and in runs, dashes, added
// tokens typed in the text, characters outside the vocabulary (byte
// fallback or unk), decomposed accents (NFC), the empty text.
const TEXTS = [
    "Hello world", "hello there", "The quick brown fox jumps over the lazy dog.", " leading space", "trailing space ",
    "two  spaces", "   ", " ", "", "a", "state-of-the-art design", "well-known", "-", "--", "a--b", "-start", "end-",
    " - spaced - dashes - ", "caf\u00e9", "cafe\u0301 au lait", "na\u00efve r\u00e9sum\u00e9", "\u00fcber", "\u65e5\u672c\u8a9e",
    "emoji \ud83d\ude00 ok", "\ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67", "x\u0000y", "tab\there", "new\nline",
    "\r\n", "<s>Hello", "Hello</s>", "one<s> two", "<unk>", "a <unk> b", "<s>", "</s> </s>", "12345", "1 2 3",
    "don't stop", "READ THE TEXT", "zzz qqq", "\u00a0nbsp", "the text, then write the text again: the reader reads",
    "Well-known long-term plans go on and on.", "\u2581already\u2581spaced", "\u0394\u03b5\u03bb\u03c4\u03b1", "\u00e9",
    "ab\u00e9cd", "\u0418\u0432\u0430\u043d \u0418\u0432\u0430\u043d\u043e\u0432",
];

// ---- writing ----

function tokenizer_json(name, normalizer, pre_tokenizer, options, post_processor, decoder) {
    return {
        version: "1.0", truncation: null, padding: null, added_tokens: ADDED, normalizer, pre_tokenizer,
        post_processor, decoder, model: model(options),
    };
}

fs.mkdirSync(OUT, {recursive: true});
let disagreements = 0;
for (const [name, what, normalizer, pre, options, post, decoder] of PIPELINES) {
    const json = tokenizer_json(name, normalizer, pre, options, post, decoder);
    const text = JSON.stringify(json);
    fs.writeFileSync(path.join(OUT, name + ".json"), text + "\n");
    const hf = rust.Tokenizer.fromString(text);
    const other = new JsTokenizer(json, {});
    const lines = [];
    let differ = 0;
    for (const t of TEXTS) {
        const ids = (await hf.encode(t, null, {addSpecialTokens: false})).getIds();
        const with_special = (await hf.encode(t, null, {addSpecialTokens: true})).getIds();
        const line = {text: t, ids, ids_with_special: with_special, decoded: await hf.decode(ids, false),
                      decoded_with_special: await hf.decode(with_special, false)};
        lines.push(JSON.stringify(line).replace(/[\u007f-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")));
        const js_ids = other.encode(t, {add_special_tokens: true}).ids;
        if (JSON.stringify(js_ids) !== JSON.stringify(with_special)) differ++;
    }
    fs.writeFileSync(path.join(OUT, name + ".jsonl"), lines.join("\n") + "\n");
    console.log(`${name}: ${what}; tokenizers.js differs on ${differ} of ${TEXTS.length} lines`);
    disagreements += differ;
}
console.log(`${PIPELINES.length} tokenizers, ${TEXTS.length} texts each; tokenizers.js differs on ${disagreements} lines in all`);
