# SPDX-License-Identifier: MIT
"""Tern: run .tern models from Python (libtern's C API through pybind11).

    import tern
    model = tern.Model("kjv-llama.tern")
    session = tern.Session(model, threads=2)
    logits = session.forward(model.tokenize("And God said"))   # numpy float32 [n, vocab]
    for piece in tern.generate(session, "And God said", max_new_tokens=40, sampler=tern.Sampler(temperature=0)):
        print(piece, end="")

Errors from the library raise tern.Error (str(e): the library's message; e.status: a tern.Status). docs/python.md
describes every class.
"""

from ._tern import Error, Generator, Model, Sampler, Session, Status, Stream, version

__all__ = ["Error", "Generator", "Model", "Sampler", "Session", "Status", "Stream", "generate", "version"]
__version__ = version


def generate(session, prompt, max_new_tokens=128, sampler=None, *, context_policy="slide", stop_at_end=True,
             add_special=True):
    """Starts a generation in session from prompt and returns its text iterator (a tern.Stream of str pieces).

    prompt: text (str or bytes, through the model's tokenizer; add_special puts the tokenizer's own start ids first,
    as tern-run --prompt does) or a sequence of token ids. An empty text starts from the model's BOS id, or its EOS id
    where it has no BOS. sampler: a tern.Sampler (default: tern.Sampler(), temperature 1, seed 0). The iterator's
    .tokens counts the tokens sampled and .stop_reason says why it ended ('length', 'end', 'context_full').
    """
    model = session.model
    if isinstance(prompt, (str, bytes)):
        ids = model.tokenize(prompt, add_special=add_special)
    else:
        ids = list(prompt)
    if not ids:
        specials = model.special_tokens
        start = specials["bos"] if specials["bos"] is not None else specials["eos"]
        if start is None:
            raise ValueError("an empty prompt needs a model with a BOS or EOS token; give token ids instead")
        ids = [start]
    generator = Generator(session, context_policy=context_policy)
    generator.prompt(ids)
    return generator.text(sampler if sampler is not None else Sampler(), max_new_tokens, stop_at_end=stop_at_end)
