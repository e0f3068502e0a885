"""Grouping by key into compressed sparse rows, a part at a time: the inverted indexes (BM25 postings
by term, sparse vectors by dimension) and their saved forms (vectors by row) are built by placing
each entry in its key's next free slot, so no sort of everything is ever held at once. Their arrays
are saved as one deflated .npz file each (write_npz)."""
from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

PART = 1 << 20  # entries grouped at a time when one array is cut into parts


def parts_of(*arrays: np.ndarray, size: int = PART) -> list[tuple[Any, ...]]:
    """The arrays cut into aligned slices of `size` entries."""
    return [tuple(a[i:i + size] for a in arrays) for i in range(0, len(arrays[0]), size)]


def group(parts: Sequence[tuple[np.ndarray, ...]], keys: int, dtypes: tuple) -> tuple[np.ndarray, ...]:
    """(indptr, *values) grouped by key from parts of (key, *values): entries with the same key keep
    the order they come in (the order of the parts, then their order within a part)."""
    indptr = np.zeros(keys + 1, np.int64)
    for key, *_ in parts:
        indptr[1:] += np.bincount(key, minlength=keys)
    np.cumsum(indptr, out=indptr)
    free = indptr[:-1].copy()
    outs = [np.empty(indptr[-1], dtype) for dtype in dtypes]
    for key, *values in parts:
        if not len(key):
            continue
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
        run = np.diff(np.append(first, len(key)))
        place = free[key] + np.arange(len(key)) - np.repeat(first, run)
        for out, value in zip(outs, values, strict=True):
            out[place] = value[order]
        free[key[first]] += run
    return (indptr, *outs)


def write_npz(path: Path, arrays: dict) -> None:
    """Write arrays as one .npz file, deflated at level 1 (np.load reads it as any .npz; sorted row
    gaps and small counts shrink several times over, in about a second for a 100 MB index)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as out:
                np.lib.format.write_array(out, np.asanyarray(array), allow_pickle=False)
