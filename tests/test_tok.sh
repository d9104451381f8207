#!/bin/sh
# tests/test_tok.sh - `run tok` and `run detok` end to end, on model folders
# that hold only a tokenizer.json: Qwen2.5's, and the small Llama 3 and GPT-2
# style ones of scripts/make_small_tokenizers.py. Expected ids are Hugging
# Face's (the first line of tests/data/qwen2.5.jsonl, and the others noted
# there), and those of tests/data/llama-style.jsonl and gpt2-style.jsonl.
. tests/lib.sh

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=$tmp/model
mkdir "$model"
cp tests/data/qwen2.5-tokenizer.json "$model/tokenizer.json"

# out_is TEXT: stdout is exactly TEXT (printf format) and nothing else.
out_is() {
    printf "$1" >"$tmp/want"
    cmp -s "$tmp/out" "$tmp/want" || { echo "stdout is not '$1':"; od -c "$tmp/out" | head -5; return 1; }
}

# ---- tok ----
check "tok TEXT: exit 0" status 0 $RUN tok "$model" "Hello, world!"
check "tok TEXT: the ids on one line" out_is "9707 11 1879 0\n"
check "tok TEXT: nothing on stderr" test ! -s "$tmp/err"
printf 'Hello, world!' >"$tmp/text"
check "tok -f FILE: exit 0" status 0 $RUN tok "$model" -f "$tmp/text"
check "tok -f FILE: the ids" out_is "9707 11 1879 0\n"
check "tok from stdin: exit 0" status 0 sh -c "$RUN tok '$model' <'$tmp/text'"
check "tok from stdin: the ids" out_is "9707 11 1879 0\n"
check "tok MODEL as a file in the folder" status 0 $RUN tok "$model/tokenizer.json" "Hello, world!"
check "tok MODEL as a file: the ids" out_is "9707 11 1879 0\n"
check "tok --pieces: exit 0" status 0 $RUN tok "$model" --pieces "Hello, world!"
check "tok --pieces: id, tab, piece per line" out_is "9707\tHello\n11\t,\n1879\t\304\240world\n0\t!\n"
printf 'a\000b' >"$tmp/nul"
check "tok: a NUL in the text is text" status 0 $RUN tok "$model" -f "$tmp/nul"
check "tok: a NUL in the text: ids" out_is "64 188 65\n"
check "tok: empty text" status 0 $RUN tok "$model" ""
check "tok: empty text gives an empty line" out_is "\n"
check "tok: added tokens" status 0 $RUN tok "$model" "<|im_start|>user
hi<|im_end|>"
check "tok: added tokens: ids" out_is "151644 872 198 6023 151645\n"
check "tok --plain: exit 0" status 0 $RUN tok "$model" --plain "<|im_end|>"
check "tok --plain: <|im_end|> is text" sh -c "! grep -q 151645 '$tmp/out'"
printf 'a\377b' >"$tmp/bad"
check "tok: invalid UTF-8: exit 0" status 0 $RUN tok "$model" -f "$tmp/bad"
check "tok: invalid UTF-8: read as U+FFFD" out_is "64 5691 65\n"
check "tok: invalid UTF-8: one warning" one_error "warning: 1 invalid UTF-8 sequence"
check "tok -- TEXT: a text that starts with -" status 0 $RUN tok "$model" -- "-x"
check "tok -- TEXT: ids" out_is "6558\n"

# ---- detok ----
check "detok: exit 0" status 0 $RUN detok "$model" 9707 11 1879 0
check "detok: the exact text, no newline" out_is "Hello, world!"
check "detok: an added token is its text" status 0 $RUN detok "$model" 151645 198
check "detok: added token text" out_is "<|im_end|>\n"
# The three bytes of U+4E2D, one token each, make the character; two of
# them alone are an incomplete character: one U+FFFD.
check "detok: byte tokens" status 0 $RUN detok "$model" 160 116 255
check "detok: byte tokens make a character" out_is "\344\270\255"
check "detok: a cut character" status 0 $RUN detok "$model" 160 116
check "detok: a cut character is U+FFFD" out_is "\357\277\275"
printf 'Gr\303\274\303\237e, \344\270\226\347\225\214! \360\237\230\200 e\314\201' >"$tmp/mixed"
check "detok: round trip of tok" status 0 sh -c "$RUN detok '$model' \$($RUN tok '$model' -f '$tmp/mixed')"
check "detok: round trip gives the NFC text" out_is "Gr\303\274\303\237e, \344\270\226\347\225\214! \360\237\230\200 \303\251"

# ---- a Llama 3 style tokenizer: its post-processor puts a BOS (687) first ----
llama=$tmp/llama
mkdir "$llama"
cp tests/data/llama-style-tokenizer.json "$llama/tokenizer.json"
check "tok llama-style: exit 0" status 0 $RUN tok "$llama" "it's"
check "tok llama-style: the BOS, then the ids (llama-style.jsonl line 18)" out_is "687 543 422\n"
check "tok --no-special: exit 0" status 0 $RUN tok "$llama" --no-special "it's"
check "tok --no-special: no BOS" out_is "543 422\n"
check "tok llama-style: digits in threes (line 8)" status 0 $RUN tok "$llama" 1234567890
check "tok llama-style: digits in threes: ids" out_is "687 332 334 335 15\n"
check "tok llama-style: empty text" status 0 $RUN tok "$llama" ""
check "tok llama-style: empty text is the BOS alone" out_is "687\n"
check "tok llama-style: a typed BOS and the added one (line 94)" status 0 $RUN tok "$llama" "<|begin_of_text|>Hi"
check "tok llama-style: a typed BOS: ids" out_is "687 687 39 72\n"
check "tok --plain llama-style: exit 0" status 0 $RUN tok "$llama" --plain "<|begin_of_text|>"
check "tok --plain llama-style: the BOS once, then text" sh -c "[ \$(grep -o '\\<687\\>' '$tmp/out' | wc -l) -eq 1 ] && grep -q '^687 ' '$tmp/out'"
check "tok --pieces llama-style: exit 0" status 0 $RUN tok "$llama" --pieces "it's"
check "tok --pieces llama-style: the BOS spelled" out_is "687\t<|begin_of_text|>\n543\tit\n422\t's\n"
check "detok llama-style: exit 0" status 0 $RUN detok "$llama" 687 543 422
check "detok llama-style: the BOS is its text" out_is "<|begin_of_text|>it's"

# ---- a GPT-2 style tokenizer: <s> (617) first and </s> (618) last ----
gpt2=$tmp/gpt2
mkdir "$gpt2"
cp tests/data/gpt2-style-tokenizer.json "$gpt2/tokenizer.json"
check "tok gpt2-style: exit 0" status 0 $RUN tok "$gpt2" "Hello world"
check "tok gpt2-style: <s>, the ids, </s> (gpt2-style.jsonl line 2)" out_is "617 453 416 618\n"
check "tok gpt2-style: numbers in one run (line 8)" status 0 $RUN tok "$gpt2" --no-special 1234567890
check "tok gpt2-style: numbers: ids" out_is "49 50 51 436 48\n"

# ---- errors ----
check "detok: id past the vocabulary: exit 2" status 2 $RUN detok "$model" 151665
check "detok: id past the vocabulary: named" grep -q "^run: .*151665" "$tmp/err"
check "detok: not a number: exit 2" status 2 $RUN detok "$model" 12x
check "detok: negative id: exit 2" status 2 $RUN detok "$model" -5
check "tok: no MODEL: exit 2" status 2 $RUN tok
check "tok: unknown flag: exit 2" status 2 $RUN tok "$model" --frob x
check "tok: text and -f: exit 2" status 2 $RUN tok "$model" x -f "$tmp/text"
check "tok: -f without a file: exit 2" status 2 $RUN tok "$model" -f
check "tok: missing tokenizer.json: exit 1" status 1 $RUN tok "$tmp" x
check "tok: missing tokenizer.json: named" one_error "$tmp/tokenizer.json"
check "tok: missing -f file: exit 1" status 1 $RUN tok "$model" -f "$tmp/nope"
check "tok: missing -f file: named" one_error "$tmp/nope"
mkdir "$tmp/broken"
echo '{"model": {"type": "WordPiece"}}' >"$tmp/broken/tokenizer.json"
check "tok: unsupported tokenizer.json: exit 1" status 1 $RUN tok "$tmp/broken" x
check "tok: unsupported tokenizer.json: one line naming it" one_error "$tmp/broken/tokenizer.json: .*WordPiece"
check "detok: unsupported tokenizer.json: exit 1" status 1 $RUN detok "$tmp/broken" 1
check "tok --help: exit 0" status 0 $RUN tok --help
check "tok --help: lists the flags" sh -c "grep -q -- --pieces '$tmp/out' && grep -q -- --plain '$tmp/out'"
check "detok --help: exit 0" status 0 $RUN detok --help

summary test_tok
