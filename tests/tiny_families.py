"""Tiny configs of every family the Jacobian and trajectory paths support, shared by tests:
d = 32, 3 layers, 4 heads (2 key/value heads where the family has GQA); sliding windows of 4
tokens where the family has them, so that token-wise tests cross a window's edge."""

import transformers as T

D, LAYERS, HEADS, VOCAB = 32, 3, 4, 101

GEMMA3_TEXT = dict(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=2,
                   head_dim=8, intermediate_size=64, vocab_size=VOCAB, sliding_window=4, bos_token_id=0,
                   eos_token_id=1, pad_token_id=2, final_logit_softcapping=30.0, attn_logit_softcapping=50.0,
                   layer_types=["sliding_attention", "sliding_attention", "full_attention"])

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
    "mistral": lambda: T.MistralConfig(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                       num_key_value_heads=2, intermediate_size=64, vocab_size=VOCAB, sliding_window=4),
    "qwen2": lambda: T.Qwen2Config(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                   num_key_value_heads=2, intermediate_size=64, vocab_size=VOCAB),
    "qwen3": lambda: T.Qwen3Config(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                   num_key_value_heads=2, head_dim=16, intermediate_size=64, vocab_size=VOCAB),
    "phi3": lambda: T.Phi3Config(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                 num_key_value_heads=2, intermediate_size=64, vocab_size=VOCAB, pad_token_id=0,
                                 bos_token_id=1, eos_token_id=2),
    "phi": lambda: T.PhiConfig(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                               intermediate_size=64, vocab_size=VOCAB, qk_layernorm=True,
                               rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                "partial_rotary_factor": 0.5}),
    "exaone4": lambda: T.Exaone4Config(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                       num_key_value_heads=2, intermediate_size=64, vocab_size=VOCAB,
                                       sliding_window=4, bos_token_id=0, eos_token_id=1,
                                       layer_types=["sliding_attention", "sliding_attention", "full_attention"]),
    "gemma": lambda: T.GemmaConfig(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                   num_key_value_heads=2, head_dim=8, intermediate_size=64, vocab_size=VOCAB,
                                   bos_token_id=0, eos_token_id=1, pad_token_id=2),
    "gemma2": lambda: T.Gemma2Config(**{k: v for k, v in GEMMA3_TEXT.items() if k != "layer_types"},
                                     layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
    "gemma3_text": lambda: T.Gemma3TextConfig(**GEMMA3_TEXT),
    # The released Gemma 3 (4B and up): the text decoder inside a vision-language model.
    "gemma3": lambda: T.Gemma3Config(
        text_config=GEMMA3_TEXT, mm_tokens_per_image=4,
        vision_config=dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                           image_size=28, patch_size=14)),
    "gpt_neo": lambda: T.GPTNeoConfig(hidden_size=D, num_layers=LAYERS, num_heads=HEADS, vocab_size=VOCAB,
                                      max_position_embeddings=64, window_size=4, bos_token_id=0, eos_token_id=1,
                                      attention_types=[[["global", "local"], 1], [["global"], 1]]),
    # No adapter: the generic path (blocks found from the model, autograd Jacobians, standard weight names)
    "stablelm": lambda: T.StableLmConfig(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                         num_key_value_heads=2, intermediate_size=64, vocab_size=VOCAB,
                                         use_qkv_bias=True, bos_token_id=0, eos_token_id=1),
    "mpt": lambda: T.MptConfig(d_model=D, n_layers=LAYERS, n_heads=HEADS, vocab_size=VOCAB, max_seq_len=64),
    # Falcon's three attention layouts: grouped (40B/180B), multi-query (7B), per head (RW-1B, ALiBi)
    "falcon": lambda: T.FalconConfig(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                     vocab_size=VOCAB, new_decoder_architecture=True, num_kv_heads=2,
                                     bos_token_id=0, eos_token_id=1),
    "falcon_multi_query": lambda: T.FalconConfig(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                                 vocab_size=VOCAB, multi_query=True, parallel_attn=True,
                                                 bos_token_id=0, eos_token_id=1),
    "falcon_sequential": lambda: T.FalconConfig(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                                vocab_size=VOCAB, multi_query=False, parallel_attn=False,
                                                alibi=True, bias=True, bos_token_id=0, eos_token_id=1),
}


# Gemma 4 (E-series): per-layer inputs of width 8, two KV-shared layers with double-wide MLPs,
# global layers with 16-wide heads; the text variant also reads values through the key projection
# on its global layers (one KV head there). Kept apart from CONFIGS: the coupling stage and the
# closed form do not take it.
GEMMA4_TEXT = dict(hidden_size=D, num_hidden_layers=4, num_attention_heads=HEADS, num_key_value_heads=2, head_dim=8,
                   global_head_dim=16, intermediate_size=64, vocab_size=VOCAB, vocab_size_per_layer_input=VOCAB,
                   hidden_size_per_layer_input=8, sliding_window=4, num_kv_shared_layers=2, use_double_wide_mlp=True,
                   layer_types=["sliding_attention", "full_attention"] * 2, bos_token_id=0, eos_token_id=1,
                   pad_token_id=2)
GEMMA4 = {
    "gemma4_text": lambda: T.Gemma4TextConfig(**GEMMA4_TEXT, attention_k_eq_v=True, num_global_key_value_heads=1),
    # As released (E2B, E4B): the text decoder inside a multimodal model
    "gemma4": lambda: T.Gemma4Config(
        text_config=GEMMA4_TEXT, audio_config=None,
        vision_config=dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                           head_dim=8, global_head_dim=8)),
}


def tiny_model(family, *, seed=0, eager=True):
    """A seeded random causal LM of `family` in eval mode (eager attention by default)."""
    import torch

    torch.manual_seed(seed)
    config = {**CONFIGS, **GEMMA4}[family]()
    if eager:
        config._attn_implementation = "eager"
    return T.AutoModelForCausalLM.from_config(config).eval()
