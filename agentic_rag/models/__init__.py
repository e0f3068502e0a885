"""Models: the protocol, the offline model, the scripted model, the OpenAI-compatible client, model
sets and the per-run meter."""
from ..core import Endpoint, endpoint_from_env

# for the package's other folders, not public API (the public names are in __all__)
from ._factory import build_model as build_model
from ._factory import read_models_file as read_models_file
from ._meter import BudgetExceeded, Meter, new_usage
from ._model_set import ModelSet
from ._offline import OfflineModel
from ._openai_client import OpenAIChatModel
from ._protocol import TASKS, Model, ModelRequest, complete_with_repair, has_capability, parse_reply
from ._protocol import answer_text as answer_text
from ._scripted import ScriptedModel
from ._vision import ImageDescriber

__all__ = ["Model", "ModelRequest", "TASKS", "has_capability", "complete_with_repair", "parse_reply",
           "OfflineModel", "ScriptedModel", "OpenAIChatModel", "Endpoint", "endpoint_from_env", "ModelSet",
           "Meter", "BudgetExceeded", "new_usage", "ImageDescriber"]
