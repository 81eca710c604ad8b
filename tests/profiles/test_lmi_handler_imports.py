"""Import contract: LMI's handler `djl_python.transformers_neuronx` against the FAKE transformers-neuronx
0.13.380 (tests/fakes/neuron_sdk_2_21_1) — issue 38 case 10: "djl-serving's handler imports the fake".

djl-serving's Python code is neither ours to commit nor on PyPI, so the contract is its import
statements, quoted verbatim with their place, executed for real in the FAKE SDK 2.21.1 interpreter (the
fake first on its path: `use_fake_sdk` + `run_in_toolchain`, as tests/backends/test_tnx.py does), each in
a fresh namespace and in the order importing the handler executes them; then what the handler does with
the names it imported (its calls, its subclass, its class lookup by model type).

Source (CODE): deepjavalibrary/djl-serving afece25d (= 1132e3ab~1, the last commit with Neuron support),
engines/python/setup/djl_python/. The image the profile pins, deepjavalibrary/djl-serving:0.33.0-pytorch-inf2,
was most likely built from branch `0.33.0-dlc` (8b3b685b), whose Neuron files differ from afece25d in one
docstring only: its transformers_neuronx imports are the same statements on the same lines; its vLLM
imports differ (see _VLLM). HANDLER_IMPORTS was made by walking the handler's module-level import closure
at both commits (46 djl_python modules; package `__init__`s included; function bodies and `TYPE_CHECKING`
blocks excluded; `djl_python.*` imports followed depth-first, as Python executes them) and keeping every
import of a module outside the standard library and djl_python. No other djl_python file outside tests/
imports transformers_neuronx (`git grep transformers_neuronx`); the one later import is by name, at load
time (CLS_LOADER).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import SDK_2_21_1, run_in_toolchain

DJL = "deepjavalibrary/djl-serving afece25d engines/python/setup/djl_python"

_VLLM = (
    "the image installs vLLM as djl's Neuron wheel vllm_neuronx 0.6.2+neuron216 (pytorch-inf2.Dockerfile "
    "ARG vllm_wheel, from publish.djl.ai, not PyPI) and no fake of it exists here; at 8b3b685b these lines "
    "read vLLM 0.6's layout (`from vllm.utils import random_uuid, AtomicCounter`, `from vllm.utils import "
    "FlexibleArgumentParser` and `StoreBoolean`), at afece25d a later vLLM's (vllm.utils.counter, argparse_utils)"
)
_PIL = "Pillow is in the image (pytorch-inf2.Dockerfile installs it) but not in this project's pinned venv"
_TORCH_XLA = (
    "the venv's optimum-neuron 0.4.5 (SDK 2.26.1's) imports torch_xla here; the image's optimum-neuron 0.0.27 "
    "runs on torch-xla 2.1.6 and torch-neuronx, SDK packages this project never installs"
)
_NXD = "the venv's optimum-neuron 0.4.5 exporters import neuronx_distributed, an SDK package never installed here"

# (file:line at afece25d and 8b3b685b, the statement verbatim, None or (the module whose absence fails
# it here, why)), in the order importing the handler executes them. The transformers_neuronx rows must
# import; on main the fake lacked five of their names (NeuronAutoModelForCausalLM, config.GenerationConfig,
# generation_utils.HuggingFaceGenerationModelAdapter, constants.LAYOUT_BSH and LAYOUT_HSB). The others
# are what this environment provides (the venv's torch, transformers, pydantic 2, numpy, requests,
# typing_extensions, huggingface_hub, optimum and optimum-neuron 0.4.5; the image pins transformers 4.45.2,
# pydantic 2.6.1, optimum-neuron 0.0.27: pytorch-inf2.Dockerfile ARGs) or, with the reason, cannot.
HANDLER_IMPORTS: tuple[tuple[str, str, tuple[str, str] | None], ...] = (
    (
        "np_util.py:17",
        "import numpy as np",
        None,
    ),
    (
        "session_manager.py:25",
        "import numpy as np",
        None,
    ),
    (
        "transformers_neuronx.py:17",
        "from transformers import AutoConfig, AutoTokenizer",
        None,
    ),
    (
        "encode_decode.py:21",
        "import numpy as np",
        None,
    ),
    (
        "rolling_batch/neuron_rolling_batch.py:14",
        "import torch",
        None,
    ),
    (
        "output_formatter.py:18",
        "from typing_extensions import deprecated",
        None,
    ),
    (
        "properties_manager/properties.py:17",
        "from pydantic import BaseModel, field_validator, model_validator, ValidationInfo, ConfigDict",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_neuron_scheduler.py:18",
        "import torch",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_neuron_scheduler.py:22",
        "from transformers_neuronx import base",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_neuron_scheduler.py:23",
        "from transformers import PreTrainedTokenizerBase",
        None,
    ),
    (
        "transformers_neuronx_scheduler/slot.py:15",
        "import torch",
        None,
    ),
    (
        "transformers_neuronx_scheduler/slot.py:18",
        "from transformers.generation import GenerationConfig",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_token_selector.py:20",
        "import torch",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_token_selector.py:21-26",
        "from transformers.generation import (\n"
        "    GenerationConfig,\n"
        "    GenerationMixin,\n"
        "    LogitsProcessorList,\n"
        "    StoppingCriteriaList,\n"
        ")",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_token_selector.py:27",
        "from transformers.generation.utils import GenerationMode",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_token_selector.py:29",
        "from optimum.neuron.generation import TokenSelector",
        ("torch_xla", _TORCH_XLA),
    ),
    (
        "transformers_neuronx_scheduler/speculation.py:16",
        "import torch",
        None,
    ),
    (
        "properties_manager/tnx_properties.py:20",
        "from pydantic import field_validator, model_validator, ValidationInfo, Field",
        None,
    ),
    (
        "rolling_batch/vllm_rolling_batch.py:15",
        "from vllm import LLMEngine, SamplingParams",
        ("vllm", _VLLM),
    ),
    (
        "rolling_batch/vllm_rolling_batch.py:16",
        "from vllm.sampling_params import RequestOutputKind",
        ("vllm", _VLLM),
    ),
    (
        "rolling_batch/vllm_rolling_batch.py:17",
        "from vllm.utils import random_uuid",
        ("vllm", _VLLM),
    ),
    (
        "rolling_batch/vllm_rolling_batch.py:18",
        "from vllm.utils.counter import AtomicCounter",
        ("vllm", _VLLM),
    ),
    (
        "rolling_batch/rolling_batch_vllm_utils.py:16",
        "from vllm import EngineArgs, TokensPrompt, TextPrompt",
        ("vllm", _VLLM),
    ),
    (
        "rolling_batch/rolling_batch_vllm_utils.py:17",
        "from vllm.outputs import CompletionOutput, RequestOutput as vLLMRequestOutput",
        ("vllm", _VLLM),
    ),
    (
        "rolling_batch/rolling_batch_vllm_utils.py:18",
        "from vllm.lora.request import LoRARequest",
        ("vllm", _VLLM),
    ),
    (
        "properties_manager/vllm_rb_properties.py:16",
        "from pydantic import field_validator, model_validator, ConfigDict, Field",
        None,
    ),
    (
        "properties_manager/vllm_rb_properties.py:17",
        "from vllm import EngineArgs, AsyncEngineArgs",
        ("vllm", _VLLM),
    ),
    (
        "properties_manager/vllm_rb_properties.py:18",
        "from vllm.utils.argparse_utils import FlexibleArgumentParser",
        ("vllm", _VLLM),
    ),
    (
        "stable_diffusion_inf2.py:18",
        "from PIL import Image",
        ("PIL", _PIL),
    ),
    (
        "neuron_utils/model_loader.py:23",
        "from transformers import AutoModelForCausalLM, GenerationConfig",
        None,
    ),
    (
        "neuron_utils/model_loader.py:24",
        "from transformers_neuronx import NeuronAutoModelForCausalLM",
        None,
    ),
    (
        "neuron_utils/model_loader.py:25-26",
        "from transformers_neuronx.config import NeuronConfig, QuantizationConfig, ContinuousBatchingConfig, \\\n"
        "    GenerationConfig as NeuronGenerationConfig",
        None,
    ),
    (
        "neuron_utils/model_loader.py:28",
        "from transformers_neuronx.module import save_pretrained_split",
        None,
    ),
    (
        "neuron_utils/utils.py:15",
        "import torch",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_modeling.py:17",
        "import torch",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_modeling.py:19",
        "from transformers import AutoModelForCausalLM, AutoConfig",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_modeling.py:20",
        "from transformers.utils import ModelOutput",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_modeling.py:21",
        "from transformers import GenerationConfig",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_modeling.py:22",
        "from transformers.generation import GenerationMixin",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_modeling.py:25",
        "from transformers import PretrainedConfig",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_modeling.py:26",
        "from transformers_neuronx import bucket",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_modeling.py:27",
        "from transformers_neuronx.constants import LAYOUT_BSH, LAYOUT_HSB",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_modeling.py:28",
        "from optimum.neuron.utils.version_utils import check_compiler_compatibility, get_neuronxcc_version",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_modeling.py:30",
        "from optimum.modeling_base import OptimizedModel",
        None,
    ),
    (
        "transformers_neuronx_scheduler/optimum_modeling.py:31",
        "from transformers.generation import StoppingCriteriaList",
        None,
    ),
    (
        "neuron_utils/utils.py:18",
        "from optimum.exporters.neuron.model_configs import *",
        ("neuronx_distributed", _NXD),
    ),
    (
        "neuron_utils/utils.py:19",
        "from optimum.exporters.tasks import TasksManager",
        None,
    ),
    (
        "neuron_utils/utils.py:20",
        "from transformers_neuronx.generation_utils import HuggingFaceGenerationModelAdapter",
        None,
    ),
    (
        "neuron_utils/model_loader.py:31",
        "from huggingface_hub import hf_hub_download",
        None,
    ),
    (
        "properties_manager/sd_inf2_properties.py:15",
        "import torch",
        None,
    ),
    (
        "properties_manager/sd_inf2_properties.py:18",
        "from pydantic import field_validator, model_validator",
        None,
    ),
    (
        "streaming_utils.py:17",
        "import torch",
        None,
    ),
    (
        "streaming_utils.py:19-26",
        "from transformers import (\n"
        "    LogitsProcessorList,\n"
        "    TemperatureLogitsWarper,\n"
        "    TopKLogitsWarper,\n"
        "    TopPLogitsWarper,\n"
        "    TypicalLogitsWarper,\n"
        "    RepetitionPenaltyLogitsProcessor,\n"
        ")",
        None,
    ),
    (
        "streaming_utils.py:27",
        "from transformers.generation.streamers import BaseStreamer",
        None,
    ),
    (
        "chat_completions/chat_properties.py:15",
        "from pydantic import BaseModel, Field, field_validator, ValidationInfo, ConfigDict",
        None,
    ),
    (
        "chat_completions/chat_properties.py:16",
        "from PIL.Image import Image",
        ("PIL", _PIL),
    ),
    (
        "multimodal/utils.py:17",
        "import requests",
        None,
    ),
    (
        "multimodal/utils.py:18",
        "from PIL import Image",
        ("PIL", _PIL),
    ),
)

TNX = [row for row in HANDLER_IMPORTS if "transformers_neuronx" in row[1]]
PROVIDED = [row for row in HANDLER_IMPORTS if row[2] is None and row not in TNX]
MISSING = [row for row in HANDLER_IMPORTS if row[2] is not None]

# At load time, not import time: TNXModelLoader.set_neuronx_class (model_loader.py:145-159) does
# `importlib.import_module(f"transformers_neuronx.{module_name}")` and `getattr(module, class_name, None)`
# (None is an ImportError) for the model type's entry of MODEL_TYPE_TO_CLS_LOADER (model_loader.py:117-126).
CLS_LOADER = {
    "opt": "opt.model.OPTForSampling",
    "gpt2": "gpt2.model.GPT2ForSampling",
    "gptj": "gptj.model.GPTJForSampling",
    "gpt_neox": "gptneox.model.GPTNeoXForSampling",
    "llama": "llama.model.LlamaForSampling",
    "mistral": "mistral.model.MistralForSampling",
    "mixtral": "mixtral.model.MixtralForSampling",
    "bloom": "bloom.model.BloomForSampling",
}

EXEC = """
import json, warnings
warnings.simplefilter("ignore")
out = []
for statement in json.loads(%r):
    try:
        exec(statement, {})  # a fresh namespace per statement
        out.append(None)
    except BaseException as e:
        out.append({"type": type(e).__name__, "name": getattr(e, "name", None), "text": str(e)})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The FAKE SDK 2.21.1 (transformers-neuronx 0.13.380) as the toolchain interpreter."""
    from tests.conftest import use_fake_sdk

    base = tmp_path_factory.mktemp("lmi-handler")
    with pytest.MonkeyPatch.context() as mp:
        use_fake_sdk(mp, "2.21.1", SDK_2_21_1, base)
        yield base


@pytest.fixture(scope="module")
def executed(sdk: Path) -> dict[str, dict | None]:
    """Each row's outcome when executed in the handler's order: None, or the exception it raised."""
    statements = [stmt for _, stmt, _ in HANDLER_IMPORTS]
    out = json.loads(run_in_toolchain("2.21.1", EXEC % json.dumps(statements)).splitlines()[-1])
    return {where: outcome for (where, _, _), outcome in zip(HANDLER_IMPORTS, out, strict=True)}


def _row_id(row: tuple) -> str:
    return row[0]


@pytest.mark.parametrize("row", TNX, ids=_row_id)
def test_the_fake_has_every_transformers_neuronx_name_the_handler_imports(executed: dict, row: tuple) -> None:
    where, statement, _ = row
    assert executed[where] is None, f"{DJL}/{where}: `{statement}` fails on the fake: {executed[where]}"


@pytest.mark.parametrize("row", PROVIDED, ids=_row_id)
def test_the_handlers_other_imports_this_environment_provides(executed: dict, row: tuple) -> None:
    where, statement, _ = row
    assert executed[where] is None, f"{DJL}/{where}: `{statement}` fails: {executed[where]}"


@pytest.mark.parametrize("row", MISSING, ids=_row_id)
def test_the_imports_this_environment_cannot_provide_fail_for_the_stated_reason(executed: dict, row: tuple) -> None:
    """Keeps the table true: a row that starts to import belongs with the provided ones."""
    where, statement, (module, why) = row
    outcome = executed[where]
    assert outcome is not None, f"{DJL}/{where}: `{statement}` now imports here; move it to the provided rows"
    assert (outcome["type"], outcome["name"]) == ("ModuleNotFoundError", module), (
        f"{DJL}/{where}: expected to fail for want of {module} ({why}), got {outcome}"
    )


def test_the_tables_are_the_closure_in_order() -> None:
    """58 statements, none listed twice; the seven transformers_neuronx ones in the order the handler reaches them."""
    places = [where for where, _, _ in HANDLER_IMPORTS]
    assert len(places) == len(set(places)) == 58
    assert [where for where, _, _ in TNX] == [
        "transformers_neuronx_scheduler/optimum_neuron_scheduler.py:22",
        "neuron_utils/model_loader.py:24",
        "neuron_utils/model_loader.py:25-26",
        "neuron_utils/model_loader.py:28",
        "transformers_neuronx_scheduler/optimum_modeling.py:26",
        "transformers_neuronx_scheduler/optimum_modeling.py:27",
        "neuron_utils/utils.py:20",
    ]


BEHAVIOUR = """
import copy, importlib, json, warnings
import torch
from transformers import LlamaConfig, PreTrainedModel
from transformers_neuronx import NeuronAutoModelForCausalLM, base
from transformers_neuronx.config import NeuronConfig, ContinuousBatchingConfig
from transformers_neuronx.config import GenerationConfig as NeuronGenerationConfig
from transformers_neuronx.constants import LAYOUT_BSH, LAYOUT_HSB, LAYOUT_SBH
from transformers_neuronx.generation_utils import HuggingFaceGenerationModelAdapter
from transformers_neuronx import modeling_auto

LLAMA_DIR, QWEN2_DIR, CLS_LOADER = json.loads(%r)
out = {}
out["layouts"] = [[v, type(v).__name__] for v in (LAYOUT_BSH, LAYOUT_HSB, LAYOUT_SBH)]

out["generation_defaults"] = vars(NeuronGenerationConfig())
try:
    NeuronGenerationConfig(128)
    out["generation_positional"] = None
except TypeError as e:
    out["generation_positional"] = "TypeError"
# what LMI's TNXVllmModelLoader.generate_generation_config builds (model_loader.py:786-798), batch 4
lmi = NeuronGenerationConfig(max_length=2048, do_sample=True, per_batch_line=True, top_k=[1] * 4, top_p=[1] * 4,
                             temperature=[1] * 4, dynamic=True, global_top_k=256, deterministic=True)
out["generation_lmi"] = vars(lmi)
out["generation_eq"] = [lmi == copy.deepcopy(lmi), lmi == NeuronGenerationConfig(), lmi == vars(lmi)]
nc = NeuronConfig(continuous_batching=ContinuousBatchingConfig(batch_size_for_shared_caches=4),
                  on_device_generation=copy.deepcopy(lmi))
out["neuron_config_generation"] = nc.to_json()["on_device_generation"]

# neuron_utils/utils.py:138-149: LMI's dynamic-batching adapter subclasses it at import and calls
# super().__init__(config, model) from its own __init__(model, config, ...)
class DynamicBatchAdapter(HuggingFaceGenerationModelAdapter):
    def __init__(self, model, config, *args, **kwargs):
        super().__init__(config, model)
        self.after_base = (self.model is model, self.config is config, self.cur_len.tolist(), str(self.cur_len.dtype))

small = dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=1, intermediate_size=128, vocab_size=128)
inner = torch.nn.Linear(1, 1)
adapter = DynamicBatchAdapter(inner, LlamaConfig(**small))
out["adapter"] = {"is_pretrained_model": isinstance(adapter, PreTrainedModel), "after_base": list(adapter.after_base)}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    sdpa = LlamaConfig(**small, attn_implementation="sdpa")
    DynamicBatchAdapter(inner, sdpa)
out["adapter_sdpa"] = [sdpa._attn_implementation, [str(w.message) for w in caught if "sdpa" in str(w.message)]]
try:
    adapter.forward(torch.zeros(1, 1, dtype=torch.long), torch.arange(1))
    out["adapter_forward"] = None
except NotImplementedError as e:
    out["adapter_forward"] = str(e)

name = lambda cls: cls.__module__ + "." + cls.__name__
out["auto_mapping"] = {k: name(v) for k, v in modeling_auto.NEURON_MODEL_FOR_CAUSAL_LM_MAPPING.items()}
model = NeuronAutoModelForCausalLM.from_pretrained(LLAMA_DIR, neuron_config=NeuronConfig(), batch_size=1, amp="f32",
                                                   tp_degree=2, n_positions=128)
out["auto_llama"] = name(type(model))
try:
    NeuronAutoModelForCausalLM.from_pretrained(QWEN2_DIR, batch_size=1)
    out["auto_qwen2"] = None
except AssertionError as e:
    out["auto_qwen2"] = str(e)

out["cls_loader"] = {}
for model_type, dotted in CLS_LOADER.items():
    module_name, class_name = dotted.rsplit(".", 1)
    cls = getattr(importlib.import_module("transformers_neuronx." + module_name), class_name, None)
    out["cls_loader"][model_type] = None if cls is None else name(cls)
out["neuron_model_base"] = isinstance(base.NeuronModelBase, type)  # optimum_neuron_scheduler.py:398 isinstance()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def behaviour(sdk: Path) -> dict:
    """What the handler's calls on the imported names give in the fake interpreter."""
    from neuronforge.spec.tinymodel import make_tiny_llama

    llama = make_tiny_llama(sdk / "llama")
    qwen2 = sdk / "qwen2"
    qwen2.mkdir()
    (qwen2 / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 64, "vocab_size": 128}))
    code = BEHAVIOUR % json.dumps([str(llama), str(qwen2), CLS_LOADER])
    try:
        return json.loads(run_in_toolchain("2.21.1", code).splitlines()[-1])
    except subprocess.CalledProcessError as e:
        pytest.fail(f"the fake interpreter failed on the handler's calls:\n{e.stderr[-2000:]}")


def test_the_layout_constants_are_plain_strings(behaviour: dict) -> None:
    """tnx 1ade6d74 constants.py:30-32 `LAYOUT_BSH = 'BSH'` … (imported by optimum_modeling.py:27)."""
    assert behaviour["layouts"] == [["BSH", "str"], ["HSB", "str"], ["SBH", "str"]]


def test_generation_config_has_the_real_keywords_and_conversions(behaviour: dict) -> None:
    """tnx 1ade6d74 config.py:106-139: keyword-only, these defaults, top_p / temperature as floats (per
    batch line when lists), equality by attributes; NeuronConfig carries it as on_device_generation."""
    assert behaviour["generation_defaults"] == {
        "max_length": None, "do_sample": False, "per_batch_line": False, "top_k": 50, "top_p": 1.0,
        "temperature": 1.0, "top_p_min_tokens": 1, "global_top_k": None, "eos_token_id": None, "dynamic": False,
        "deterministic": False,
    }  # fmt: skip
    assert behaviour["generation_positional"] == "TypeError"
    lmi = behaviour["generation_lmi"]
    assert (lmi["top_k"], lmi["top_p"], lmi["temperature"], lmi["global_top_k"]) == ([1] * 4, [1.0] * 4, [1.0] * 4, 256)
    assert behaviour["generation_eq"] == [True, False, False]
    assert behaviour["neuron_config_generation"] == lmi


def test_lmis_adapter_subclasses_the_fake_adapter_as_a_transformers_model(behaviour: dict) -> None:
    """tnx 1ade6d74 generation_utils.py:15-25: a PreTrainedModel whose __init__(config, model) keeps both
    and a zero `cur_len`, and falls back from sdpa to eager with a warning; LMI subclasses it at import
    (djl neuron_utils/utils.py:138). The fake cannot step a decoder: forward says so."""
    assert behaviour["adapter"] == {"is_pretrained_model": True, "after_base": [True, True, [0], "torch.int64"]}
    implementation, warned = behaviour["adapter_sdpa"]
    assert implementation == "eager"
    assert warned == [
        "Warning: sdpa is unsupported as part of attention implementation. "
        "Falling back to eager attention implementation."
    ]
    assert "FAKE transformers-neuronx 0.13.380" in behaviour["adapter_forward"]


def test_the_auto_class_maps_config_types_to_the_sampling_classes(behaviour: dict) -> None:
    """tnx 1ade6d74 modeling_auto.py: the config's class or model_type picks the class (gpt2: the
    ContextBroadcasting one, unlike LMI's own table), an unsupported type is an AssertionError; LMI calls
    it for checkpoints it has not split (model_loader.py:291-296)."""
    assert behaviour["auto_mapping"] == {
        "bloom": "transformers_neuronx.bloom.model.BloomForSampling",
        "code_llama": "transformers_neuronx.llama.model.LlamaForSampling",
        "gpt2": "transformers_neuronx.gpt2.model.GPT2ForSamplingWithContextBroadcasting",
        "gpt_neox": "transformers_neuronx.gptneox.model.GPTNeoXForSampling",
        "gptj": "transformers_neuronx.gptj.model.GPTJForSampling",
        "llama": "transformers_neuronx.llama.model.LlamaForSampling",
        "mistral": "transformers_neuronx.mistral.model.MistralForSampling",
        "mixtral": "transformers_neuronx.mixtral.model.MixtralForSampling",
        "opt": "transformers_neuronx.opt.model.OPTForSampling",
    }
    assert behaviour["auto_llama"] == "transformers_neuronx.llama.model.LlamaForSampling"
    assert behaviour["auto_qwen2"] == "The configuration model type 'qwen2' is not supported by Neuron"


def test_lmi_finds_a_class_for_every_model_type_it_loads_by_name(behaviour: dict) -> None:
    assert behaviour["cls_loader"] == {mt: f"transformers_neuronx.{dotted}" for mt, dotted in CLS_LOADER.items()}
    assert behaviour["neuron_model_base"] is True
