"""Tiny configs of every family the Jacobian and trajectory paths support, shared by tests:
d = 32, 3 layers, 4 heads (2 key/value heads where the family has GQA)."""

import transformers as T

D, LAYERS, HEADS, VOCAB = 32, 3, 4, 101

CONFIGS = {
    "gpt_neox": lambda: T.GPTNeoXConfig(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                        intermediate_size=64, vocab_size=VOCAB, rotary_pct=0.5),
    "gpt_neox_sequential": lambda: T.GPTNeoXConfig(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                                   intermediate_size=64, vocab_size=VOCAB, use_parallel_residual=False),
    "llama": lambda: T.LlamaConfig(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                   num_key_value_heads=2, intermediate_size=64, vocab_size=VOCAB,
                                   tie_word_embeddings=True),
    "olmo2": lambda: T.Olmo2Config(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                   num_key_value_heads=2, intermediate_size=64, vocab_size=VOCAB),
    "olmo3": lambda: T.Olmo3Config(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                   num_key_value_heads=2, intermediate_size=64, vocab_size=VOCAB, sliding_window=4,
                                   layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
    "bloom": lambda: T.BloomConfig(hidden_size=D, n_layer=LAYERS, n_head=HEADS, vocab_size=VOCAB),
    "gpt2": lambda: T.GPT2Config(n_embd=D, n_layer=LAYERS, n_head=HEADS, vocab_size=VOCAB, n_positions=64),
}


def tiny_model(family, *, seed=0, eager=True):
    """A seeded random causal LM of `family` in eval mode (eager attention by default)."""
    import torch

    torch.manual_seed(seed)
    config = CONFIGS[family]()
    if eager:
        config._attn_implementation = "eager"
    return T.AutoModelForCausalLM.from_config(config).eval()
