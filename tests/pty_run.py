#!/usr/bin/env python3
"""tests/pty_run.py - runs a command on a pseudo-terminal, as a person at a
terminal would: it types, waits for what the program writes, presses Ctrl-C.

usage: pty_run.py [--timeout S] [--log FILE] STEP... -- COMMAND [ARG...]

Steps, in order:
  send:TEXT     types TEXT (Python escapes: \\n, \\x03 for Ctrl-C, \\x04 for Ctrl-D,
                \\x1b for ESC)
  wait:REGEX    waits until the output since the last wait matches REGEX
  sleep:S       waits S seconds
Everything the command writes (stdout and stderr share the terminal) goes
to FILE. The exit status is the command's, 124 when a step or the command
times out, 125 when a wait's pattern never comes (the command is killed).
Only the standard library is used.
"""
import os, pty, re, select, signal, sys, time

def main():
    args = sys.argv[1:]
    timeout, log = 30.0, None
    while args and args[0].startswith("--") and args[0] != "--":
        flag, value = args[0], args[1]
        args = args[2:]
        if flag == "--timeout":
            timeout = float(value)
        elif flag == "--log":
            log = value
        else:
            sys.exit(f"pty_run.py: unknown flag {flag}")
    split = args.index("--")
    steps, command = args[:split], args[split + 1:]

    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)
    output = b""
    seen = 0  # output before this offset was matched by an earlier wait
    deadline = time.monotonic() + timeout

    def read_some(wait_seconds):
        nonlocal output
        ready, _, _ = select.select([fd], [], [], wait_seconds)
        if not ready:
            return True
        try:
            data = os.read(fd, 65536)
        except OSError:
            return False
        if not data:
            return False
        output += data
        return True

    status = None
    for step in steps:
        kind, _, value = step.partition(":")
        if kind == "send":
            os.write(fd, value.encode("utf-8").decode("unicode_escape").encode("latin-1"))
        elif kind == "sleep":
            end = time.monotonic() + float(value)
            while time.monotonic() < end and read_some(end - time.monotonic()):
                pass
        elif kind == "wait":
            pattern = re.compile(value.encode("utf-8"), re.S)
            while True:
                match = pattern.search(output, seen)
                if match:
                    seen = match.end()
                    break
                if time.monotonic() > deadline or not read_some(0.1):
                    os.kill(pid, signal.SIGKILL)
                    status = 125
                    break
            if status is not None:
                break
        else:
            sys.exit(f"pty_run.py: unknown step {step}")
    while status is None:
        done, code = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(code)
            while read_some(0.05):
                pass
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = 124
            break
        read_some(0.05)
    if log:
        with open(log, "wb") as f:
            f.write(output)
    if status == 125:
        sys.stderr.write(f"pty_run.py: never saw {value!r} in: {output[seen:][-400:]!r}\n")
    sys.exit(status if status >= 0 else 128 - status)

if __name__ == "__main__":
    main()
