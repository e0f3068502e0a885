"""Models: the protocol, the offline model, the scripted model, model sets and the per-run meter."""
from .meter import BudgetExceeded, Meter, new_usage
from .model_set import ModelSet
from .offline import OfflineModel
from .protocol import TASKS, Model, ModelRequest, complete_with_repair, parse_reply
from .scripted import ScriptedModel

__all__ = ["BudgetExceeded", "Meter", "new_usage", "ModelSet", "OfflineModel", "TASKS", "Model", "ModelRequest",
           "complete_with_repair", "parse_reply", "ScriptedModel"]
