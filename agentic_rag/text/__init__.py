"""The text layer everything else reads text with: tokens (words, CJK uni- and bigrams; _tokenize),
names (_names), sentences and the boundaries chunks are cut at (_sentences), and the lexical judges
built on them: a question's key terms, entities and shape, and how well evidence supports a
sentence (_lexical). It imports nothing else of agentic_rag."""
# for the package's other folders, not public API (the public names are in __all__)
from ._candidates import FRAMING as FRAMING
from ._candidates import answer_windows as answer_windows
from ._candidates import candidates as candidates
from ._candidates import restates as restates
from ._lexical import COMPARISON as COMPARISON
from ._lexical import GREETING as GREETING
from ._lexical import NUMBER as NUMBER
from ._lexical import absent_terms as absent_terms
from ._lexical import adds_needed as adds_needed
from ._lexical import answer_type as answer_type
from ._lexical import aside_terms as aside_terms
from ._lexical import asked_entities as asked_entities
from ._lexical import bridge_entities as bridge_entities
from ._lexical import cited_support as cited_support
from ._lexical import coverage as coverage
from ._lexical import entities as entities
from ._lexical import evidence_texts as evidence_texts
from ._lexical import has_answer_type as has_answer_type
from ._lexical import has_content as has_content
from ._lexical import hop_levels as hop_levels
from ._lexical import is_bridge_question as is_bridge_question
from ._lexical import is_comparison as is_comparison
from ._lexical import is_direct as is_direct
from ._lexical import is_nested as is_nested
from ._lexical import key_terms as key_terms
from ._lexical import missing_hops as missing_hops
from ._lexical import missing_parts as missing_parts
from ._lexical import named_terms as named_terms
from ._lexical import relative_clause as relative_clause
from ._lexical import same_text as same_text
from ._lexical import sentences as sentences
from ._names import names as names
from ._sentences import LEVELS as LEVELS
from ._sentences import cuts as cuts
from ._sentences import split_sentences
from ._tokenize import CJK_CHAR as CJK_CHAR
from ._tokenize import TOKENIZER_SETTINGS as TOKENIZER_SETTINGS
from ._tokenize import has_cjk as has_cjk
from ._tokenize import tokenize

__all__ = ["tokenize", "split_sentences"]
