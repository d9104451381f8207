#!/bin/sh
# tests/test_terminal.sh - gen and chat at a terminal, driven through a
# pseudo-terminal by tests/pty_run.py: Ctrl-C, Ctrl-D, pastes, line
# continuations, the chat commands, colours reset on the way out.
. tests/lib.sh

golden=tests/data/generation_golden.json
qwen_fixture checkpoint
pty() { python3 tests/pty_run.py --timeout 120 --log "$tmp/log" "$@"; }
# The start of the reference's reply to prompt 0, as a regular expression.
reply_start=$(python3 -c '
import json, re, sys
gen = json.load(open(sys.argv[1]))["gen"][0]
print(gen["prompt"] + "\t" + re.escape(gen["stdout"][:4]))' "$golden")
prompt=${reply_start%%	*}
reply_start=${reply_start#*	}
# A context so long that an unbounded reply is still running when Ctrl-C comes.
long="-c 32768 -n -1 --temp 0"

# ---- gen ----
# shellcheck disable=SC2086
pty "wait:$reply_start" 'send:\x03' -- $RUN gen "$model" "$prompt" $long
check "gen: Ctrl-C stops generation with exit status 130" test $? -eq 130
check "gen: ... and prints the statistics" grep -q "stopped by an interruption" "$tmp/log"

pty 'wait:reading the prompt from standard input' 'send:Hello\x04' 'wait:prompt: 1 token,' -- $RUN gen "$model" -n 4
check "gen at a terminal with no prompt: reads standard input, one Ctrl-D ends it" test $? -eq 0
check "gen: ... and generates" grep -q "generated: 4 tokens" "$tmp/log"

# ---- chat ----
# shellcheck disable=SC2086
pty 'wait:/help lists the commands' 'wait:> ' 'send:hi\n' 'wait:\x1b\[36m\S' 'send:\x03' 'wait:\n.*> ' \
    'send:/help\n' 'wait:/reset starts a new conversation' 'send:/frob\n' 'wait:unknown command /frob' \
    'wait:> ' 'send:\x03' -- $RUN chat "$model" $long
check "chat: Ctrl-C stops a reply, /help, an unknown command, Ctrl-C at the prompt ends (exit 0)" test $? -eq 0
check "chat: bracketed paste is turned on and off" sh -c "grep -q \"$(printf '\033')\\[?2004h\" '$tmp/log' && grep -q \"$(printf '\033')\\[?2004l\" '$tmp/log'"
last_colour=$(grep -ao "$(printf '\033')\[[0-9;]*m" "$tmp/log" | tail -n 1)
check "chat: the last colour code is a reset" test "$last_colour" = "$(printf '\033[0m')"

# A paste of two lines is one message; so are two lines joined by '\'. Both
# must give the same reply, and not the two replies of two messages.
pty 'wait:> ' 'send:\x1b[200~one\ntwo\x1b[201~\n' 'wait:\x1b\[0m\r?\n' 'send:\x04' -- $RUN chat "$model" --temp 0 -n 6
check "chat: a pasted message" test $? -eq 0
tr -d '\r' <"$tmp/log" | grep -a "$(printf '\033')\[36m" | sed "s/.*$(printf '\033')\[36m//; s/$(printf '\033')\[0m.*//" >"$tmp/pasted"
printf 'one\\\ntwo\n' | $RUN chat "$model" --temp 0 -n 6 >"$tmp/joined" 2>/dev/null
printf 'one\ntwo\n' | $RUN chat "$model" --temp 0 -n 6 >"$tmp/two" 2>/dev/null
check "chat: a paste and a '\\' continuation give the same single reply" cmp -s "$tmp/pasted" "$tmp/joined"
check "chat: ... which two separate messages do not" sh -c "! cmp -s '$tmp/joined' '$tmp/two'"
check "chat: two messages, two replies" test "$(wc -l <"$tmp/two")" -eq 2

summary test_terminal
