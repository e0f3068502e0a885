"""Files in, Documents out: the folder walk and its limits (_files), the readers for PDF, Word and
images (_loaders) and HTML (_html), load_documents (_documents), and chunking (_chunking)."""
from ._chunking import chunk_text as chunk_text
from ._chunking import document_chunks as document_chunks
from ._documents import SUFFIXES as SUFFIXES
from ._documents import Document as Document
from ._documents import LoadResult as LoadResult
from ._documents import load_documents as load_documents
from ._documents import read_file as read_file
from ._files import MAX_FILE_BYTES as MAX_FILE_BYTES
from ._files import MAX_UPLOAD_BYTES as MAX_UPLOAD_BYTES
from ._gzip import gunzip as gunzip
from ._loaders import IMAGE_SUFFIXES as IMAGE_SUFFIXES
from ._loaders import Unreadable as Unreadable
from ._loaders import unpacked_size as unpacked_size
from ._pdf import UNSPACED as UNSPACED
