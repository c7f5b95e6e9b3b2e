"""The decoding done in a forked or spawned child by ``test_fork_safety.py`` (a plain module, so a
spawned child can import it by name: the tests run under ``--import-mode=importlib``)."""
import seqjit

#: loaded models by spec; the parent fills it before forking, so a forked child uses the parent's
#: model object (its executors, plans and pools), a spawned child loads its own
MODELS: dict = {}


def load(spec):
    """The model for ``spec``: ``("g2p", name)`` or ``("hf", path)``."""
    model = MODELS.get(spec)
    if model is None:
        kind, where = spec
        if kind == "g2p":
            from seqjit.g2p import G2P

            model = G2P(where).model
        else:
            model = seqjit.from_hf(where)
        MODELS[spec] = model
    return model


def decode(spec, sources, threads, max_length):
    """The ids ``generate`` gives for ``sources`` at ``threads`` intra-op threads."""
    seqjit.set_num_threads(threads)
    return [r.ids for r in load(spec).generate(sources, max_length=max_length)]
