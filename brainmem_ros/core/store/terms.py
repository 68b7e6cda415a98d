"""How rare each word is among the memories an agent can see, for lexical recall's choice of terms.

Lexical recall searches only words found in few of the caller's memories (its own and the shared
ones): common words are what embeddings already capture, and ranking their thousands of matches
would dominate the call. The counts are kept here, per owner, rather than asked of FTS5, whose
vocabulary table counts documents by walking each term's postings over every agent at once; per
owner, so that what is rare for one robot does not change because another stored a thousand notes.
"""
from __future__ import annotations

import itertools
import re
import threading
import unicodedata
from collections import Counter, defaultdict
from typing import Sequence

__all__ = ["fts_tokens", "TermCounts"]

_ASCII_TOKEN = re.compile(r"[a-z0-9]+")
_TOKEN = re.compile(r"[^\W_]+")


def fts_tokens(text: str) -> set[str]:
    """Tokens as FTS5's unicode61 tokenizer (remove_diacritics 2) makes them.

    Lower-case runs of letters and digits, accents removed.
    """
    text = text.lower()
    if text.isascii():
        return set(_ASCII_TOKEN.findall(text))
    folded = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return set(_TOKEN.findall(folded))


class TermCounts:
    """Per owner: how many memories contain each token, and how many memories there are."""

    def __init__(self, lock: threading.RLock):
        self._lock = lock
        self.df: dict[str, Counter] = defaultdict(Counter)
        self.owned: Counter = Counter()

    def count(self, texts: Sequence[tuple[str, str]], sign: int, memories: bool = True) -> None:
        """Add (``sign`` +1) or take away (-1) the tokens of (owner, text) pairs.

        ``memories``: each text is a whole memory come or gone, not an edit of one.
        """
        by_owner: dict[str, list[str]] = defaultdict(list)
        for owner, text in texts:
            by_owner[owner].append(text)
        with self._lock:
            for owner, owned in by_owner.items():
                counts = Counter(itertools.chain.from_iterable(map(fts_tokens, owned)))
                df = self.df[owner]
                if memories:
                    self.owned[owner] += sign * len(owned)
                if sign > 0:
                    df.update(counts)
                    continue
                df.subtract(counts)
                for token in counts:
                    if df[token] <= 0:
                        del df[token]
                if not df:
                    del self.df[owner]
                if self.owned.get(owner, 0) <= 0:
                    self.owned.pop(owner, None)

    def export(self) -> dict:
        """Return the counts as plain JSON-able data (for the store's RAM snapshot)."""
        with self._lock:
            return {"df": {owner: dict(df) for owner, df in self.df.items()},
                    "owned": dict(self.owned)}

    def restore(self, counts: dict) -> None:
        """Adopt counts from ``export``, replacing these."""
        with self._lock:
            self.df = defaultdict(Counter, {o: Counter(df) for o, df in counts["df"].items()})
            self.owned = Counter(counts["owned"])

    def rare(self, tokens: Sequence[str], owners: set[str], max_df: float) -> list[str]:
        """Return the tokens in at least one and at most ``max_df`` of the owners' memories."""
        with self._lock:
            limit = max(3, max_df * max(1, sum(self.owned.get(o, 0) for o in owners)))
            dfs = [self.df[o] for o in owners if o in self.df]
            return [t for t in tokens if 0 < sum(df.get(t, 0) for df in dfs) <= limit]
