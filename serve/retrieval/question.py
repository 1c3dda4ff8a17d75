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
# Whole Korean words (after their particle or ending is taken off) that only ask.
KOREAN_FILLER = frozenset((
    "어떻게", "어떤", "어떠", "무엇", "무엇인", "무슨", "뭐", "뭔", "왜", "언제", "어디", "어느",
    "누구", "누가", "얼마", "얼마나", "방법", "이유", "경우", "알려주", "알려", "궁금", "하나",
    "해야", "하면", "할까", "되나", "있나", "있을까", "합니까", "주세요", "좋나", "해요",
    "것", "수", "때", "좀", "혹시", "가능", "하나요", "되나요", "있나요", "좋나요", "할까요",
    "좋을까요", "해야", "합니까", "주세요", "알려주세요", "되는", "있는", "하는", "없는",
))
# Verb endings of questions and requests, longest first: "미루려면" -> "미루". A one-syllable
# ending must leave two syllables, so short content words are never cut to one.
KOREAN_ENDINGS = (
    "하려면", "되려면", "으려면", "하나요", "되나요", "인가요", "한가요", "할까요", "을까요",
    "습니까", "합니까", "하세요", "해주세요", "주세요", "려면", "나요", "가요", "까요", "세요",
    "해요", "어요", "아요", "하는", "되는", "하지", "하고", "해서", "하게", "하면", "하기",
    "할", "한",
)
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
    """A Korean word without its question ending ("" when it only asks)."""
    if word in KOREAN_FILLER:
        return ""
    for ending in KOREAN_ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= (2 if len(ending) == 1 else 1):
            word = word[: -len(ending)]
            break
    bare = word
    for particle in KOREAN_PARTICLES:
        if word.endswith(particle) and len(word) - len(particle) >= 1:
            bare = word[: -len(particle)]
            break
    if bare in KOREAN_FILLER:
        return ""
    # The particle stays: the analyzer indexes the word with and without it, and the form
    # as written ("이미지를" against "이미지로") tells apart pages that share the noun.
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
        if tail in KOREAN_PARTICLES or tail in KOREAN_ENDINGS or len(tail) == 1:
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
