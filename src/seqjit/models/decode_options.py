"""The decoding options: one checked record for greedy, beam search and sampling, declared once.

Each option is one field of :class:`DecodingOptions` with its default and its help
(:func:`option`); the signatures and docstrings of ``generate`` and ``generate_stream`` (the
functions of :mod:`seqjit.decoding` and the methods of :class:`~seqjit.models.base.Seq2SeqModel`)
are generated from those fields (:func:`with_options`), so an option is written in one place (plus
the kernel that applies it). In the models layer because the model's methods take them; a leaf
(it imports nothing of seqjit but the contract).
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import numbers

import numpy as np

from .contract import DEFAULT_MAX_LENGTH

#: the longest output any model may be asked for: a larger ``max_length`` is refused before anything
#: is allocated (decoding keeps per-token buffers of that length; an RNN has no position limit)
MAX_LENGTH_LIMIT = 1 << 16


def option(default, help: str):
    """A :class:`DecodingOptions` field: its default and what it does (rendered into the docstrings)."""
    return dataclasses.field(default=default, metadata={"help": help})


#: the suppression options, whose None means "the model's own" (resolved by decoding.api.resolve_rules)
SUPPRESSION_OPTIONS = ("suppress_tokens", "begin_suppress_tokens", "bad_words_ids", "suppress_pad_token")


@dataclasses.dataclass(frozen=True)
class DecodingOptions:
    """What :func:`seqjit.decoding.generate` does; every field is checked by :meth:`validate`
    (its help: :func:`describe_options`)."""

    max_length: int = option(256,
        f"at most this many generated tokens, the end token included; at most the model's positions (a "
        f"Transformer's max_positions; the default is lowered to it) and {MAX_LENGTH_LIMIT}")
    min_length: int = option(0,
        'the end token is forbidden while fewer tokens than this have been generated')
    beam_size: int = option(1,
        'beam width; 1 decodes greedily (or samples)')
    num_hypotheses: int = option(1,
        'the n-best kept per source (<= beam_size)')
    num_beam_groups: int = option(1,
        "group (diverse) beam search, as transformers 4.x's group_beam_search: the beam_size beams split into "
        "this many groups of beam_size / num_beam_groups (it must divide beam_size), each a beam search of its "
        "own whose step sees the tokens the earlier groups chose at that step (diversity_penalty); the "
        "num_hypotheses best of all groups' hypotheses are returned; 1: plain beam search")
    diversity_penalty: float = option(0.0,
        "with num_beam_groups > 1: at each step, a group's log-probability of a token is lowered by this times "
        "the number of beams of the earlier groups that chose it at that step (transformers' Hamming "
        "diversity); finite, >= 0")
    length_penalty: float = option(1.0,
        'beam scores are sum(log p) / length ** length_penalty (as transformers); within the range where '
        'float32 scores stay finite (about [-1.49, 12.5] at max_length 256)')
    repetition_penalty: float = option(1.0,
        'scores of tokens already in the hypothesis are divided by it (negative scores multiplied), as '
        "transformers' RepetitionPenaltyLogitsProcessor; finite, > 0")
    no_repeat_ngram_size: int = option(0,
        'an n-gram never occurs twice in a hypothesis (start token included); 0: off')
    sampling_topk: int = option(1,
        '1 is greedy (argmax); 0 samples from the whole distribution; k > 1 samples among the k best')
    sampling_topp: float = option(1.0,
        'nucleus sampling: sample among the most likely tokens whose probabilities sum to topp; in (0, 1]')
    sampling_temperature: float = option(1.0,
        'logits are divided by it before sampling; finite, > 0')
    seed: int | None = option(None,
        "seeds sampling, an integer in [0, 2**64): each source's tokens are drawn from the Philox stream "
        'of (seed, its index in sources, step), the same in every batch and decode loop; None: a fresh '
        'seed per call')
    forced_bos_id: int | None = option(None,
        "the first generated token (the target language of mBART-50, M2M100 or NLLB); None: the model's "
        "own (its config's forced_bos_id, if any)")
    forced_eos_id: int | None = option(None,
        "the token forced at the last allowed step (max_length); None: the model's own (its generation "
        "config's forced_eos_token_id: BART, Pegasus and Marian force their end token)")
    # suppression rules (transformers' generation_config names; None: the model's own)
    suppress_tokens: tuple | None = option(None,
        "token ids never generated (transformers' suppress_tokens); None: the model's own (its config's, "
        'read from generation_config.json at conversion), () none')
    begin_suppress_tokens: tuple | None = option(None,
        'token ids banned at the first generated step only (after a forced first token: at the second, as'
        " transformers); None: the model's own")
    bad_words_ids: tuple | None = option(None,
        "token sequences never generated: a one-token entry is banned everywhere, a longer one's last "
        "token is banned right after its prefix (transformers' NoBadWordsLogitsProcessor; an entry that "
        "is just the end token is ignored, as there); None: the model's own")
    suppress_pad_token: bool | None = option(None,
        "ban the padding token (seqjit's default, as transformers does for Marian); False lets it be "
        "generated (as OpenNMT-py and JoeyNMT decode); None: the model's own (its config's, else True)")
    end_token: int | tuple | None = option(None,
        "the token id (or a list of ids) that ends a hypothesis, any of them (CTranslate2's end_token, "
        "transformers' eos_token_id list); None: the model's own end token")
    target_prefix: tuple | None = option(None,
        "per source, the first target tokens (a list of ids, or None / [] for none): forced after the decoder "
        "start token, then decoding goes on freely (CTranslate2's target_prefix); the hypotheses begin with "
        "them, their log-probabilities are not in the scores, and max_length and min_length count them; one "
        "entry per source, each at most max_length ids")
    return_alternatives: bool = option(False,
        "the num_hypotheses best tokens at the first position after the target_prefix (none: the first "
        "position), each continued by the search (CTranslate2's return_alternatives); num_hypotheses may "
        "exceed beam_size")
    min_alternative_expansion_prob: float = option(0.0,
        "with return_alternatives: an alternative whose probability at the first free position is below "
        "this is dropped (CTranslate2's min_alternative_expansion_prob); in [0, 1]")
    return_end_token: bool = option(False,
        "keep the end token at the end of each hypothesis that has one (CTranslate2's return_end_token)")
    max_input_length: int = option(0,
        "a source longer than this many tokens is refused (SourceTooLong, naming it), or cut to its first "
        "max_input_length tokens with truncate_input (the result's truncated says so); 0: no limit")
    truncate_input: bool = option(False,
        "cut sources longer than max_input_length instead of refusing them (CTranslate2 truncates)")
    return_scores: bool = option(False,
        'give each hypothesis its score (sum of token log-probabilities, length-penalised in beam search)')
    return_attention: bool = option(False,
        'give each hypothesis its attention over the source, one row per generated token')

    def __post_init__(self):
        # lists as tuples (the options are hashed); checked by validate
        for name in ("suppress_tokens", "begin_suppress_tokens", "end_token"):
            value = getattr(self, name)
            if isinstance(value, (list, np.ndarray)):
                object.__setattr__(self, name, tuple(value.tolist() if isinstance(value, np.ndarray) else value))
        words = self.bad_words_ids
        if isinstance(words, (list, tuple)) and all(isinstance(w, (list, tuple)) for w in words):
            object.__setattr__(self, "bad_words_ids", tuple(tuple(w) for w in words))
        prefix = self.target_prefix
        if isinstance(prefix, (list, tuple)):  # entries as id tuples (None: none); others named by validate
            object.__setattr__(self, "target_prefix", tuple(
                () if p is None else tuple(p.tolist()) if isinstance(p, np.ndarray) and p.ndim == 1
                else tuple(p) if isinstance(p, (list, tuple)) else p for p in prefix))

    @property
    def step_rules(self) -> bool:
        """Whether a suppression rule depends on the step or the history (``begin_suppress_tokens``, a
        ``bad_words_ids`` entry of several tokens): the score processors of the Python loops apply
        those; the static bans (``suppress_tokens``, one-token bad words, the pad token) every loop."""
        return bool(self.begin_suppress_tokens) or any(len(w) > 1 for w in self.bad_words_ids or ())

    def end_ids(self, model_eos: int) -> tuple:
        """The token ids that end a hypothesis: ``end_token`` (one id or several), else ``model_eos``."""
        end = self.end_token
        if end is None:
            return (int(model_eos),)
        return tuple(int(t) for t in end) if isinstance(end, tuple) else (int(end),)

    @property
    def sampling(self) -> bool:
        return self.sampling_topk != 1

    @property
    def forces_tokens(self) -> bool:
        """Whether a forced-token rule applies (the native greedy loop does not apply them)."""
        return self.forced_bos_id is not None or self.forced_eos_id is not None

    def validate(self) -> "DecodingOptions":
        """Check every field; a ValueError names the option and says what is wrong. Returns self."""
        def integer(name, low):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")

        def finite(name):
            value = getattr(self, name)
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
            return value

        integer("max_length", 1)
        integer("min_length", 0)
        integer("beam_size", 1)
        integer("num_hypotheses", 1)
        integer("no_repeat_ngram_size", 0)
        integer("max_input_length", 0)
        integer("sampling_topk", 0)
        if self.max_length > MAX_LENGTH_LIMIT:
            raise ValueError(f"max_length {self.max_length} is more than seqjit decodes ({MAX_LENGTH_LIMIT} tokens)")
        if self.min_length > self.max_length:
            raise ValueError(f"min_length ({self.min_length}) must not exceed max_length ({self.max_length})")
        if self.num_hypotheses > self.beam_size and not self.return_alternatives:
            raise ValueError(f"num_hypotheses ({self.num_hypotheses}) must not exceed beam_size ({self.beam_size})")
        if self.beam_size > 1 and self.sampling:
            raise ValueError("sampling_topk != 1 (sampling) cannot be combined with beam_size > 1")
        self._validate_groups()
        for name in ("repetition_penalty", "sampling_temperature"):
            if not finite(name) > 0:
                raise ValueError(f"{name} must be a positive number, got {getattr(self, name)!r}")
        finite("length_penalty")
        if self.beam_size > 1:
            low, high = length_penalty_range(self.max_length)
            if not low <= self.length_penalty <= high:
                raise ValueError(f"length_penalty must lie in [{low:.3g}, {high:.3g}] with max_length {self.max_length} "
                                 "(beam scores sum(log p) / length ** length_penalty must stay finite in float32 and "
                                 f"above the beam search's -1e9 floor), got {self.length_penalty!r}")
        if not 0 <= finite("min_alternative_expansion_prob") <= 1:
            raise ValueError(f"min_alternative_expansion_prob must be in [0, 1], got {self.min_alternative_expansion_prob!r}")
        if not 0 < finite("sampling_topp") <= 1:
            raise ValueError(f"sampling_topp must be in (0, 1], got {self.sampling_topp!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)
                                      or not 0 <= self.seed < 1 << 64):
            raise ValueError(f"seed must be an integer in [0, 2**64) or None, got {self.seed!r}")
        for name in ("return_scores", "return_attention", "return_end_token", "truncate_input", "return_alternatives"):
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):  # 'no' and 'false' are truthy
                raise ValueError(f"{name} must be True or False, got {str(value)[:40]!r} ({type(value).__name__})")
        for name in ("forced_bos_id", "forced_eos_id"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ValueError(f"{name} must be a non-negative integer or None, got {value!r}")
        self._validate_suppression()
        self._validate_prefix()
        end = self.end_token
        if end is not None and not (isinstance(end, (int, np.integer)) and not isinstance(end, bool) and end >= 0) \
                and not (isinstance(end, tuple) and end and all(isinstance(t, (int, np.integer))
                                                                and not isinstance(t, bool) and t >= 0 for t in end)):
            raise ValueError(f"end_token must be a non-negative token id, a non-empty list of them or None, "
                             f"got {str(end)[:60]}")
        return self

    def _validate_prefix(self) -> None:
        """``target_prefix``: None or one entry per source, each a list of non-negative int ids (None or
        [] for none), at most ``max_length`` long (the count of sources and the vocabulary: checked by
        :func:`seqjit.decoding.prefix.checked_prefix`)."""
        prefix = self.target_prefix
        if prefix is None:
            return
        if not isinstance(prefix, tuple):
            raise TypeError(f"target_prefix must be a list with one token-id list (or None) per source, got "
                            f"{type(prefix).__name__}")
        for i, entry in enumerate(prefix):
            if not isinstance(entry, tuple):
                raise TypeError(f"target_prefix[{i}] must be a list of token ids or None, got {type(entry).__name__}")
            for token in entry:
                if not isinstance(token, (int, np.integer)) or isinstance(token, (bool, np.bool_)):
                    raise TypeError(f"target_prefix[{i}] must hold integer token ids, got {str(token)[:40]!r} "
                                    f"({type(token).__name__})")
                if token < 0:
                    raise ValueError(f"target_prefix[{i}] holds token id {token}: token ids are non-negative")
            if len(entry) > self.max_length:
                raise ValueError(f"target_prefix[{i}] has {len(entry)} tokens, more than max_length {self.max_length}")

    def _validate_groups(self) -> None:
        groups = self.num_beam_groups
        if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
            raise ValueError(f"num_beam_groups must be an integer >= 1, got {groups!r}")
        penalty = self.diversity_penalty
        if not isinstance(penalty, numbers.Real) or isinstance(penalty, bool) or not math.isfinite(penalty) \
                or penalty < 0:
            raise ValueError(f"diversity_penalty must be a finite number >= 0, got {penalty!r}")
        if groups == 1:
            if penalty:
                raise ValueError(f"diversity_penalty ({penalty!r}) needs num_beam_groups > 1 (with one group no "
                                 "earlier group chose a token)")
            return
        if self.sampling:
            raise ValueError("num_beam_groups > 1 (group beam search) cannot be combined with sampling "
                             "(sampling_topk != 1), as transformers refuses do_sample with groups")
        if self.return_attention:
            raise ValueError("return_attention is not supported with num_beam_groups > 1 (group beam search)")
        if self.beam_size % groups:
            raise ValueError(f"num_beam_groups ({groups}) must divide beam_size ({self.beam_size})")

    @property
    def prefixed(self) -> bool:
        """Whether some source has a ``target_prefix`` (the native and device loops do not force one)."""
        return self.target_prefix is not None and any(self.target_prefix)

    def _validate_suppression(self) -> None:
        def ids(name, value):
            if not isinstance(value, tuple) or not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool)
                                                         and t >= 0 for t in value):
                raise ValueError(f"{name} must be a list of non-negative token ids or None, got {str(value)[:60]}")

        for name in ("suppress_tokens", "begin_suppress_tokens"):
            if getattr(self, name) is not None:
                ids(name, getattr(self, name))
        if self.bad_words_ids is not None:
            if not isinstance(self.bad_words_ids, tuple):
                raise ValueError(f"bad_words_ids must be a list of token-id lists or None, got {str(self.bad_words_ids)[:60]}")
            for k, word in enumerate(self.bad_words_ids):
                ids(f"bad_words_ids[{k}]", word)
                if not word:
                    raise ValueError(f"bad_words_ids[{k}] is empty")
        if self.suppress_pad_token is not None and not isinstance(self.suppress_pad_token, (bool, np.bool_)):
            raise ValueError(f"suppress_pad_token must be True, False or None, got {str(self.suppress_pad_token)[:40]!r}")


#: the beam search's score of an impossible hypothesis (-1e9): a length-penalised score must stay
#: above it, with a margin of 10
SCORE_FLOOR = 1e8
#: the largest -log p of one token that the bound assumes (float32 logits of a sane model)
MAX_TOKEN_NLL = 100.0
#: the largest divisor ``length ** length_penalty``: finite in float32, and a score divided by it
#: stays above float32's smallest normal number
MAX_DIVISOR = 1e30


def length_penalty_range(max_length: int) -> tuple:
    """``(low, high)``: the length penalties for which every beam score ``sum(log p) / length **
    length_penalty`` (length <= ``max_length``) is a finite float32 above the beam's floor: a
    larger one overflows the divisor (scores all 0, the ranking lost), a more negative one pushes
    scores past -1e9, where they pass for impossible hypotheses."""
    if max_length < 2:
        return -math.inf, math.inf
    log_length = math.log(max_length)
    worst_sum = max_length * MAX_TOKEN_NLL
    return -max(0.0, math.log(SCORE_FLOOR / worst_sum) / log_length), math.log(MAX_DIVISOR) / log_length


def option_help(name: str) -> str:
    """What option ``name`` does, in words."""
    return FIELDS[name].metadata["help"]


#: option name -> its dataclass field, in declaration order
FIELDS = {f.name: f for f in dataclasses.fields(DecodingOptions)}


def describe_options(indent: str = "    ") -> str:
    """Every decoding option with its default and what it does, one per line (for docstrings)."""
    return "\n".join(f"{indent}{f.name}={f.default!r}: {f.metadata['help']}" for f in FIELDS.values())


def option_parameters() -> list:
    """The options as keyword-only :class:`inspect.Parameter` objects, each with its default (``max_length``:
    :data:`~seqjit.models.contract.DEFAULT_MAX_LENGTH`, so that an explicit 256 is told apart) and type."""
    return [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=f.type,
                              default=DEFAULT_MAX_LENGTH if f.name == "max_length" else f.default)
            for f in FIELDS.values()]


def with_options(func):
    """``func`` (``def f(first, second, *, <call arguments>, **options)``) with the signature that
    :mod:`inspect` (and so an IDE's help) shows: its own parameters, then every option as a keyword
    parameter with its default, then ``**unknown`` (any other keyword is refused by name at the call);
    and its docstring followed by every option's help (:func:`describe_options`)."""
    own = list(inspect.signature(func).parameters.values())
    unknown = inspect.Parameter("unknown", inspect.Parameter.VAR_KEYWORD)
    func.__signature__ = inspect.Signature(own[:-1] + option_parameters() + [unknown],
                                           return_annotation=inspect.signature(func).return_annotation)
    func.__doc__ = (func.__doc__ or "").rstrip() + "\n\n    Decoding options (keyword arguments, with defaults):\n\n" \
        + describe_options("    - ") + "\n"
    return func
