"""seqjit inside other frameworks, each imported only when asked for (``import seqjit`` imports none):

- :mod:`.ray`: batch inference over Ray Data (``pip install 'seqjit[ray]'``).
"""
