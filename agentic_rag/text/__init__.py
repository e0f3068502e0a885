"""The text layer everything else reads text with: tokens (words, CJK uni- and bigrams; _tokenize),
names (_names), sentences and the boundaries chunks are cut at (_sentences), and the lexical judges
built on them: a question's key terms, entities and shape, and how well evidence supports a
sentence (_lexical). It imports nothing else of agentic_rag."""
from ._sentences import split_sentences
from ._tokenize import tokenize

__all__ = ["tokenize", "split_sentences"]
