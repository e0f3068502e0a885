"""Writing a small file whole: to a new file beside it (readable by its owner only), then renamed
over it, so that the file always holds a whole version, the last written, whatever stops the write."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomic(target: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to `target` whole; an OSError leaves `target` as it was."""
    target = Path(target)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
