"""The content of a natural question: what a query says once its question and filler words go.

"How do I publish my notes as a website?" asks about publishing notes as a website; "how",
"do", "I" and "my" occur on every page that explains anything, so they must not decide which
page ranks first. Korean questions carry the same words as endings and particles
("만드나요", "미루려면", "state를") and as whole words ("어떻게", "무엇인가요").

Only queries are rewritten: pages are indexed as before, so a filler word on a page still
matches a query that has nothing else to go on (a query made only of filler words keeps them).
"""

from __future__ import annotations

import re

from serve.retrieval import korean
from serve.retrieval.analyzer import analyze

# Interrogatives, auxiliaries, pronouns and politeness words that questions are built from.
# Words that name things ("difference", "page", "file", "use") are content, not filler.
ENGLISH_FILLER = frozenset((
    "how", "what", "which", "who", "whom", "whose", "why", "when", "where", "whether",
    "do", "does", "did", "can", "could", "should", "would", "shall", "may", "might", "must",
    "am", "been", "being", "has", "have", "had", "i", "me", "my", "mine", "myself", "we",
    "us", "our", "ours", "you", "your", "yours", "he", "him", "his", "she", "her", "its",
    "them", "those", "here", "some", "any", "anything", "something", "someone", "way",
    "please", "tell", "explain", "want", "need", "know", "possible", "there", "own",
    # Prepositions, quantifiers and light verbs the analyzer keeps for pages: in a question
    # they frame the content words ("results by the folder they come from").
    "from", "over", "about", "onto", "than", "also", "just", "one", "another", "other",
    "each", "every", "so", "very", "really", "say", "come", "comes", "like",
    "several", "many", "much", "few", "various", "lot", "lots",
))
# "which page …", "what is the name of …": a page is what every answer is.
ENGLISH_FILLER_AFTER = {"which": frozenset(("page", "note", "doc", "document")),
                        "what": frozenset(("page", "note", "doc", "document"))}
# Korean asks with stems and nouns, whatever their endings ("어떻게", "되나요", "싶은데",
# "방법이"): a word whose stems (korean.py) are all among these only asks.
KOREAN_ASKING = frozenset((
    "어떻", "어떠", "어떤", "무엇", "뭐", "뭔", "무슨", "왜", "언제", "어디", "어느", "누구",
    "누가", "얼마", "방법", "이유", "경우", "알", "알리", "궁금", "하나", "하", "되", "있", "싶",
    "주", "좋", "것", "수", "때", "좀", "혹시", "가능", "나", "어", "가요", "원",
))
# Asking words mecab-ko-dic reads as nouns ("싶어요" and "해요" are titles in it; "가요",
# songs, above, is "뭔가요" read so).
KOREAN_MISREAD = frozenset(("해요", "싶어요", "주세요"))
# Particles after a noun, longest first ("state를" -> "state", "작업을" -> "작업").
KOREAN_PARTICLES = (
    "에서는", "으로는", "이라는", "에서", "으로", "에게", "까지", "부터", "처럼", "보다", "이란",
    "라는", "이나", "와", "과", "은", "는", "이", "가", "을", "를", "의", "에", "로", "도", "만", "란",
)
TOKEN_RE = re.compile(r"\S+")
HANGUL_TAIL_RE = re.compile(r"^(?P<head>.*?[^\uac00-\ud7a3])(?P<tail>[\uac00-\ud7a3]{1,3})$")
HANGUL_RE = re.compile(r"^[\uac00-\ud7a3]+$")
EDGE_PUNCT = "?!.,;:()[]{}\"'“”‘’「」『』？！。、"


def _strip_hangul(word: str) -> str:
    """A Korean word as written, or "" when it only asks. The word keeps its particle and
    ending: the analyzer indexes it with and without them, and the form as written
    ("이미지를" against "이미지로") tells apart pages that share the noun."""
    stems = korean.stems(word)
    if word in KOREAN_MISREAD or (stems and all(stem in KOREAN_ASKING for stem in stems)):
        return ""
    return word


def _content_token(token: str, previous: str) -> str:
    """One whitespace-separated token of the question, reduced to its content ("" if none)."""
    core = token.strip(EDGE_PUNCT)
    if not core:
        return ""
    lower = core.lower()
    if lower in ENGLISH_FILLER or lower in ENGLISH_FILLER_AFTER.get(previous, ()):
        return ""
    if HANGUL_RE.match(core):
        return _strip_hangul(core)
    mixed = HANGUL_TAIL_RE.match(core)
    if mixed and not HANGUL_RE.match(mixed["head"][-1]):
        # A Latin word or identifier with a Korean particle on it: "useEffect와", "state를".
        tail = mixed["tail"]
        if tail in KOREAN_PARTICLES or len(tail) == 1 or not _strip_hangul(tail):
            return mixed["head"]
    return core


def content_text(query: str) -> str:
    """The query with its question and filler words removed (token by token)."""
    kept: list[str] = []
    previous = ""
    for token in TOKEN_RE.findall(query):
        word = _content_token(token, previous)
        previous = token.strip(EDGE_PUNCT).lower()
        if word:
            kept.append(word)
    return " ".join(kept)


def question_terms(query: str) -> list[str]:
    """The analysed terms a lexical search runs on, in order with repeats: those of the
    question's content, or every term when the question has no content words at all."""
    terms = [term for word in content_text(query).split() for term in analyze(word)]
    return terms or analyze(query)


def asked_terms(query: str) -> frozenset[str]:
    """Every term of the question, filler words included: a page whose whole name is among
    them is the page the question names ("What is DXF?")."""
    return frozenset(analyze(query))
