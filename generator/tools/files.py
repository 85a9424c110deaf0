"""Output files of the tools: written atomically or not at all, checked before a long run, and
the one-line exit-2 failure the CLI reports for what cannot be written (or asked)."""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import click


class UsageFailure(click.ClickException):
    """One clear line on stderr and exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"aesgen: error: {self.message}", err=True)



def write_atomically(files: dict[Path, str | bytes]) -> None:
    """Write every file to a temporary name in its folder first; rename only when all are
    written, so a failure leaves nothing behind (no temporary, no half of a file pair).
    A new file gets 0o666 & ~umask (as open() would give it); a file overwritten keeps its
    mode. A file that cannot be written is one line and exit code 2 (UsageFailure)."""
    for path in files:
        if path.is_dir():
            raise UsageFailure(f"cannot write '{path}': it is a folder")
    umask = os.umask(0o022)
    os.umask(umask)
    temps: list[tuple[Path, Path]] = []
    current = next(iter(files), None)
    try:
        for current, content in files.items():
            fd, tmp = tempfile.mkstemp(dir=current.parent, prefix=f".{current.name}.", suffix=".tmp")
            temps.append((Path(tmp), current))
            with os.fdopen(fd, "wb") as f:
                f.write(content.encode("utf-8") if isinstance(content, str) else content)
                os.fchmod(f.fileno(), _mode_for(current, umask))
        for tmp, current in temps:
            os.replace(tmp, current)
    except OSError as e:
        raise UsageFailure(f"cannot write '{current}': {e.strerror or e}") from None
    finally:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)


def _mode_for(path: Path, umask: int) -> int:
    """The permission bits a written file gets: the replaced file's, else what the umask allows."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return 0o666 & ~umask


def require_folder(path: Path) -> None:
    """The folder an output file goes into exists (else one line and exit code 2)."""
    if not path.parent.is_dir():
        what = "is not a folder" if path.parent.exists() else "does not exist"
        raise UsageFailure(f"output folder '{path.parent}' {what}")


def require_writable(*paths: Path | None, create_folder: bool = False) -> None:
    """Before a long run (a benchmark, an exploration, tuning): each output's folder exists
    (or is made, with create_folder) and takes a file; the write itself comes later."""
    for path in paths:
        if path is None:
            continue
        if create_folder:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise UsageFailure(f"cannot create folder '{path.parent}': {e.strerror or e}") from None
        require_folder(path)
        try:
            fd, probe = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        except OSError as e:
            raise UsageFailure(f"cannot write '{path}': {e.strerror or e}") from None
        os.close(fd)
        os.unlink(probe)
        if path.is_dir():
            raise UsageFailure(f"cannot write '{path}': it is a folder")
