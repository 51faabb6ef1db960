"""What every web app of the project says back to a visitor: the error class of their bad
input, and messages with the server's folders left out (docs/guide/web_shell.md).

>>> redact_paths("[Errno 21] Is a directory: '/tmp/gradio/ab12/upload'")
"[Errno 21] Is a directory: 'upload'"
"""

from __future__ import annotations

import re

__all__ = ["UserInputError", "redact_paths"]

#: An absolute POSIX path (not the path part of a URL or a Hub id): its last part is group 1.
_PATH = re.compile(r"(?<![\w:/.~-])/(?:[^\s'\"(),:/]+/)*([^\s'\"(),:/]+)")


class UserInputError(ValueError):
    """Bad input from a visitor; its message is shown in the page (server paths redacted)."""


def redact_paths(text: str) -> str:
    """``text`` with every absolute path replaced by its last part, so that no message shown
    to a visitor tells them where the server keeps its files."""
    return _PATH.sub(lambda m: m.group(1), text)
