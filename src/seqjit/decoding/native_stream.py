"""Streaming one source natively: a :class:`seqjit.graph._native_vm.Stepper` runs each step (the step
program, the greedy or sampled token under the banned tokens, the token fed back, the recurrent state
written back) in one native call, and Python only wraps the token it returns in a :class:`StepToken`.

Used by :func:`seqjit.decoding.generate_stream` where :func:`seqjit.decoding.strategy.choose` picks a native path (greedy
search or sampling without a repetition penalty, n-gram ban or attention output) and the step plan
lowers (a ``target_prefix`` and the forced-token rules forced by the stepper: :func:`forced_row`); the tokens, log-probabilities and the sampling
stream (source row 0) are those of
:func:`seqjit.decoding.greedy.greedy_search`, which streams otherwise.
"""
from __future__ import annotations

import numpy as np

from seqjit.graph import _native_vm
from seqjit.kernels._threads import get_num_threads
from seqjit.kernels.sampling import philox

from . import prefix as prefixes
from .native_greedy import bind_step, sampling_args
from .results import StepToken


def native_stream(model, state, options, suppressed, prefix=None):
    """A generator of the :class:`StepToken` of the one row of the fresh ``state``; None when the step
    plan has no native form (nothing has run then). ``prefix``: the row's ``target_prefix``
    (:func:`seqjit.decoding.prefix.prefix_rows`, [1, P]) or None, forced by the stepper and yielded
    as the Python loop yields it (each token with log-probability 0)."""
    if state.batch != 1:
        raise ValueError(f"native_stream decodes one source, got a state of {state.batch} rows")
    bound = bind_step(model, state, np.full(1, model.decoder_start_id, np.int64))
    if bound is None:
        return None
    banned = np.array(sorted(set(int(t) for t in suppressed)), np.int64)
    if options.sampling:
        seed = philox.fresh_seed() if options.seed is None else philox.check_seed(options.seed)
        temperature, topk, topp = sampling_args(options)
    else:
        seed, temperature, topk, topp = 0, 1.0, 1, 1.0
    stepper = _native_vm.Stepper(bound.program, bound.copy_back, bound.logits, bound.prev, bound.step, banned, int(model.eos_id), int(options.min_length), int(options.max_length),
                                 get_num_threads(), 0, seed, temperature, topk, topp,
                                 forced_row(options, prefix))
    return _tokens(stepper, state)


def forced_row(options, prefix=None) -> np.ndarray | None:
    """The stepper's forced tokens (int64 [1, P], -1: free; None: none): the ``target_prefix`` row
    ``prefix`` ([1, P] or None), and the forced-token rules where the prefix does not reach, as the
    Python loop's processors apply them (``forced_bos_id`` at step 0, ``forced_eos_id`` at step
    max_length - 1, each with log-probability 0; the prefix last, over them). A forced token never
    ends the row before max_length (:func:`supports` declines a forced first token that is the end
    token)."""
    if not options.forces_tokens:
        return None if prefix is None else np.ascontiguousarray(prefix, np.int64)
    width = int(options.max_length)
    row = np.full((1, width), prefixes.NONE, np.int64)
    n = 0
    if prefix is not None:
        n = int(prefixes.lengths(prefix, 1)[0])
        row[0, :n] = prefix[0, :n]
    if options.forced_bos_id is not None and n == 0:
        row[0, 0] = options.forced_bos_id
    if options.forced_eos_id is not None and n < width:
        row[0, width - 1] = options.forced_eos_id
    return row


def _tokens(stepper, state):
    step = stepper.next
    t = 0
    while True:
        token, logp, last = step()
        state.step = t + 1
        yield StepToken(0, token, logp, t, last)
        if last:
            return
        t += 1
