"""The reasoning-gym side of the adapter: the dataset names, their options, and the datasets themselves.

Everything here imports reasoning-gym when called (a few seconds: it loads every dataset module), never when this
module is imported. :func:`dataset_names` lists the ``rg.<name>`` members; :func:`check_options` validates an env's
``dataset`` and ``config`` with errors that name the bad key and the valid ones; :func:`problems` returns the shared
:class:`Problems` of one dataset configuration, which generates and scores entries with reasoning-gym's console
chatter (the ``bf`` compiler prints dots, ``pool_matrix`` warns) kept off the console, one thread at a time.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from ragen_core.errors import ConfigError, EnvError, suggest

__all__ = ["NEEDS_CONFIG", "OWN_OPTIONS", "Problems", "all_datasets", "check_options", "dataset_config",
           "dataset_names", "option_names", "problems"]

#: datasets left out of the ``rg.<name>`` listing, and why (they still work as ``dataset:`` with their ``config``)
NEEDS_CONFIG: dict[str, str] = {
    "composite": "mixes other datasets, so it needs config.datasets (a list of {name, weight, config}); use "
                 "env: reasoning_gym with dataset: composite",
}
#: dataset options the env sets itself (its own ``seed`` and ``size`` options), refused inside ``config``
OWN_OPTIONS = ("seed", "size")
#: how many dataset configurations (and their generated entries) are kept per process
_CACHE_SIZE = 128
#: how many generated entries one :class:`Problems` keeps
_ENTRIES_KEPT = 4096

T = TypeVar("T")

#: held around every call into reasoning-gym: env workers may run in threads, and the swaps of ``sys.stdout`` and
#: of the warning filters that keep reasoning-gym quiet must never interleave (nor the entry caches be edited twice)
_LOCK = threading.RLock()


def _registry() -> dict[str, tuple[type, type]]:
    """reasoning-gym's dataset registry, ``name -> (dataset class, config dataclass)`` (imports reasoning-gym)."""
    import reasoning_gym  # noqa: F401 - importing the package registers every dataset
    from reasoning_gym.factory import DATASETS

    return DATASETS


def all_datasets() -> list[str]:
    """Every dataset reasoning-gym registers, sorted (``composite`` included)."""
    return sorted(_registry())


def dataset_names() -> list[str]:
    """The datasets usable by name alone (``rg.<name>``): all but :data:`NEEDS_CONFIG`, sorted."""
    return [name for name in all_datasets() if name not in NEEDS_CONFIG]


def option_names(dataset: str) -> list[str]:
    """The keys ``config`` may hold for ``dataset``: its config dataclass's fields but :data:`OWN_OPTIONS`."""
    _, config_cls = _registry()[dataset]
    return [f.name for f in dataclasses.fields(config_cls) if f.init and f.name not in OWN_OPTIONS]


def check_options(dataset: str, options: Mapping[str, Any]) -> None:
    """Check ``dataset`` and its ``config`` mapping without building anything.

    :raises ValueError: an unknown dataset (with the nearest name), or a ``config`` key that ``dataset`` does not
        have or that the env sets itself (naming the key and listing the valid ones).
    """
    _check_name(dataset, "'dataset'")
    valid = option_names(dataset)
    for key in options:
        if key in OWN_OPTIONS:
            raise ValueError(f"'config' may not set {key!r}: set the env option {key!r} instead "
                             f"(env.options.{key}, next to dataset and config)")
        if key not in valid:
            close = suggest(str(key), valid)
            raise ValueError(f"'config' has the key {key!r}, which reasoning-gym dataset {dataset!r} does not take"
                             + (f" (did you mean {close!r}?)" if close else "")
                             + f"; its keys: {', '.join(valid) or '(none)'}")


def _check_name(name: Any, what: str) -> None:
    """Refuse ``name`` unless reasoning-gym registers it, suggesting the nearest name."""
    known = all_datasets()
    if name not in known:
        close = suggest(str(name), known)
        raise ValueError(f"{what} must be a reasoning-gym dataset name: {name!r}"
                         + (f" (did you mean {close!r}?)" if close else
                            f"; {len(known)} datasets, listed by `ragen envs --members rg`"))


def dataset_config(dataset: str, options: Mapping[str, Any], *, seed: int, size: int) -> Any:
    """Build and validate ``dataset``'s own config dataclass from ``options`` (checked by :func:`check_options`).

    :raises ValueError: the dataset refuses the values (its message, naming the dataset), or a composite's
        ``datasets`` list is malformed.
    """
    check_options(dataset, options)
    _, config_cls = _registry()[dataset]
    values = dict(options)
    if dataset == "composite":
        values["datasets"] = _composite_specs(values.get("datasets"))
    try:
        config = config_cls(**values, seed=seed, size=size)
        if callable(getattr(config, "validate", None)):
            config.validate()
    except Exception as exc:  # noqa: BLE001 - reasoning-gym validates with assert and ValueError alike
        raise ValueError(f"'config' is not valid for reasoning-gym dataset {dataset!r}: "
                         f"{str(exc) or type(exc).__name__} (config: {json.dumps(dict(options), default=repr)})"
                         ) from None
    return config


def _composite_specs(items: Any) -> list[Any]:
    """``config.datasets`` of a composite, ``[{name, weight (default 1), config (default {})}]``, as reasoning-gym's
    ``DatasetSpec`` list, each member checked like a dataset of its own."""
    from reasoning_gym.composite import DatasetSpec

    if not isinstance(items, (list, tuple)) or not items:
        raise ValueError("'config' of dataset 'composite' needs 'datasets': a non-empty list of "
                         "{name, weight, config} (e.g. [{name: leg_counting, weight: 1}, {name: gcd, weight: 2}])")
    specs = []
    for i, item in enumerate(items):
        where = f"'config.datasets[{i}]'"
        if not isinstance(item, Mapping) or "name" not in item:
            raise ValueError(f"{where} must be a mapping with 'name' (and optionally 'weight' and 'config')")
        extra = sorted(set(item) - {"name", "weight", "config"})
        if extra:
            raise ValueError(f"{where} has the unknown key {extra[0]!r}; its keys: name, weight, config")
        name, weight, sub = item["name"], item.get("weight", 1.0), item.get("config") or {}
        if name == "composite":
            raise ValueError(f"{where}: a composite cannot contain a composite")
        _check_name(name, f"{where}: 'name'")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0:
            raise ValueError(f"{where}: 'weight' must be a positive number, got {weight!r}")
        if not isinstance(sub, Mapping):
            raise ValueError(f"{where}: 'config' must be a mapping, got {sub!r}")
        try:
            check_options(name, sub)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        specs.append(DatasetSpec(name=name, weight=float(weight), config=dict(sub)))
    return specs


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep reasoning-gym's prints and warnings off the console (they would break a run's live progress); one
    thread at a time (:data:`_LOCK`)."""
    with _LOCK, contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def quietly(call: Callable[[], T]) -> T:
    """``call()`` with reasoning-gym's console output swallowed."""
    with _quiet():
        return call()


class Problems:
    """One configured reasoning-gym dataset, shared by every env made with the same options in a process.

    reasoning-gym generates entry ``i`` from ``Random(seed + i)`` on demand; generated entries are kept (the
    slowest datasets take half a second per entry) and handed out as copies, so a scorer that edits its entry
    cannot change the next episode.
    """

    def __init__(self, dataset: str, options: Mapping[str, Any], *, seed: int, size: int) -> None:
        self.name = dataset
        self.size = size
        config = dataset_config(dataset, options, seed=seed, size=size)
        dataset_cls, _ = _registry()[dataset]
        try:
            self.dataset = quietly(lambda: dataset_cls(config=config))
        except Exception as exc:  # noqa: BLE001 - e.g. a composite member's config that its dataset refuses
            raise ConfigError(f"reasoning-gym dataset {dataset!r} could not be made with config "
                              f"{json.dumps(dict(options), default=repr)}: {str(exc) or type(exc).__name__}") from exc
        self._entries: OrderedDict[int, dict[str, Any]] = OrderedDict()

    def entry(self, index: int) -> dict[str, Any]:
        """A copy of entry ``index`` (``question``, ``answer``, ``metadata``).

        :raises EnvError: reasoning-gym failed to generate it (a config it accepted but cannot generate from).
        """
        with _LOCK:
            if index not in self._entries:
                try:
                    self._entries[index] = quietly(lambda: self.dataset[index])
                except Exception as exc:
                    raise EnvError(f"reasoning-gym dataset {self.name!r} could not generate problem {index}: "
                                   f"{type(exc).__name__}: {exc}", hint="check the env's config options") from exc
                if len(self._entries) > _ENTRIES_KEPT:
                    self._entries.popitem(last=False)
            return copy.deepcopy(self._entries[index])

    def score(self, answer: str, entry: dict[str, Any]) -> float:
        """reasoning-gym's own ``score_answer(answer, entry)`` (it may raise)."""
        return quietly(lambda: self.dataset.score_answer(answer, entry))


_PROBLEMS: OrderedDict[str, Problems] = OrderedDict()


def problems(dataset: str, options: Mapping[str, Any], *, seed: int, size: int) -> Problems:
    """The shared :class:`Problems` of this configuration (made on first use; the last few are kept)."""
    key = json.dumps([dataset, options, seed, size], sort_keys=True, default=repr)
    with _LOCK:
        if key in _PROBLEMS:
            _PROBLEMS.move_to_end(key)
        else:
            _PROBLEMS[key] = Problems(dataset, options, seed=seed, size=size)
            if len(_PROBLEMS) > _CACHE_SIZE:
                _PROBLEMS.popitem(last=False)
        return _PROBLEMS[key]
