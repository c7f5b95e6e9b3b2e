"""The Python decode loop: one loop for greedy search, sampling and beam search, the readable
specification the native and device loops are tested against.

Each step: the model's step on every running row (its previous token: the last of the chooser's
histories), the chooser's working scores (:meth:`prepare`: a float32 copy of the logits for greedy
and sampling, their log-softmax for beam search, as ``transformers``), the score processors
(:func:`seqjit.decoding.processors.process`: repetition penalty, n-gram ban, min_length, the
suppression rules, the forced tokens), then the chooser picks (:meth:`choose`) and says which rows
go on (:meth:`advance`), and the decoder state is reordered to them. Streaming is the loop yielding
each step's tokens (greedy and sampling; a ``callback`` returning True stops its source).

A chooser (:class:`seqjit.decoding.greedy.TokenChooser`: argmax or the Philox sampler, one
hypothesis per source; :class:`seqjit.decoding.beam.BeamChooser`: the beam step) provides:

- ``start(state)``: lay out the state's rows (beam search: K rows per source);
- ``history()``: int64 [rows, t + 1], each running row's tokens, the decoder start token first;
- ``prefixes()``: each running row's ``target_prefix`` (:func:`seqjit.decoding.prefix.prefix_rows`)
  or None (no row has one);
- ``prepare(logits, t)``: the step's working scores, or None where no processor can change the
  choice (greedy without scores: the argmax of the logits as they are);
- ``choose(scores, t, attention)``: pick; returns ``(sources, tokens, log-probs, done)`` for the
  stream (arrays over the running rows) or None (beam search does not stream);
- ``advance(done, t)``: None when decoding is over, else ``(rows, encoder)``: the state rows to keep,
  in order (None: every row, unmoved), and whether encoder rows move too;
- ``results()``: one :class:`~seqjit.decoding.results.GenerationResult` per source.
"""
from __future__ import annotations

from . import processors
from .results import StepToken


def decode_loop(model, state, options, chooser, *, suppressed=(), on_token=None, stream=False):
    """Decode the fresh ``state`` with ``chooser`` under ``options`` (a spec or checked options);
    a generator of :class:`StepToken` (only when ``stream``) whose value is the results."""
    ends, want_attention = options.end_ids(model.eos_id), options.return_attention
    eos = ends[0] if len(ends) == 1 else ends  # what the processors ban before min_length
    chooser.start(state)
    for t in range(options.max_length):
        history = chooser.history()
        out = model.step(state, history[:, -1], with_attention=want_attention, copy=False)
        logits, attention = out if want_attention else (out, None)
        scores = chooser.prepare(logits, t)
        if scores is not None:
            processors.process(scores, history, t, options, eos, suppressed, chooser.prefixes())
        picked = chooser.choose(scores, t, attention)
        done = None
        if picked is not None:
            sources, tokens, logp, done = picked
            if stream:
                for r in range(tokens.shape[0]):
                    token = StepToken(int(sources[r]), int(tokens[r]),
                                      float(logp[r]) if logp is not None else float("nan"), t, bool(done[r]))
                    if on_token is not None and on_token(token) is True:  # the callback stops this source
                        done[r] = token.is_last = True
                    yield token
        moved = chooser.advance(done, t)
        if moved is None:
            break
        rows, encoder = moved
        if rows is not None:
            state.reorder(rows, encoder=encoder)
    return chooser.results()
