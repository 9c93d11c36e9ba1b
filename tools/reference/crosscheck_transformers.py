# SPDX-License-Identifier: MIT
"""Cross-check of hf_decoders.py and the hf_* goldens against Hugging Face transformers' own modeling code.

transformers is not installed here: point --src at the `src` directory of a transformers source tree (e.g. one
unpacked to /tmp/hf/src; never inside this repository). A small import shim stands in for the packages the
modeling code does not need (huggingface_hub, safetensors, tokenizers, accelerate) and for torch._dynamo on torch
1.13. Each model is built from the golden's config.json in float64 eval mode with eager attention, loaded with the
golden's weights, and run on the prompt (one call) and then one token a call through past_key_values (DynamicCache;
HybridCache for Gemma 2), the way the goldens' generation rows are defined.

Variants re-derive the expected logits with hf_decoders.py under a changed config, for places where the tree's
version computes something else than current transformers (see tests/goldens/README.md).

Usage:
    /usr/bin/python3 tools/reference/crosscheck_transformers.py --src /tmp/hf/src
"""

import argparse
import copy
import importlib.abc
import importlib.machinery
import json
import os
import sys
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_decoders as hd  # noqa: E402

# --- import shim ------------------------------------------------------------------------------------------------

FAKE = ("huggingface_hub", "safetensors", "tokenizers", "accelerate")


class _Dummy(Exception):
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return None


class _P:
    def __call__(self, *a, **k):
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]
        return self

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())

    def __str__(self):
        return ""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self


_fn = _P()


class _FakeModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "__version__":
            return "0.25.0"
        if name.isupper():
            val = "/tmp/hf_cache_dummy"
        elif name[:1].isupper():
            val = type(name, (_Dummy,), {})
        else:
            val = _fn
        setattr(self, name, val)
        return val


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in FAKE:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _FakeModule(spec.name)
        m.__path__ = []
        m.__version__ = "0.25.0"
        return m

    def exec_module(self, module):
        pass


def install_shim():
    sys.meta_path.insert(0, _Finder())
    dv = types.ModuleType("transformers.dependency_versions_check")
    dv.dep_version_check = lambda *a, **k: None
    sys.modules["transformers.dependency_versions_check"] = dv
    if not hasattr(torch, "_dynamo"):
        torch._dynamo = types.SimpleNamespace(mark_static_address=lambda *a, **k: None, is_compiling=lambda: False)


# ----------------------------------------------------------------------------------------------------------------

# hf_phi3 with partial_rotary_factor 1.0 needs head_dim / 2 = 8 factors
PHI_FULL = {"type": "longrope", "short_factor": [1.0, 1.1, 1.2, 1.3, 1.7, 2.2, 2.6, 3.0],
            "long_factor": [1.5, 2.0, 2.5, 4.0, 7.0, 9.0, 11.0, 16.0]}


def import_transformers(src):
    install_shim()
    sys.path.insert(0, src)
    global transformers, DynamicCache, HybridCache, CLS
    import transformers
    from transformers.models.llama.modeling_llama import LlamaForCausalLM, LlamaConfig
    from transformers.models.mistral.modeling_mistral import MistralForCausalLM, MistralConfig
    from transformers.models.qwen2.modeling_qwen2 import Qwen2ForCausalLM, Qwen2Config
    from transformers.models.gemma2.modeling_gemma2 import Gemma2ForCausalLM, Gemma2Config
    from transformers.models.phi3.modeling_phi3 import Phi3ForCausalLM, Phi3Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2LMHeadModel, GPT2Config
    from transformers.cache_utils import DynamicCache, HybridCache
    CLS = {"llama": (LlamaConfig, LlamaForCausalLM), "mistral": (MistralConfig, MistralForCausalLM),
           "qwen2": (Qwen2Config, Qwen2ForCausalLM), "gemma2": (Gemma2Config, Gemma2ForCausalLM),
           "phi3": (Phi3Config, Phi3ForCausalLM), "gpt2": (GPT2Config, GPT2LMHeadModel)}


ROOT = os.path.join(HERE, "..", "..", "tests", "goldens")


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def hf_model(raw, weights):
    ccls, mcls = CLS[raw["model_type"]]
    cfg = ccls.from_dict({k: v for k, v in raw.items() if k not in ("transformers_version",)})
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    m = mcls(cfg).double().eval()
    sd = {k: torch.from_numpy(np.asarray(v, np.float64)) for k, v in weights.items()}
    missing, unexpected = m.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not k.endswith("inv_freq")
               and not (k == "lm_head.weight" and cfg.tie_word_embeddings)
               and not k.endswith(("attn.bias", "attn.masked_bias"))]
    assert not missing and not unexpected, (missing, unexpected)
    if cfg.tie_word_embeddings:
        m.tie_weights()
    return m


def hf_prompt_and_steps(m, raw, ids, P):
    mt = raw["model_type"]
    with torch.no_grad():
        if mt == "gemma2":
            cache = HybridCache(m.config, batch_size=1, max_cache_len=len(ids), dtype=torch.float64)
        elif mt == "gpt2":
            cache = None
        else:
            cache = DynamicCache()
        x = torch.tensor([ids[:P]])
        if mt == "gpt2":
            out = m(input_ids=x, use_cache=True)
        else:
            out = m(input_ids=x, past_key_values=cache, use_cache=True, cache_position=torch.arange(P),
                    attention_mask=torch.ones(1, P, dtype=torch.long))
        full = out.logits[0].numpy()
        rows = [full[-1]]
        pkv = out.past_key_values
        for t in range(P, len(ids)):
            kw = dict(input_ids=torch.tensor([[ids[t]]]), past_key_values=pkv, use_cache=True)
            if mt != "gpt2":
                kw.update(cache_position=torch.tensor([t]), attention_mask=torch.ones(1, t + 1, dtype=torch.long),
                          position_ids=torch.tensor([[t]]))
            o = m(**kw)
            rows.append(o.logits[0, -1].numpy())
            pkv = o.past_key_values
    return full, np.stack(rows)


def ours(raw, weights, ids, P, recompute=True):
    mm = hd.HFDecoder(raw, weights)
    g = hd.Generator(mm, recompute_longrope=recompute)
    rows = np.stack([g.prompt(ids[:P])] + [g.step(t) for t in ids[P:]])
    return mm.logits(ids[:P]), rows


def run(name, changes=None, label="", recompute=True):
    d = os.path.join(ROOT, "hf_" + name)
    raw = json.load(open(os.path.join(d, "config.json")))
    gen = json.load(open(os.path.join(d, "generation.json")))
    ids, P = gen["ids"], gen["prompt"]
    w = hd.load_weights(d)
    if changes:
        raw = copy.deepcopy(raw); raw.update(changes)
        ref_prompt, ref_rows = ours(raw, w, ids, P, recompute)
    else:
        ref_prompt = np.load(os.path.join(d, "logits.npy"))
        ref_rows = np.load(os.path.join(d, "generation_logits.npy"))
        if not recompute:
            _, ref_rows = ours(raw, w, ids, P, recompute)
    m = hf_model(raw, w)
    full, rows = hf_prompt_and_steps(m, raw, ids, P)
    print(f"{name:22s} {label:48s} prompt rel {rel(full, ref_prompt):.1e}   generation rel {rel(rows, ref_rows):.1e}"
          f"   (worst step {max(rel(r, q) for r, q in zip(rows, ref_rows)):.1e})", flush=True)

RUNS = [
    ("llama_mha", None, "", True), ("llama_gqa", None, "", True), ("llama3_rope_scaling", None, "", True),
    ("llama_linear_scaling", None, "", True), ("llama_dynamic", None, "", True), ("llama_yarn", None, "", True),
    ("llama_yarn", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0}},
     "variant: no original_max in rope_scaling", True),
    ("mistral_window", None, "", True), ("qwen2", None, "", True),
    ("qwen2", {"use_sliding_window": False}, "variant: use_sliding_window false", True),
    ("gemma2", None, "", True),
    ("phi3", None, "", True),
    ("phi3", {"partial_rotary_factor": 1.0, "rope_scaling": PHI_FULL}, "variant: partial 1.0, keys kept", False),
    ("phi3", {"partial_rotary_factor": 1.0, "sliding_window": None, "rope_scaling": PHI_FULL},
     "variant: partial 1.0, no window, keys kept", False),
    ("phi3", {"partial_rotary_factor": 1.0, "sliding_window": None, "rope_scaling": PHI_FULL},
     "variant: partial 1.0, no window, recomputed at switch", True),
    ("gpt2", None, "", True),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", required=True, help="the src directory of a transformers source tree")
    args = ap.parse_args()
    torch.set_num_threads(1)
    import_transformers(args.src)
    print("transformers", transformers.__version__)
    for name, changes, label, recompute in RUNS:
        try:
            run(name, changes, label, recompute)
        except Exception as e:  # a config this version rejects, or a model it lacks
            print(f"{name:22s} {label:48s} not run: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
