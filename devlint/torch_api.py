"""PyTorch's vocabulary, each set defined once: the names devlint knows
(factories, wrappers, layers with weights, containers, loaders, losses that
take CPU targets) and the spellings that name the same object.

Every fact provider and rule reads these sets from here; a name PyTorch adds
or renames is changed in one place.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, Optional


# Spellings that name the same object; resolved names are normalised to the
# value so rules compare against one spelling.
CANONICAL_NAMES: Dict[str, str] = {
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.modules.module.Module": "torch.nn.Module",
    "torch.nn.modules.Module": "torch.nn.Module",
    "torch.nn.modules.container.ModuleList": "torch.nn.ModuleList",
    "torch.nn.modules.container.ModuleDict": "torch.nn.ModuleDict",
    "torch.nn.modules.container.Sequential": "torch.nn.Sequential",
    "torch.nn.parameter.Parameter": "torch.nn.Parameter",
    "torch.nn.parameter.Buffer": "torch.nn.Buffer",
}


DATA_PARALLEL = "torch.nn.DataParallel"


DISTRIBUTED_DATA_PARALLEL = "torch.nn.parallel.DistributedDataParallel"


WRAPPERS = frozenset({DATA_PARALLEL, DISTRIBUTED_DATA_PARALLEL})


#: torch functions that create a tensor and take ``device=``.
TENSOR_FACTORIES = frozenset(
    {
        "arange", "range", "zeros", "ones", "empty", "full", "rand", "randn",
        "randint", "randperm", "eye", "linspace", "logspace", "tensor",
        "as_tensor", "tril_indices", "triu_indices", "empty_strided",
        "normal", "bartlett_window", "blackman_window", "hamming_window",
        "hann_window", "kaiser_window", "scalar_tensor", "sparse_coo_tensor",
        "complex", "polar",
    }
)


#: tensor methods that fill their tensor in place with random draws and take
#: ``generator=``. A generator draws only into tensors on its own device
#: (``torch.Generator()`` is a CPU one: a CUDA tensor raises "Expected a
#: 'cuda' device type for generator"), so a tensor drawn with a CPU generator,
#: by these or by a factory given ``generator=``, is on the CPU by design.
RANDOM_FILL_METHODS = frozenset(
    {"uniform_", "normal_", "random_", "bernoulli_", "exponential_", "cauchy_", "log_normal_", "geometric_"}
)


#: factories whose device is not given by ``device=`` but by their input.
_NOT_FACTORIES = frozenset({"complex", "polar", "normal"})


#: the factories :meth:`FileFacts.is_factory` recognises.
DEVICE_FACTORIES = TENSOR_FACTORIES - _NOT_FACTORIES


# Classes from outside torch.nn that are nn.Modules; the value says whether
# the class provides a ``device`` attribute (transformers' PreTrainedModel,
# Lightning's LightningModule and diffusers' ModelMixin all do). Matched on
# the last component so relative imports inside those projects count too.
KNOWN_MODULE_BASES: Dict[str, bool] = {
    "PreTrainedModel": True,
    "LightningModule": True,
    "ModelMixin": True,
}


#: torch.nn layers that hold a ``weight`` parameter by default, usable as a
#: device anchor (``self.embed.weight.device``).
WEIGHTED_LAYERS = frozenset(
    {
        "Linear", "Bilinear", "Embedding", "EmbeddingBag", "Conv1d", "Conv2d",
        "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
        "LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
        "PReLU", "RMSNorm", "LazyLinear",
    }
)


#: torch.nn layers whose parameters have other names: the one a device
#: anchor reads (``self.rnn.weight_ih_l0.device``)
_LAYER_PARAMETERS = {
    "LSTM": "weight_ih_l0", "GRU": "weight_ih_l0", "RNN": "weight_ih_l0",
    "LSTMCell": "weight_ih", "GRUCell": "weight_ih", "RNNCell": "weight_ih",
    "MultiheadAttention": "out_proj.weight",
}


def layer_parameter(class_name: str) -> Optional[str]:
    """The path from an instance of the torch.nn layer ``class_name``
    (qualified) to a parameter it holds by default, or None."""
    if not class_name.startswith("torch.nn."):
        return None
    short = class_name.rsplit(".", 1)[-1]
    if short in WEIGHTED_LAYERS:
        return "weight"
    return _LAYER_PARAMETERS.get(short)


#: torch.nn.functional losses: every argument is a tensor that must share
#: the first one's device
FUNCTIONAL_LOSSES = frozenset(
    {
        "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "ctc_loss",
        "poisson_nll_loss", "gaussian_nll_loss", "cosine_embedding_loss", "margin_ranking_loss",
        "hinge_embedding_loss", "multi_margin_loss", "multilabel_margin_loss",
        "multilabel_soft_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    }
)


#: torch.nn containers of submodules.
MODULE_CONTAINERS = frozenset({"ModuleList", "ModuleDict", "Sequential", "ParameterList", "ParameterDict"})


#: pre-factory tensor constructors (``torch.FloatTensor([d])``)
_LEGACY_TENSOR_CONSTRUCTORS = frozenset(
    f"torch.{p}{t}Tensor"
    for p in ("", "cuda.")
    for t in ("", "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
) - {"torch.cuda.Tensor"}


LEGACY_TENSOR_CONSTRUCTORS = _LEGACY_TENSOR_CONSTRUCTORS

#: tests that are true only while ``torch.fx`` traces code symbolically (its
#: tensors are then ``Proxy`` objects, with no data and no device)
FX_TRACING_TESTS = frozenset(
    {"torch.fx._symbolic_trace.is_fx_tracing", "torch.fx._symbolic_trace.is_fx_symbolic_tracing"}
)
FX_PROXY_CLASSES = frozenset({"torch.fx.Proxy", "torch.fx.proxy.Proxy"})

#: functools wrappers that keep the callable they are given and are no
#: ``nn.Module`` (a module inside one is not registered):
#: ``partial(net, k=3)``, ``cache(net)``, ``lru_cache(net)``
FUNCTOOLS_WRAPPERS = frozenset({"functools.partial", "functools.cache", "functools.lru_cache"})


#: torch functions that take tensors but do not return one tensor
_NOT_ONE_TENSOR = frozenset(
    {
        "is_tensor", "is_storage", "is_floating_point", "is_complex", "is_nonzero", "numel", "equal",
        "allclose", "typename", "get_default_dtype", "split", "chunk", "unbind", "tensor_split",
        "hsplit", "vsplit", "dsplit", "meshgrid", "broadcast_tensors", "topk", "sort", "max", "min",
        "median", "nanmedian", "mode", "kthvalue", "var_mean", "std_mean", "unique", "unique_consecutive",
        "histogram", "frexp", "aminmax", "svd", "qr", "lu", "slogdet", "save", "load", "manual_seed",
        "device", "dtype", "Size", "no_grad", "set_grad_enabled", "where", "nonzero", "broadcast_shapes",
    }
)


#: tensor methods that do not return a tensor
_NOT_TENSOR_METHODS = frozenset(
    {
        "tolist", "item", "numpy", "size", "dim", "ndimension", "numel", "nelement", "element_size",
        "data_ptr", "storage", "untyped_storage", "is_contiguous", "is_floating_point", "is_complex",
        "split", "chunk", "unbind", "tensor_split", "sort", "topk", "max", "min", "median", "mode",
        "kthvalue", "unique", "nonzero_static", "stride", "get_device", "equal", "allclose", "register_hook",
        "backward", "__len__", "__iter__", "type", "dtype", "device", "shape",
    }
)


#: functions and methods that keep a tensor's shape (and 0-dim stays 0-dim)
_ELEMENTWISE = frozenset(
    {
        "sqrt", "rsqrt", "exp", "log", "log2", "log10", "log1p", "abs", "neg", "reciprocal", "sin", "cos",
        "tanh", "sigmoid", "float", "double", "half", "bfloat16", "long", "int", "bool", "clone", "detach",
        "requires_grad_", "clamp", "clamp_min", "clamp_max", "pow", "square",
    }
)


#: ``torch.nn`` modules without parameters, buffers or train/eval behaviour
#: (the weighted losses qualify only without their weight arguments)
_WEIGHTED_LOSSES = frozenset(
    {"CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss"}
)


STATELESS_MODULES = _WEIGHTED_LOSSES | frozenset(
    {"L1Loss", "MSELoss", "SmoothL1Loss", "HuberLoss", "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss",
     "CosineEmbeddingLoss", "MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss", "MultiLabelMarginLoss",
     "TripletMarginLoss", "CTCLoss", "ReLU", "ReLU6", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid", "Softmax",
     "LogSoftmax", "LeakyReLU", "ELU", "SELU", "CELU", "Softplus", "Hardtanh", "Hardswish", "Hardsigmoid",
     "Identity", "Flatten", "Unflatten"}
)


def canonical(qualified: str) -> str:
    return CANONICAL_NAMES.get(qualified, qualified)


def _is_torch_module_name(q: str) -> bool:
    if not q.startswith("torch.nn."):
        return False
    last = q.rsplit(".", 1)[-1]
    return last[:1].isupper() and last not in ("Parameter", "Buffer", "Identity_") and not q.startswith(
        "torch.nn.functional."
    ) and not q.startswith("torch.nn.init.")


#: the complex dtypes (``torch.cfloat``): a tensor of one is cast to a real
#: dtype, dropping the imaginary part, by ``module.to(torch.bfloat16)`` (a
#: dtype given to ``Module.to``; ``.half()`` leaves it) when it is a buffer
COMPLEX_DTYPES = frozenset({"complex32", "complex64", "complex128", "chalf", "cfloat", "cdouble"})
#: torch functions that make a complex tensor from real ones
COMPLEX_MAKERS = frozenset({"polar", "complex", "view_as_complex"})
#: ``torch.fft`` functions whose result is real (the others are complex, or,
#: for the shifts, of their input's dtype)
FFT_REAL_RESULTS = frozenset({"irfft", "irfft2", "irfftn", "hfft", "hfft2", "hfftn", "fftfreq", "rfftfreq"})
FFT_SAME_DTYPE = frozenset({"fftshift", "ifftshift"})
#: functions and methods whose result is complex when their (first) tensor is
COMPLEX_PRESERVING = frozenset(
    {"exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "neg", "reciprocal", "clone", "detach", "conj",
     "conj_physical", "resolve_conj", "pow", "square", "contiguous", "reshape", "view", "flip", "roll",
     "transpose", "permute", "unsqueeze", "squeeze", "t", "repeat", "expand", "cumprod", "prod", "mul", "div",
     "add", "sub", "matmul", "outer", "requires_grad_"}
)

_DTYPE_NAMES = frozenset(
    {"float", "float16", "float32", "float64", "bfloat16", "half", "double", "long", "int", "int8", "int16",
     "int32", "int64", "uint8", "bool", "complex64", "complex128", "cfloat", "cdouble", "short"}
)


#: tensor methods that keep "the same tensor" as far as its device goes
_SAME_DEVICE_METHODS = frozenset(
    {"view", "reshape", "long", "int", "float", "half", "double", "bool", "unsqueeze", "squeeze", "flatten",
     "contiguous", "clone", "detach", "t", "transpose", "permute", "expand", "expand_as", "repeat"}
)


#: qualified names of torch's data loader class
#: library calls that return the model inside a DataParallel/DDP (or other)
#: wrapper they are given, by the name they are called with: accelerate's
#: ``Accelerator.unwrap_model`` and transformers' ``unwrap_model`` (as
#: ``accelerator.unwrap_model(model)``, ``unwrap_model(model)``). What they
#: return is no wrapper, so wrapping it again is no nested wrap.
UNWRAPPING_CALLS = frozenset({"unwrap_model"})

DATA_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})

#: trainers that call these methods of theirs with the model as they wrapped
#: it: transformers' Trainer passes ``model_wrapped`` as the ``model``
#: argument of ``training_step``, ``compute_loss`` and ``prediction_step``,
#: an ``nn.DataParallel`` when one process sees several GPUs (a
#: DistributedDataParallel under DDP). A subclass that overrides one reads
#: that argument as the wrapper.
_TRAINER_HOOKS = frozenset({"training_step", "compute_loss", "prediction_step"})
WRAPPED_MODEL_HOOKS: Dict[str, FrozenSet[str]] = {
    "transformers.Trainer": _TRAINER_HOOKS,
    "transformers.trainer.Trainer": _TRAINER_HOOKS,
    "transformers.Seq2SeqTrainer": _TRAINER_HOOKS,
    "transformers.trainer_seq2seq.Seq2SeqTrainer": _TRAINER_HOOKS,
}


#: classmethods that build a whole pretrained model: transformers' auto
#: classes (``AutoModel``, ``AutoModelForCausalLM``, ...: ``from_config``,
#: ``from_pretrained``) return an ``nn.Module`` of a class chosen at run
#: time, itself a stack of the blocks a ``device_map`` keeps whole. Kept as
#: a part of a model a ``device_map`` splits, it is spread over the devices
#: like the blocks of ``self.layers``.
MODEL_FACTORY_METHODS = frozenset({"from_config", "from_pretrained", "_from_config"})


def is_auto_model_class(name: str) -> bool:
    """``AutoModel``, ``transformers.AutoModelForCausalLM``,
    ``transformers.models.auto.modeling_auto.AutoModelForVision2Seq``: a
    transformers auto class for PyTorch models (not ``TFAutoModel``,
    ``FlaxAutoModel``, ``AutoTokenizer`` or ``AutoConfig``)."""
    if "." in name and not name.startswith("transformers."):
        return False
    return name.rsplit(".", 1)[-1].startswith("AutoModel")


#: methods of a transformers ``PreTrainedModel`` that return one of its own
#: parts (the input embedding, the output head, the encoder or decoder
#: stack): where the model sits, that part sits
PART_GETTERS = frozenset({"get_input_embeddings", "get_output_embeddings", "get_encoder", "get_decoder"})


#: function transforms whose result, called, runs the function they are given
#: on slices of its arguments (``torch.vmap(f)(x)``): on the arguments' devices
VMAPS = frozenset({"torch.vmap", "torch.func.vmap", "functorch.vmap"})


#: callables whose result iterates like their first argument (``tqdm(loader)``)
ITER_WRAPPERS = frozenset({"enumerate", "iter", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.rich.tqdm"})


#: library collate functions that return CPU tensors (``transformers``'
#: ``DataCollator*`` classes are matched by name, see :func:`is_cpu_collator`)
_CPU_COLLATORS = frozenset({
    "torch.utils.data.default_collate", "torch.utils.data.dataloader.default_collate",
    "torch.utils.data._utils.collate.default_collate", "transformers.default_data_collator",
    "transformers.data.data_collator.default_data_collator", "transformers.data.default_data_collator",
})


#: methods that return their receiver on the device it is on: ``nn.Module.eval()``/
#: ``train()``/``requires_grad_()`` return the module itself; dtype casts keep the device
_KEEPS_PLACEMENT = frozenset({"eval", "train", "half", "float", "double", "bfloat16", "requires_grad_", "share_memory"})


#: calls whose result lives where their argument does
_SAME_DEVICE_COPIES = frozenset({"copy.deepcopy", "torch.compile"})


#: ``nn.CTCLoss`` and ``F.ctc_loss``: targets and lengths may be CPU tensors
#: beside CUDA log-probabilities (cuDNN's CTC even wants them there)
CTC_LOSSES = frozenset({
    "torch.nn.CTCLoss", "torch.nn.modules.loss.CTCLoss", "torch.nn.functional.ctc_loss", "torch.ctc_loss",
})


#: the calls that unpickle tensors with ``torch.load``, and the position of
#: their ``map_location`` parameter: ``torch.load(f, map_location=None)``, and
#: ``torch.hub.load_state_dict_from_url(url, model_dir=None,
#: map_location=None, ...)`` (``torch.utils.model_zoo.load_url`` is the same
#: function), which downloads a checkpoint and passes ``map_location`` on to
#: ``torch.load``: without it, the tensors go back on the device that saved them
MAP_LOCATION_INDEX = {
    "torch.load": 1,
    "torch.serialization.load": 1,
    "torch.hub.load_state_dict_from_url": 2,
    "torch.utils.model_zoo.load_url": 2,
}
TORCH_LOADS = frozenset(MAP_LOCATION_INDEX)


_RNG_SETTERS = frozenset({"set_rng_state", "set_rng_state_all"})


#: ``device_map=`` strings with which accelerate spreads a model over devices
_SPREADING_DEVICE_MAPS = frozenset({"auto", "balanced", "balanced_low_0", "sequential"})

WRAPPER_SHORT = {
    "torch.nn.DataParallel": "DataParallel",
    "torch.nn.parallel.DistributedDataParallel": "DistributedDataParallel",
}


#: arguments PyTorch takes as Python integers (``int``/``SymInt`` in its
#: signatures), by position after the input and by keyword: a 0-dim tensor
#: given there is read as a number (``__index__``), wherever it lives, so it
#: meets no tensor (``torch.multinomial(w, n.max())``, ``x.topk(k_tensor)``)
INT_ARGUMENTS = {
    "multinomial": (1, "num_samples"),
    "topk": (1, "k"),
    "kthvalue": (1, "k"),
    "narrow": (2, "start", 3, "length"),
    "roll": (1, "shifts"),
    "tril": (1, "diagonal"),
    "triu": (1, "diagonal"),
    "diagonal": (1, "offset"),
    "chunk": (1, "chunks"),
    "split": (1, "split_size_or_sections"),
    "unbind": (1, "dim"),
    "select": (2, "index"),
    "movedim": (1, "source", 2, "destination"),
    "flatten": (1, "start_dim", 2, "end_dim"),
    "unflatten": (1, "dim"),
    "squeeze": (1, "dim"),
    "unsqueeze": (1, "dim"),
    "transpose": (1, "dim0", 2, "dim1"),
    "cumsum": (1, "dim"),
    "cumprod": (1, "dim"),
    "softmax": (1, "dim"),
    "log_softmax": (1, "dim"),
    "argmax": (1, "dim"),
    "argmin": (1, "dim"),
    "argsort": (1, "dim"),
    "sort": (1, "dim"),
}


def int_argument(name: str, position: int, keyword: str) -> bool:
    """Whether argument ``position`` (0: the input; -1 for a keyword) or
    ``keyword`` of the torch function or tensor method ``name`` is an integer."""
    spec = INT_ARGUMENTS.get(name, ())
    return (keyword != "" and keyword in spec) or (position > 0 and position in spec)


#: torch functions with an overload whose first argument is a Python number
#: (``torch.remainder(Scalar self, Tensor other)``, ``torch.pow(Scalar, Tensor)``):
#: their first argument is not a tensor by signature alone
SCALAR_FIRST = frozenset({
    "pow", "float_power", "remainder", "xlogy", "xlog1py", "zeta", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_left_shift", "bitwise_right_shift", "special_xlogy", "special_xlog1py", "special_zeta",
})



#: annotations of a container that say nothing of what it holds (``eval_imgs:
#: list``, ``ious: dict``): like an unannotated argument, it holds what the
#: callers pass, which may be tensors on the inputs' device
BARE_CONTAINER_ANNOTATIONS = frozenset(
    {"list", "List", "tuple", "Tuple", "dict", "Dict", "Sequence", "Iterable", "Mapping"}
)


#: methods that run while a module is built (or rebuilt), before it is moved
INIT_METHODS = frozenset({"__init__", "reset_parameters", "_reset_parameters", "init_weights", "_init_weights", "__setstate__"})
