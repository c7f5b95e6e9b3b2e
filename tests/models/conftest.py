"""Tiny random-weight BART, mBART, M2M100 and Pegasus models built by ``transformers`` from a config
(no download) and written with ``save_pretrained(safe_serialization=True)``."""
import pytest

FAMILIES = ("bart", "mbart", "m2m_100", "pegasus")
SIZES = dict(vocab_size=96, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=48, max_position_embeddings=64)


def _classes(family):
    import transformers

    return {"bart": (transformers.BartConfig, transformers.BartForConditionalGeneration),
            "mbart": (transformers.MBartConfig, transformers.MBartForConditionalGeneration),
            "m2m_100": (transformers.M2M100Config, transformers.M2M100ForConditionalGeneration),
            "pegasus": (transformers.PegasusConfig, transformers.PegasusForConditionalGeneration)}[family]


def tiny_hf(family: str, path, seed: int = 0, generation: dict | None = None, **overrides):
    """A seeded ``transformers`` model of ``family`` saved to ``path``; weights drawn wide enough that
    the best next tokens are far apart (with the default init the logits nearly tie). ``generation``:
    values set on its generation config before saving (e.g. ``forced_bos_token_id``)."""
    import torch

    config_class, model_class = _classes(family)
    torch.manual_seed(seed)
    model = model_class(config_class(**{**SIZES, **overrides})).eval()
    sinusoidal = family in ("m2m_100", "pegasus")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name and sinusoidal:
                continue
            if "layer_norm" in name or "layernorm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p)) if name.endswith("weight") else p.normal_(0, 0.1)
            else:
                p.normal_(0, 0.25)
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.normal_(0, 0.5)
    for key, value in (generation or {}).items():
        setattr(model.generation_config, key, value)
    model.save_pretrained(path, safe_serialization=True)
    return model


@pytest.fixture(scope="session")
def hf_family(tmp_path_factory):
    """``hf_family(family)`` -> (transformers model, seqjit model, directory), built once per family."""
    import seqjit

    cache = {}

    def get(family):
        if family not in cache:
            path = tmp_path_factory.mktemp(family)
            hf = tiny_hf(family, path)
            cache[family] = (hf, seqjit.from_hf(path), path)
        return cache[family]

    return get
