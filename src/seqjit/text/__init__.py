"""Text in, text out around a model: what the file commands (``seqjit translate``, ``seqjit g2p``) and
the Ray integration (:mod:`seqjit.integrations.ray`) share, so neither imports the other.

- :mod:`.batching`: records read line by line, batched by tokens, results streamed in input order;
- :mod:`.lines`: the line rules (what makes a line of ids, text or a word usable), and message quoting;
- :mod:`.translation`: a translation model directory's model (seqjit or Hugging Face), its text
  codec (SentencePiece files, or a Hugging Face ``tokenizer.json``: :mod:`.hf_tokenizer`) and the
  forced first token of a target language.
"""
