"""Files in, Documents out: the folder walk and its limits (_files), the readers for PDF, Word and
images (_loaders) and HTML (_html), load_documents (_documents), and chunking (_chunking)."""
