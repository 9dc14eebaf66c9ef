"""Data: the offline corpus and tokenizer, the texts of the dynamics stages, the prompts of the coupling
stage, MNIST for the toy ablations.
"""
