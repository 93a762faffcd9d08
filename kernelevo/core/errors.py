"""The one family of user errors: ``KernelevoError``.

A user error is input the user can fix: a config value, a file, a directory, a command line, a cluster that is not
there. Its message names the problem and the fix, in one line. The commands (``kernelevo/``) catch this family
alone and print that line; any other exception, a plain ``ValueError`` included, is a bug and ends the command with
its traceback, leaving its run directory as it was for the evidence. It derives from ``Exception``, not from
``ValueError``: a failed unpacking or a numpy shape error is never taken for one.
"""
from __future__ import annotations


class KernelevoError(Exception):
    """Input the user can fix; the message says what is wrong and how to fix it."""
