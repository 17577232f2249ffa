"""llamacpp_util.py - open a model with llama-cpp-python the way every oracle script does.

One difference from llama-cpp-python's defaults, and why: llama.cpp's "extra
buffer types" (weight repacking; on this Xeon the AMX backend) are turned off.
With them, a batch of more than one token on a Q4_0/Q8_0/Q4_1 model dies with
SIGILL here (the CPU reports amx_tile, but the AMX tile state is not usable in
this VM), while single-token decode works - so prompts crash and decode does
not. Without them llama.cpp uses its plain CPU kernels (AVX-512/AVX2 vec_dot),
the same for every batch size. The Llama class has no argument for it, so the
default model parameters are patched while the model loads.
"""
import llama_cpp
import llama_cpp.llama_cpp as _lib

_default_params = _lib.llama_model_default_params


def _params_without_extra_bufts():
    p = _default_params()
    p.use_extra_bufts = False
    return p


def open_llama(path, **kw):
    """llama_cpp.Llama(model_path=path, **kw) with extra buffer types off."""
    _lib.llama_model_default_params = _params_without_extra_bufts
    try:
        return llama_cpp.Llama(model_path=path, **kw)
    finally:
        _lib.llama_model_default_params = _default_params


def settings(**kw):
    """What goldens record about the llama.cpp run."""
    d = {"llama_cpp_python": llama_cpp.__version__, "use_extra_bufts": False}
    d.update(kw)
    return d
