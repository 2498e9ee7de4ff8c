"""ragen's gymnasium adapter: any registered gymnasium env with text observations, an "ansi" render or integer
observations, and a Discrete action space, played as a ragen env (``env: gymnasium`` with ``id``, or
``env: gym.<id>``). Importing this package does no work; see :mod:`ragen_plugins_gymnasium.env`."""
