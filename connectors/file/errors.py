"""File-system errors of the file connectors, turned into failures that say what to fix."""

from __future__ import annotations

import errno
import os

from headwater.connect.api import ConnectException
from headwater.kernel_limits import limit_fix

__all__ = ["file_error"]

_FIXES = {
    errno.EACCES: "give the worker's user ({user}) {access} access to {path}",
    errno.EPERM: "give the worker's user ({user}) {access} access to {path}",
    errno.ENOSPC: "free space on the file system that holds {path}",
    errno.EDQUOT: "raise the disk quota of the worker's user ({user}) or free space",
    errno.EFBIG: "the file {path} reached the largest size allowed (ulimit -f or the file system's limit): "
                 "rotate or move it",
    errno.EROFS: "{path} is on a read-only file system: point the connector at a writable one",
    errno.EISDIR: "{path} is a directory: set the connector's file to a file",
    errno.ENOTDIR: "a part of {path} is not a directory: fix the path",
    errno.EIO: "the device behind {path} reports I/O errors: check the disk",
}


def file_error(connector: str, action: str, path: str, exc: OSError) -> ConnectException:
    """``exc`` as a ConnectException naming the connector, what it was doing, the path, the problem
    and the fix; the task fails with it and is restarted once the fix is made."""
    user = _user()
    access = "read" if action.startswith("read") else "write"
    fix = limit_fix(exc) or _FIXES.get(exc.errno or 0, "fix the problem with {path}").format(
        user=user, access=access, path=path)
    return ConnectException(f"{connector} cannot {action} {path}: {exc.strerror or exc}. To fix: {fix}, then "
                            f"restart the task (POST /connectors/<name>/tasks/<id>/restart).")


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return str(os.geteuid())
