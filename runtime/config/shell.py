"""Split shell text into simple commands, or say it cannot be proven simple.

Approval rules allow a command by its leading words, so the words must be the
ones the shell will run. This scanner follows POSIX shell quoting (single and
double quotes, backslash escapes, line continuations, comments) and splits on
the list and pipeline operators `&&`, `||`, `;`, `|` and newlines. Whatever it
cannot prove harmless gives None, and a rule then never applies (the call
asks): command and process substitution, any `$` expansion, subshells and
groups, heredocs, background `&`, and redirections other than to `/dev/null`
or between descriptors (`2>&1`).

Why not a library: bashlex (the one maintained bash parser on PyPI) is GPL-3.0
and untyped; `shlex` with `punctuation_chars` treats `"$(cmd)"` as a literal
word, which bash runs — exactly the hole a rule must not have.
"""

from __future__ import annotations

import msgspec

SEPARATORS = ("&&", "||", ";", "|", "\n")
_GLOB = frozenset("*?[]{}~")
_RESERVED = frozenset(
    {
        "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while",
        "until", "do", "done", "function", "time", "coproc", "!", "[[", "]]", "{", "}",
    }
)  # fmt: skip
_SAFE_TARGETS = frozenset({"/dev/null"})


class Word(msgspec.Struct, frozen=True):
    text: str
    literal: bool  # no unquoted glob, brace or tilde character: it means itself


class _Unsafe(Exception):
    pass


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.commands: list[list[Word]] = [[]]
        self.buf: list[str] = []
        self.started = False  # a word is open (even an empty quoted one)
        self.quoted = False  # some of the open word was quoted
        self.literal = True

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < len(self.text) else ""

    def end_word(self) -> None:
        if self.started:
            self.commands[-1].append(Word("".join(self.buf), self.literal))
        self.buf, self.started, self.quoted, self.literal = [], False, False, True

    def separate(self) -> None:
        self.end_word()
        if self.commands[-1]:
            self.commands.append([])
        elif len(self.commands) > 1:
            raise _Unsafe("an operator with no command before it")

    def run(self) -> list[list[Word]]:
        while self.i < len(self.text):
            self.step()
        self.end_word()
        if not self.commands[-1]:
            self.commands.pop()
        return self.commands

    def step(self) -> None:
        c = self.peek()
        if c in " \t":
            self.end_word()
            self.i += 1
        elif c == "\\":
            self.backslash()
        elif c == "'":
            self.single()
        elif c == '"':
            self.double()
        elif c in "$`":
            raise _Unsafe("an expansion or substitution")
        elif c == "#" and not self.started:
            while self.i < len(self.text) and self.peek() != "\n":
                self.i += 1
        elif c in "\n;":
            self.separate()
            self.i += 1
        elif c == "&":
            self.ampersand()
        elif c == "|":
            self.separate()
            self.i += 2 if self.peek(1) == "|" else 1
            if self.peek() == "&":
                raise _Unsafe("|&")
        elif c in "<>":
            self.redirection()
        elif c in "()":
            raise _Unsafe("a subshell")
        else:
            if c in _GLOB:
                self.literal = False
            self.buf.append(c)
            self.started = True
            self.i += 1

    def backslash(self) -> None:
        nxt = self.peek(1)
        self.i += 2
        if nxt == "\n":
            return  # line continuation
        if not nxt:
            raise _Unsafe("a trailing backslash")
        self.buf.append(nxt)
        self.started = self.quoted = True

    def single(self) -> None:
        end = self.text.find("'", self.i + 1)
        if end < 0:
            raise _Unsafe("an unterminated quote")
        self.buf.append(self.text[self.i + 1 : end])
        self.started = self.quoted = True
        self.i = end + 1

    def double(self) -> None:
        self.i += 1
        self.started = self.quoted = True
        while True:
            c = self.peek()
            if not c:
                raise _Unsafe("an unterminated quote")
            self.i += 1
            if c == '"':
                return
            if c in "$`":
                raise _Unsafe("an expansion or substitution")
            if c == "\\" and self.peek() in ('"', "\\", "$", "`", "\n"):
                escaped = self.peek()
                self.i += 1
                if escaped != "\n":
                    self.buf.append(escaped)
                continue
            self.buf.append(c)

    def ampersand(self) -> None:
        if self.peek(1) == "&":
            self.separate()
            self.i += 2
        elif self.peek(1) == ">":
            self.end_word()
            self.i += 1
            self.redirection()
        else:
            raise _Unsafe("a background job")

    def redirection(self) -> None:
        """`[n]>target`, `[n]>>target`, `[n]>&m`, `[n]<&m`: only /dev/null or a descriptor."""
        if self.started and not self.quoted and "".join(self.buf).isdigit():
            self.buf, self.started, self.literal = [], False, True  # the descriptor number
        else:
            self.end_word()
        op = self.peek()
        self.i += 1
        if self.peek() == "<" or (op == "<" and self.peek() == ">"):
            raise _Unsafe("a heredoc or read-write redirection")
        if (self.peek() == ">" and op == ">") or (self.peek() == "|" and op == ">"):
            self.i += 1
        duplicate = self.peek() == "&"
        if duplicate:
            self.i += 1
        if self.peek() == "(":
            raise _Unsafe("a process substitution")
        while self.peek() in (" ", "\t"):
            self.i += 1
        start = self.i
        while self.peek() and self.peek() not in " \t\n;&|<>()'\"\\$`":
            self.i += 1
        target = self.text[start : self.i]
        if duplicate and (target.isdigit() or target == "-"):
            return
        if not duplicate and op == ">" and target in _SAFE_TARGETS and self.peek() in " \t\n;&|":
            return
        raise _Unsafe("a redirection to a file")


def split_commands(text: str) -> list[list[Word]] | None:
    """The simple commands of `text` (each a list of words), or None if the text is
    not provably a list of simple commands (then no rule may allow it)."""
    try:
        commands = _Scanner(text).run()
    except _Unsafe:
        return None
    if not commands:
        return None
    for words in commands:
        if words[0].text in _RESERVED or not words[0].literal:
            return None
    return commands
